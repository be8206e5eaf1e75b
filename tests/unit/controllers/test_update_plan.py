"""The update controller's pure decisions: plan contents, what starts, the status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from racksmith.controllers.update import plan as decide
from racksmith.controllers.update.names import plan_owner
from racksmith.controllers.update.plan import MachineView, Observed
from racksmith.kinds.cluster import Role
from racksmith.kinds.lcm import (
    ClusterUpdatePlan,
    ClusterUpdatePlanSpec,
    ClusterUpdatePlanStatus,
    Impact,
    MachineProgress,
    PlanPhase,
    StepPhase,
)
from racksmith.planners.maintenance import NodeProgress, NodeState
from racksmith.planners.update import GroupPolicy, Schedule, plan_update

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
OWNER = plan_owner("default", "demo-rel-2")
CP = frozenset({Role.MASTER, Role.ETCD, Role.NODE})


def cluster_machines(workers: int = 4, masters: int = 3, release: str = "rel-1"
                     ) -> list[MachineView]:
    out = [MachineView(f"m{i}", "demo-control", CP, release=release) for i in range(masters)]
    out += [MachineView(f"w{i}", "demo-default", release=release,
                        labels={"metal.racksmith.io/rack": f"r{i % 2}"})
            for i in range(workers)]
    return out


def groups(concurrency: int = 2) -> list[GroupPolicy]:
    return decide.default_group_specs("demo", concurrency)


def schedule_of(machines: list[MachineView], concurrency: int = 2,
                limits: dict[str, int] | None = None, per_machine: float = 600.0) -> Schedule:
    out = plan_update(decide.update_inputs(machines, groups(concurrency), limits or {},
                                           per_machine))
    assert isinstance(out, Schedule), out
    return out


def a_plan(schedule: Schedule, commence: bool = False,
           status: ClusterUpdatePlanStatus | None = None) -> ClusterUpdatePlan:
    steps = decide.build_steps(schedule, commence=commence, per_machine=600.0,
                               estimate_info="x")
    return ClusterUpdatePlan.model_validate({
        "apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "ClusterUpdatePlan",
        "metadata": {"name": "demo-rel-2", "namespace": "default", "generation": 1},
        "spec": ClusterUpdatePlanSpec(cluster="demo", source="rel-1", target="rel-2",
                                      steps=steps).model_dump(by_alias=True),
        "status": status.model_dump(by_alias=True) if status else None})


# --- durations, groups, creation --------------------------------------------------------


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (45, "45s"), (60, "1m0s"), (600, "10m0s"), (3723, "1h2m3s"), (3600, "1h0m0s"),
    (59.6, "1m0s"), (-5, "0s"),
])
def test_format_duration_is_go_style(seconds: float, text: str) -> None:
    assert decide.format_duration(seconds) == text


def test_default_groups_and_group_resolution() -> None:
    assert [(g.name, g.index, g.concurrent_updates) for g in groups(3)] == [
        ("demo-control", 0, 1), ("demo-default", 1, 3)]
    known = {"demo-control", "demo-default", "fast"}
    assert decide.group_of("demo", "fast", [Role.NODE], known) == "fast"
    assert decide.group_of("demo", "nope", [Role.NODE], known) == "demo-default"
    assert decide.group_of("demo", None, [Role.ETCD], known) == "demo-control"


def test_wants_plan_only_when_all_deployed_and_one_differs() -> None:
    assert decide.wants_plan("rel-2", cluster_machines())
    assert not decide.wants_plan("rel-1", cluster_machines())
    assert not decide.wants_plan("rel-2", [*cluster_machines(), MachineView("new", "g")])
    assert not decide.wants_plan("rel-2", [])
    assert decide.source_release(["a", "b", "b", "a", "c"]) == "a"
    assert decide.source_release(["b", "b", "a"]) == "b"


def test_steps_describe_the_schedule() -> None:
    schedule = schedule_of(cluster_machines(), limits={"metal.racksmith.io/rack": 1})
    steps = decide.build_steps(schedule, commence=True, per_machine=600.0,
                               estimate_info="spec.update.nodeDurationSeconds")
    assert [s.id for s in steps] == ["control-plane", "group-demo-default"]
    cp, workers = steps
    assert all(s.commence for s in steps)
    assert "m0, m1, m2" in (cp.description or "")
    assert cp.impact is not None and (cp.impact.users, cp.impact.workloads) == (
        Impact.MINOR, Impact.NONE)
    assert workers.impact is not None and (workers.impact.users, workers.impact.workloads) == (
        Impact.NONE, Impact.MINOR)
    assert cp.duration is not None and cp.duration.estimated == "30m0s"
    # 4 workers, concurrency 2 but one per rack at once: 2 rounds.
    assert workers.duration is not None and workers.duration.estimated == "20m0s"
    assert "10m0s each" in (workers.duration.info or "")
    assert "control-plane" in (workers.constraints or "")
    assert "metal.racksmith.io/rack: 1" in (workers.constraints or "")


def test_estimate_from_latest_completed_plan() -> None:
    def done(name: str, end: datetime, minutes: list[int]) -> ClusterUpdatePlan:
        plan = a_plan(schedule_of(cluster_machines()))
        machines = [MachineProgress(name=f"x{i}", started_at=end - timedelta(minutes=m),
                                    finished_at=end) for i, m in enumerate(minutes)]
        status = ClusterUpdatePlanStatus(phase=PlanPhase.COMPLETED, machines=machines)
        return plan.model_copy(update={"status": status, "metadata": plan.metadata.model_copy(
            update={"name": name})})
    old = done("old", NOW - timedelta(days=2), [100])
    new = done("new", NOW, [4, 6])
    running = a_plan(schedule_of(cluster_machines()))
    assert decide.estimate_from([old, new, running]) == (300.0, "new")
    assert decide.estimate_from([running]) is None


# --- done, in progress, what starts --------------------------------------------------------


def test_done_and_in_progress() -> None:
    m = MachineView("w0", "g", release="rel-2")
    assert decide.is_done(m, "rel-2", OWNER)
    held = MachineView("w0", "g", release="rel-2", nmr_owner=OWNER)
    assert not decide.is_done(held, "rel-2", OWNER) and decide.is_in_progress(held, "rel-2", OWNER)
    pinned = MachineView("w0", "g", release="rel-1", pinned="rel-2")
    assert decide.is_in_progress(pinned, "rel-2", OWNER)
    other = MachineView("w0", "g", release="rel-1", nmr_owner="reboot.default.demo")
    assert not decide.is_in_progress(other, "rel-2", OWNER)


def test_control_plane_one_at_a_time_then_workers_by_concurrency() -> None:
    schedule = schedule_of(cluster_machines())
    every = {"control-plane", "group-demo-default"}
    assert decide.to_start(schedule, set(), set(), every, etcd_healthy=True) == ["m0"]
    assert decide.to_start(schedule, set(), {"m0"}, every, etcd_healthy=True) == []
    assert decide.to_start(schedule, {"m0"}, set(), every, etcd_healthy=True) == ["m1"]
    assert decide.to_start(schedule, {"m0"}, set(), every, etcd_healthy=False) == []
    cp_done = {"m0", "m1", "m2"}
    assert decide.to_start(schedule, cp_done, set(), every, etcd_healthy=False) == ["w0", "w1"]
    assert decide.to_start(schedule, cp_done, {"w0"}, every, etcd_healthy=True) == ["w1"]


def test_uncommenced_steps_never_start_and_hold_the_barrier() -> None:
    schedule = schedule_of(cluster_machines())
    assert decide.to_start(schedule, set(), set(), set(), etcd_healthy=True) == []
    # Workers commenced, control plane not: the control-plane stage holds them back.
    assert decide.to_start(schedule, set(), set(), {"group-demo-default"},
                           etcd_healthy=True) == []


def test_max_unavailable_per_rack() -> None:
    schedule = schedule_of(cluster_machines(), concurrency=4,
                           limits={"metal.racksmith.io/rack": 1})
    started = decide.to_start(schedule, {"m0", "m1", "m2"}, set(), {"group-demo-default"},
                              etcd_healthy=True)
    assert started == ["w0", "w1"]  # racks r0 and r1, one each


def test_autopause_removes_commence_from_unstarted_steps() -> None:
    plan = a_plan(schedule_of(cluster_machines()), commence=True)
    out = decide.autopause(plan.spec.steps, {"control-plane"})
    assert out is not None
    assert [(s.id, s.commence) for s in out] == [("control-plane", True),
                                                  ("group-demo-default", False)]
    assert decide.autopause(out, {"control-plane"}) is None
    schedule = schedule_of(cluster_machines())
    assert decide.started_steps(schedule, {"m1"}, plan) == {"control-plane"}


def test_remaining_time_shrinks_with_progress() -> None:
    inputs = decide.update_inputs(cluster_machines(), groups(2), {}, 600.0)
    total = decide.remaining_seconds(inputs, set(), {})
    assert total == 3 * 600 + 2 * 600
    assert decide.remaining_seconds(inputs, {"m0"}, {"m1": 300.0}) == 300 + 600 + 1200
    assert decide.remaining_seconds(inputs, {m.name for m in cluster_machines()}, {}) == 0


# --- status ----------------------------------------------------------------------------


def observed(schedule: Schedule, **kw: object) -> Observed:
    base: dict[str, object] = {"schedule": schedule, "done": frozenset(), "advanced": {},
                               "started": {}, "finished": {}, "now": NOW}
    base.update(kw)
    return Observed(**base)  # type: ignore[arg-type]


def progress(state: NodeState, message: str = "", pct: int = 10) -> NodeProgress:
    return NodeProgress(state, message, pct, 5.0)


def test_status_not_started_then_in_progress_with_eta() -> None:
    schedule = schedule_of(cluster_machines(workers=2, masters=1))
    plan = a_plan(schedule)
    status = decide.plan_status(plan, observed(schedule))
    assert status.phase == PlanPhase.NOT_STARTED and status.eta is None
    assert [s.phase for s in status.steps] == [StepPhase.NOT_STARTED] * 2

    plan = a_plan(schedule, commence=True)
    status = decide.plan_status(plan, observed(
        schedule, advanced={"m0": progress(NodeState.DRAINING, "evicting", 30)},
        started={"m0": NOW}, remaining=1500.0))
    assert status.phase == PlanPhase.IN_PROGRESS
    assert status.started_at == NOW and status.eta == NOW + timedelta(seconds=1500)
    assert [s.phase for s in status.steps] == [StepPhase.IN_PROGRESS, StepPhase.SCHEDULED]
    m0 = status.machines[0]
    assert (m0.name, m0.state, m0.progress, m0.message, m0.started_at, m0.phase) == (
        "m0", "Draining", 30, "evicting", NOW, StepPhase.IN_PROGRESS)

    # Later, the ETA moves less than a minute: kept as it was (no status churn).
    plan2 = plan.model_copy(update={"status": status})
    later = NOW + timedelta(seconds=20)
    again = decide.plan_status(plan2, observed(
        schedule, advanced={"m0": progress(NodeState.DRAINING, "evicting", 30)},
        remaining=1500.0 - 50, now=later))
    assert again.eta == status.eta and again.started_at == NOW
    assert again.machines[0].started_at == NOW
    assert decide.same_status(status, again)


def test_status_done_blocked_and_completed() -> None:
    schedule = schedule_of(cluster_machines(workers=2, masters=1))
    start = MachineProgress(name="m0", started_at=NOW - timedelta(minutes=9))
    plan = a_plan(schedule, commence=True,
                  status=ClusterUpdatePlanStatus(machines=[start]))
    status = decide.plan_status(plan, observed(
        schedule, finished={"m0": NOW},
        advanced={"w0": progress(NodeState.BLOCKED, "drain blocked: pod x/y", 20)},
        started={"w0": NOW}, remaining=600.0))
    m0, w0, w1 = status.machines
    assert (m0.state, m0.phase, m0.progress, m0.finished_at) == (
        "Done", StepPhase.COMPLETED, 100, NOW)
    assert m0.started_at == start.started_at
    assert w0.phase == StepPhase.STUCK and w1.phase == StepPhase.SCHEDULED
    assert [s.phase for s in status.steps] == [StepPhase.COMPLETED, StepPhase.STUCK]
    assert "drain blocked" in (status.steps[1].message or "")
    cond = {c.type: c for c in status.conditions}
    assert cond["Blocked"].status.value == "True" and "w0" in (cond["Blocked"].message or "")
    assert cond["LockFailed"].status.value == "False"

    final = decide.plan_status(plan.model_copy(update={"status": status}), observed(
        schedule, done=frozenset({"m0", "w0", "w1"})))
    assert final.phase == PlanPhase.COMPLETED and final.eta is None
    assert all(s.phase == StepPhase.COMPLETED for s in final.steps)
    assert final.machines[0].finished_at == NOW  # kept from the earlier status
    assert {c.type: c.status.value for c in final.conditions}["Blocked"] == "False"


def test_status_autopaused_and_alert_source_down() -> None:
    schedule = schedule_of(cluster_machines(workers=2, masters=1))
    plan = a_plan(schedule, commence=False)
    status = decide.plan_status(plan, observed(
        schedule, firing=["KubeAPIDown"], alert_error="GET x: refused",
        cluster_lock_failed="ClusterWorkloadLock ref (reference) failed: pinned"))
    assert status.phase == PlanPhase.AUTO_PAUSED
    assert status.firing_alerts == ["KubeAPIDown"]
    assert [s.phase for s in status.steps] == [StepPhase.AUTO_PAUSED] * 2
    cond = {c.type: c for c in status.conditions}
    assert cond["AutoPaused"].status.value == "True"
    assert cond["AlertSourceReachable"].status.value == "False"
    assert "pinned" in (cond["LockFailed"].message or "")
