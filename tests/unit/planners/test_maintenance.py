"""The node maintenance state table: every state, the Blocked message naming the
pod and the budget, was-unschedulable never uncordoned, the reboot recorded
before it is requested and never repeated unless ten minutes passed with the
BMH annotation gone; property tests walk random worlds through the table."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.kinds.maintenance import MaintenanceScope
from racksmith.planners.drain import is_evictable
from racksmith.planners.maintenance import (
    CORDONED_BY,
    DRAIN_STARTED,
    REBOOT_BOOT_ID,
    REBOOT_REQUESTED,
    WAS_UNSCHEDULABLE,
    Cordon,
    CreateRequest,
    Evict,
    LcmView,
    LockView,
    MaintenanceTimings,
    NodeJob,
    NodeObserved,
    NodeState,
    NodeView,
    PodView,
    RebootPolicy,
    RecordReboot,
    Refusal,
    ReleaseReboot,
    RequestReboot,
    RequestView,
    SetRelease,
    StartDrain,
    Uncordon,
    Wait,
    decide,
    eviction_backoff,
    parse_owner,
    plan_owner,
    reboot_owner,
    rfc3339,
)

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
OWNER = "plan.ns.p"
JOB = NodeJob(namespace="ns", machine="m1", owner=OWNER, cluster="c", release="r2",
              reboot=RebootPolicy.IF_REQUIRED, drain_timeout=60)
STARTED = {DRAIN_STARTED: rfc3339(NOW - timedelta(seconds=10))}


def node(**kw: object) -> NodeView:
    base: dict[str, object] = {"name": "m1", "ready": True, "boot_id": "b1"}
    base.update(kw)
    return NodeView(**base)  # type: ignore[arg-type]


def cordoned(**kw: object) -> NodeView:
    return node(unschedulable=True, annotations={CORDONED_BY: OWNER}, **kw)


def lcm(release: str = "r2", **kw: object) -> LcmView:
    base: dict[str, object] = {"spec_release": release, "generation": 2, "phase": "Ready",
                               "observed_generation": 2, "release": release}
    base.update(kw)
    return LcmView(**base)  # type: ignore[arg-type]


def world(**kw: object) -> NodeObserved:
    """A node drained, applied at r2, not needing a reboot."""
    base: dict[str, object] = {
        "job": JOB, "now": NOW, "node": cordoned(),
        "request": RequestView(OWNER, dict(STARTED)), "machine_release": "r2",
        "lcm": lcm(), "bmh": "h1"}
    base.update(kw)
    return NodeObserved(**base)  # type: ignore[arg-type]


def test_requested_and_waiting_for_other() -> None:
    d = decide(world(request=None, node=node()))
    assert d.progress.state == NodeState.REQUESTED
    assert d.action == CreateRequest(was_unschedulable=False)
    d = decide(world(request=None, node=node(unschedulable=True)))
    assert d.action == CreateRequest(was_unschedulable=True)
    # Cordoned by an owner (a leftover of a crash) is not the user's cordon.
    d = decide(world(request=None, node=node(unschedulable=True,
                                             annotations={CORDONED_BY: "plan.ns.old"})))
    assert d.action == CreateRequest(was_unschedulable=False)
    d = decide(world(request=RequestView("reboot.ns.c")))
    assert d.progress.state == NodeState.WAITING_FOR_OTHER
    assert d.progress.message == "node in maintenance by reboot.ns.c"
    assert isinstance(d.action, Wait)
    d = decide(world(request=None, node=None))
    assert d.progress.state == NodeState.WAITING_FOR_NODE and isinstance(d.action, Wait)


def test_locks() -> None:
    active = LockView("ctrl.m1", "ctrl", "active", progress=50, description="moving")
    d = decide(world(locks=(active, LockView("x.m1", "x", "inactive"))))
    assert d.progress.state == NodeState.WAITING_FOR_LOCKS
    assert "ctrl.m1 (ctrl)" in d.progress.message and "x.m1" not in d.progress.message
    assert 5 < d.progress.progress < 20
    failed = LockView("ctrl.m1", "ctrl", "failed", error_message="pinned: db")
    d = decide(world(locks=(active, failed)))
    assert d.progress.state == NodeState.LOCK_FAILED
    assert d.progress.message == "NodeWorkloadLock ctrl.m1 (ctrl) failed: pinned: db"
    assert d.progress.requeue == 10.0 and isinstance(d.action, Wait)


def test_cordon_then_drain_started() -> None:
    d = decide(world(node=node(), request=RequestView(OWNER)))
    assert d.progress.state == NodeState.DRAINING and d.action == Cordon(mark=True)
    d = decide(world(node=cordoned(), request=RequestView(OWNER)))
    assert d.action == StartDrain(NOW)
    # Cordoned by the user before: never marked as ours.
    was = RequestView(OWNER, {WAS_UNSCHEDULABLE: "true"})
    d = decide(world(node=node(unschedulable=True), request=was))
    assert d.action == StartDrain(NOW)
    d = decide(world(node=node(), request=was))
    assert d.action == Cordon(mark=False)
    # Someone uncordoned our node in the middle of the drain: cordon again.
    d = decide(world(node=node(annotations={CORDONED_BY: OWNER})))
    assert d.action == Cordon(mark=True)


def test_draining_evicts_due_pods_and_blocked_names_pod_and_budget() -> None:
    refusal = Refusal("The disruption budget web needs 2 healthy pods and has 2 currently",
                      "web")
    pods = (PodView("ns", "a"), PodView("ns", "web-1", refusal, NOW + timedelta(seconds=4)))
    d = decide(world(pods=pods))
    assert d.progress.state == NodeState.DRAINING
    assert d.action == Evict((pods[0],))
    assert "refused" in d.progress.message
    d = decide(world(pods=pods[1:]))
    assert isinstance(d.action, Wait) and d.progress.requeue == 4.0
    late = {DRAIN_STARTED: rfc3339(NOW - timedelta(seconds=61))}
    d = decide(world(pods=pods[1:], request=RequestView(OWNER, late)))
    assert d.progress.state == NodeState.BLOCKED
    assert d.progress.message == (
        "drain blocked: pod ns/web-1 is protected by PodDisruptionBudget ns/web "
        "(The disruption budget web needs 2 healthy pods and has 2 currently)")
    # Blocked keeps retrying.
    due = (replace(pods[1], retry_at=NOW),)
    d = decide(world(pods=due, request=RequestView(OWNER, late)))
    assert d.progress.state == NodeState.BLOCKED and d.action == Evict(due)


def test_applying() -> None:
    d = decide(world(machine_release=None))
    assert d.progress.state == NodeState.APPLYING and d.action == SetRelease("r2")
    d = decide(world(lcm=lcm("r1")))
    assert d.progress.state == NodeState.APPLYING and isinstance(d.action, Wait)
    d = decide(world(lcm=lcm(phase="Failed", error="kernel: boom")))
    assert "Failed" in d.progress.message and "kernel: boom" in d.progress.message
    d = decide(world(lcm=lcm(observed_generation=1)))
    assert d.progress.state == NodeState.APPLYING
    d = decide(world(lcm=None))
    assert d.progress.state == NodeState.APPLYING
    # No release: nothing applied.
    d = decide(world(job=replace(JOB, release=None), machine_release=None, lcm=None))
    assert d.progress.state == NodeState.UNCORDONING


def test_reboot_recorded_before_requested_then_waits() -> None:
    obs = world(lcm=lcm(reboot_required=True))
    d = decide(obs)
    assert d.progress.state == NodeState.REBOOTING and d.action == RecordReboot("b1")
    rec = RequestView(OWNER, {**STARTED, REBOOT_BOOT_ID: "b1"})
    d = decide(replace(obs, request=rec))
    assert d.action == RequestReboot("h1", NOW)
    asked = RequestView(OWNER, {**STARTED, REBOOT_BOOT_ID: "b1", REBOOT_REQUESTED: rfc3339(NOW)})
    d = decide(replace(obs, request=asked, bmh_reboot_pending=True, bmh_powered_on=True))
    assert d.progress.state == NodeState.REBOOTING and isinstance(d.action, Wait)
    assert "to power off" in d.progress.message
    # Metal3's keyed reboot holds the host off until the key goes: once it
    # reads off, the flow removes its key and the host powers on again.
    d = decide(replace(obs, request=asked, bmh_reboot_pending=True, bmh_powered_on=False))
    assert d.action == ReleaseReboot("h1")
    # The annotation is gone but the node did not boot yet: no repeat before 10 minutes.
    for minutes in (0, 5, 9.9):
        d = decide(replace(obs, request=asked, now=NOW + timedelta(minutes=minutes)))
        assert isinstance(d.action, Wait), minutes
    later = NOW + timedelta(minutes=10)
    d = decide(replace(obs, request=asked, now=later))
    assert d.action == RequestReboot("h1", later)
    # Never while the annotation is still there, however long.
    d = decide(replace(obs, request=asked, now=later + timedelta(hours=1),
                       bmh_reboot_pending=True))
    assert isinstance(d.action, Wait)
    # A new boot ID: done, even though rebootRequired is still reported.
    d = decide(replace(obs, request=asked, node=cordoned(boot_id="b2")))
    assert d.progress.state == NodeState.READY_TO_FINISH or isinstance(d.action, Uncordon)
    # No host: cannot reboot.
    d = decide(replace(obs, request=rec, bmh=None))
    assert isinstance(d.action, Wait) and "no BareMetalHost" in d.progress.message


def test_reboot_policies() -> None:
    needs = lcm(reboot_required=True)
    assert isinstance(decide(world(lcm=needs)).action, RecordReboot)
    never = replace(JOB, reboot=RebootPolicy.NEVER)
    assert decide(world(job=never, lcm=needs)).progress.state == NodeState.UNCORDONING
    drain = replace(JOB, scope=MaintenanceScope.DRAIN)
    assert decide(world(job=drain, lcm=needs)).progress.state == NodeState.UNCORDONING
    always = replace(JOB, reboot=RebootPolicy.ALWAYS)
    assert isinstance(decide(world(job=always)).action, RecordReboot)
    assert decide(world(job=always, node=cordoned(boot_id=None))).progress.state == \
        NodeState.REBOOTING


def test_waiting_for_node_uncordon_and_ready_to_finish() -> None:
    d = decide(world(node=cordoned(ready=False)))
    assert d.progress.state == NodeState.WAITING_FOR_NODE and isinstance(d.action, Wait)
    d = decide(world())
    assert d.progress.state == NodeState.UNCORDONING and d.action == Uncordon(False)
    # After the uncordon: ready to finish, and never cordoned again (even with pods back).
    done = world(node=node(), pods=(PodView("ns", "back"),))
    d = decide(done)
    assert d.progress.state == NodeState.READY_TO_FINISH and d.progress.progress == 100


def test_was_unschedulable_is_never_uncordoned() -> None:
    was = RequestView(OWNER, {**STARTED, WAS_UNSCHEDULABLE: "true"})
    d = decide(world(node=node(unschedulable=True), request=was))
    assert d.progress.state == NodeState.READY_TO_FINISH
    # Marked by mistake: the mark goes, the cordon stays.
    d = decide(world(node=cordoned(), request=was))
    assert d.action == Uncordon(keep_cordoned=True)


def test_helpers() -> None:
    assert plan_owner("ns", "p.1") == "plan.ns.p.1"
    assert parse_owner(plan_owner("ns", "p.1")) == ("plan", "ns", "p.1")
    assert parse_owner(reboot_owner("ns", "c")) == ("reboot", "ns", "c")
    assert parse_owner("bad") is None
    assert [eviction_backoff(n, MaintenanceTimings()) for n in range(7)] == [
        0, 2, 4, 8, 16, 30, 30]
    assert is_evictable((), {}, False)
    assert not is_evictable(("DaemonSet",), {}, False)
    assert not is_evictable((), {"kubernetes.io/config.mirror": "x"}, False)
    assert not is_evictable(("ReplicaSet",), {}, True)


# --- property: walking the table through a simulated world ---------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[NodeJob, bool, bool, int, bool]:
    policy = draw(st.sampled_from(list(RebootPolicy)))
    release = draw(st.sampled_from([None, "r2"]))
    job = replace(JOB, reboot=policy, release=release)
    return (job, draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 3)),
            draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_walk_reaches_ready_to_finish_once_each(
        scenario: tuple[NodeJob, bool, bool, int, bool]) -> None:
    """Apply each action to a simulated world; the flow ends at ReadyToFinish, the
    reboot is asked at most once and recorded first, a node cordoned before stays
    cordoned, and asking again at the end changes nothing."""
    job, was_cordoned, reboot_required, pods, restart_midway = scenario
    n = node(unschedulable=was_cordoned, annotations={})
    req: RequestView | None = None
    machine_release: str | None = None
    pod_views = tuple(PodView("ns", f"p{i}") for i in range(pods))
    boot = "b1"
    reboots = 0
    now = NOW
    actions: list[str] = []
    for _ in range(40):
        obs = NodeObserved(job=job, now=now, node=n, request=req, pods=pod_views,
                           machine_release=machine_release,
                           lcm=lcm(reboot_required=reboot_required and boot == "b1"),
                           bmh="h1", bmh_reboot_pending=False)
        d = decide(obs)
        if d.progress.state == NodeState.READY_TO_FINISH:
            break
        a = d.action
        actions.append(type(a).__name__)
        ann = dict(req.annotations) if req else {}
        match a:
            case CreateRequest(was_unschedulable=w):
                req = RequestView(job.owner, {WAS_UNSCHEDULABLE: "true"} if w else {})
            case Cordon(mark=mark):
                n = replace(n, unschedulable=True,
                            annotations={CORDONED_BY: job.owner} if mark else {})
            case StartDrain(at=at):
                req = RequestView(job.owner, {**ann, DRAIN_STARTED: rfc3339(at)})
            case Evict(pods=evicted):
                pod_views = tuple(p for p in pod_views if p not in evicted)
            case SetRelease(release=r):
                machine_release = r
            case RecordReboot(boot_id=b):
                assert REBOOT_BOOT_ID not in ann
                req = RequestView(job.owner, {**ann, REBOOT_BOOT_ID: b})
            case RequestReboot(at=at):
                assert ann.get(REBOOT_BOOT_ID) == boot  # recorded before requested
                reboots += 1
                req = RequestView(job.owner, {**ann, REBOOT_REQUESTED: rfc3339(at)})
                boot = "b2"  # the host power-cycles and boots
            case Uncordon(keep_cordoned=keep):
                n = replace(n, unschedulable=n.unschedulable and keep, annotations={})
            case Wait():
                raise AssertionError(f"waits in {d.progress}")
        n = replace(n, boot_id=boot)
        if restart_midway:
            now += timedelta(seconds=1)
    else:
        raise AssertionError(f"no end: {actions}")
    expect_reboot = job.reboot == RebootPolicy.ALWAYS or (
        job.reboot == RebootPolicy.IF_REQUIRED and reboot_required)
    assert reboots == (1 if expect_reboot else 0)
    assert len(actions) == len(set(actions)), actions  # nothing done twice
    assert n.unschedulable == was_cordoned
    assert CORDONED_BY not in n.annotations
    # At the end, asking again (pods scheduled back) changes nothing.
    again = decide(NodeObserved(job=job, now=now + timedelta(hours=1), node=n, request=req,
                                pods=(PodView("ns", "back"),) if not was_cordoned else (),
                                machine_release=machine_release, lcm=lcm(), bmh="h1"))
    assert again.progress.state == NodeState.READY_TO_FINISH


def test_timings_are_inputs() -> None:
    """Every wait of the table comes from ``NodeObserved.timings``."""
    fast = MaintenanceTimings(poll=0.3, lock_retry=0.4, reboot_retry=2.0,
                              eviction_backoff_base=0.1, eviction_backoff_cap=0.5)
    d = decide(world(request=RequestView("reboot.ns.c"), timings=fast))
    assert d.progress.state == NodeState.WAITING_FOR_OTHER and d.progress.requeue == 0.4
    failed = LockView("ctrl.m1", "ctrl", "failed", error_message="pinned: db")
    assert decide(world(locks=(failed,), timings=fast)).progress.requeue == 0.4
    d = decide(world(node=cordoned(ready=False), timings=fast))
    assert d.progress.state == NodeState.WAITING_FOR_NODE and d.progress.requeue == 0.3
    obs = world(lcm=lcm(reboot_required=True), timings=fast)
    asked = RequestView(OWNER, {**STARTED, REBOOT_BOOT_ID: "b1", REBOOT_REQUESTED: rfc3339(NOW)})
    d = decide(replace(obs, request=asked, now=NOW + timedelta(seconds=1.5)))
    assert isinstance(d.action, Wait) and d.progress.requeue == 0.3
    later = NOW + timedelta(seconds=2)
    d = decide(replace(obs, request=asked, now=later))
    assert d.action == RequestReboot("h1", later)
    assert "within 2 s" in d.progress.message
    assert [eviction_backoff(n, fast) for n in range(6)] == [0, 0.1, 0.2, 0.4, 0.5, 0.5]


def test_an_owner_too_long_for_a_label_is_a_digest_that_names_nothing() -> None:
    """plan.<ns>.<plan> fits a label value (63 characters) as it is; past
    that the owner is plan-h.<sha256>: a valid label value, stable, and never
    parsed into a namespace and name it is not (the sweep matches it by
    recomputing plan_owner of the plans that exist)."""
    import re

    from racksmith.planners.maintenance import (
        hashed_owner_prefix,
        parse_owner,
        plan_owner,
        reboot_owner,
    )

    assert plan_owner("default", "demo-racksmith-1.1.0") == "plan.default.demo-racksmith-1.1.0"
    assert parse_owner("plan.default.demo-racksmith-1.1.0") == (
        "plan", "default", "demo-racksmith-1.1.0")
    long_ns, long_name = "a-team-namespace-" + "x" * 40, "cluster-" + "y" * 60 + "-1.2.3"
    for owner, prefix in ((plan_owner(long_ns, long_name), "plan"),
                          (reboot_owner(long_ns, long_name), "reboot")):
        assert len(owner) <= 63
        assert re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", owner), owner
        assert hashed_owner_prefix(owner) == prefix and parse_owner(owner) is None
    assert plan_owner(long_ns, long_name) == plan_owner(long_ns, long_name)
    assert plan_owner(long_ns, long_name) != plan_owner(long_ns, long_name + "z")
