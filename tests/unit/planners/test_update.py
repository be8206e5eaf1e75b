"""The update planner: exact order on a hand-made fleet, the control plane and
etcd one at a time, rack limits, resume, refusals, ``check`` catching broken
schedules, and property tests over random fleets (valid, within the bounds,
each machine once, ``next_machines`` safe and replaying the schedule)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.kinds.cluster import Role
from racksmith.planners.update import (
    CONTROL_PLANE_STEP,
    RACK_LABEL,
    ZONE_LABEL,
    GroupPolicy,
    Schedule,
    Step,
    UpdateError,
    UpdateInputs,
    UpdateMachine,
    check,
    lower_bound,
    next_machines,
    plan_update,
    upper_bound,
)

CP = frozenset({Role.MASTER, Role.ETCD})
WORKER = frozenset({Role.NODE})


def ok(result: Schedule | list[UpdateError]) -> Schedule:
    assert isinstance(result, Schedule), result
    return result


def fleet(
    done: frozenset[str] = frozenset(),
    rack_limit: int | None = 1,
    durations: dict[str, float] | None = None,
) -> UpdateInputs:
    """3 control-plane+etcd machines, 6 workers in 2 racks, 2 worker groups."""
    durations = durations or {}
    machines = [
        UpdateMachine(f"cp-{i}", "c-control", CP, upgrade_index=3 - i,
                      labels={RACK_LABEL: "r1"}, requires_reboot=True,
                      duration=durations.get(f"cp-{i}"))
        for i in range(3)
    ]
    for i in range(6):
        machines.append(UpdateMachine(
            f"w-{i}", "c-default" if i < 4 else "c-late", WORKER,
            labels={RACK_LABEL: f"r{i % 2 + 1}", ZONE_LABEL: "z1"},
            requires_reboot=i % 2 == 0, duration=durations.get(f"w-{i}"),
        ))
    groups = (
        GroupPolicy("c-control", 0, 1, True),
        GroupPolicy("c-default", 1, 2, True),
        GroupPolicy("c-late", 2, 2, False),
    )
    limits = {} if rack_limit is None else {RACK_LABEL: rack_limit}
    return UpdateInputs(tuple(machines), groups, 600.0, limits, done)


def order(step: Step) -> list[tuple[float, str]]:
    return [(s.start, s.machine) for s in step.slots]


# --- hand-made fleets ----------------------------------------------------------------


def test_nine_node_fleet_exact_order() -> None:
    schedule = ok(plan_update(fleet()))
    assert check(schedule, fleet()) == []
    assert [s.id for s in schedule.steps] == [CONTROL_PLANE_STEP, "group-c-default", "group-c-late"]
    assert [s.stage for s in schedule.steps] == [0, 1, 2]
    control, default, late = schedule.steps
    # upgradeIndex decides: cp-2 (1), cp-1 (2), cp-0 (3); strictly one after the other.
    assert order(control) == [(0, "cp-2"), (600, "cp-1"), (1200, "cp-0")]
    # concurrency 2, one per rack: w-0 (r1) with w-1 (r2), then w-2 with w-3.
    assert order(default) == [(1800, "w-0"), (1800, "w-1"), (2400, "w-2"), (2400, "w-3")]
    assert [w.start for w in default.waves] == [1800, 2400]
    assert order(late) == [(3000, "w-4"), (3000, "w-5")]
    assert schedule.makespan == 3600
    assert lower_bound(schedule) == 3 * 600 + 1200 + 600
    assert upper_bound(schedule) >= schedule.makespan
    assert (default.start, default.end, default.duration) == (1800, 3000, 1200)
    slot = schedule.slot("w-4")
    assert slot is not None and slot.end == 3600
    assert schedule.slot("nope") is None


def test_reboot_needs_the_machine_and_its_group() -> None:
    schedule = ok(plan_update(fleet()))
    reboots = {s.machine: s.reboot for s in schedule.slots}
    assert reboots == {
        "cp-0": True, "cp-1": True, "cp-2": True,
        "w-0": True, "w-1": False, "w-2": True, "w-3": False,
        "w-4": False,  # requires a reboot, but c-late does not allow it
        "w-5": False,
    }


def test_etcd_never_two_at_once_even_in_a_wide_group() -> None:
    machines = (
        UpdateMachine("m-0", "wide", frozenset({Role.MASTER, Role.ETCD})),
        UpdateMachine("e-0", "wide", frozenset({Role.ETCD})),
        UpdateMachine("e-1", "wide", frozenset({Role.ETCD, Role.NODE})),
        UpdateMachine("n-0", "wide", WORKER),
    )
    inputs = UpdateInputs(machines, (GroupPolicy("wide", 0, 10),), 100.0)
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    control = schedule.steps[0]
    assert order(control) == [(0, "e-0"), (100, "e-1"), (200, "m-0")]
    assert order(schedule.steps[1]) == [(300, "n-0")]


def test_rack_limit_respected_and_lower_ranks_overtake_only_when_blocked() -> None:
    machines = tuple(
        UpdateMachine(f"w-{i}", "g", WORKER, labels={RACK_LABEL: rack})
        for i, rack in enumerate(["a", "a", "a", "b"])
    )
    inputs = UpdateInputs(machines, (GroupPolicy("g", 0, 3),), 10.0, {RACK_LABEL: 1})
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    # w-1 and w-2 are blocked by rack a; w-3 (rack b) overtakes them.
    assert order(schedule.steps[0]) == [(0, "w-0"), (0, "w-3"), (10, "w-1"), (20, "w-2")]
    assert schedule.makespan == 30 == lower_bound(schedule)


def test_zone_and_rack_limits_together() -> None:
    machines = tuple(
        UpdateMachine(f"w-{i}", "g", WORKER,
                      labels={RACK_LABEL: f"r{i % 4}", ZONE_LABEL: f"z{i % 2}"})
        for i in range(8)
    )
    limits = {RACK_LABEL: 1, ZONE_LABEL: 1}
    inputs = UpdateInputs(machines, (GroupPolicy("g", 0, 8),), 5.0, limits)
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    assert [len(w.slots) for w in schedule.steps[0].waves] == [2, 2, 2, 2]
    assert schedule.makespan == 20 == lower_bound(schedule)


def test_equal_indices_run_together() -> None:
    machines = (
        UpdateMachine("a-0", "a", WORKER), UpdateMachine("a-1", "a", WORKER),
        UpdateMachine("b-0", "b", WORKER),
        UpdateMachine("c-0", "c", WORKER),
    )
    groups = (GroupPolicy("c", 5), GroupPolicy("b", 1), GroupPolicy("a", 1))
    inputs = UpdateInputs(machines, groups, 10.0)
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    assert [(s.id, s.stage) for s in schedule.steps] == [
        ("group-a", 1), ("group-b", 1), ("group-c", 2)]
    assert [(s.start, s.end) for s in schedule.steps] == [(0, 20), (0, 10), (20, 30)]
    assert next_machines(schedule, [], []) == ["a-0", "b-0"]


def test_resume_skips_done_machines() -> None:
    done = frozenset({"cp-2", "cp-1", "w-0"})
    inputs = fleet(done=done)
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    assert not done & {s.machine for s in schedule.slots}
    assert [s.id for s in schedule.steps] == [CONTROL_PLANE_STEP, "group-c-default", "group-c-late"]
    assert order(schedule.steps[0]) == [(0, "cp-0")]
    assert order(schedule.steps[1]) == [(600, "w-1"), (600, "w-2"), (1200, "w-3")]
    assert next_machines(schedule, [], []) == ["cp-0"]
    assert next_machines(schedule, ["cp-0"], []) == ["w-1", "w-2"]
    # Every done machine gone: the step stays, empty, so the plan keeps its shape.
    everything = frozenset(m.name for m in inputs.machines)
    finished = ok(plan_update(replace(inputs, done=everything)))
    assert len(finished.steps) == 3 and finished.makespan == 0 == lower_bound(finished)
    assert next_machines(finished, [], []) == []


def test_next_machines_follows_the_stages_and_limits() -> None:
    schedule = ok(plan_update(fleet()))
    assert next_machines(schedule, [], []) == ["cp-2"]
    assert next_machines(schedule, [], ["cp-2"]) == []
    assert next_machines(schedule, ["cp-2"], []) == ["cp-1"]
    cps = ["cp-0", "cp-1", "cp-2"]
    assert next_machines(schedule, cps, []) == ["w-0", "w-1"]
    assert next_machines(schedule, cps, ["w-0"]) == ["w-1"]
    # w-0 done, w-1 running: w-2 (rack r1) may start, w-3 (rack r2) may not.
    assert next_machines(schedule, [*cps, "w-0"], ["w-1"]) == ["w-2"]
    # The next stage waits for every machine of this one, running ones included.
    assert next_machines(schedule, [*cps, "w-0", "w-1", "w-2"], ["w-3"]) == []
    # A running machine listed as done still counts and is never returned.
    assert next_machines(schedule, [*cps, "w-0", "w-1"], ["w-1"]) == ["w-2"]
    all_done = [s.machine for s in schedule.slots]
    assert next_machines(schedule, all_done, []) == []


def test_default_and_own_durations() -> None:
    inputs = fleet(durations={"w-0": 1000.0, "cp-1": 60.0})
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    durations = {s.machine: s.duration for s in schedule.slots}
    assert durations["w-0"] == 1000 and durations["cp-1"] == 60 and durations["w-5"] == 600


@pytest.mark.parametrize(("change", "message"), [
    (lambda i: replace(i, default_duration=0.0), "defaultDuration: must be positive and finite"),
    (lambda i: replace(i, max_unavailable={RACK_LABEL: 0}),
     f"maxUnavailable[{RACK_LABEL}]: limit 0 must be >= 1"),
    (lambda i: replace(i, groups=(*i.groups, GroupPolicy("c-late", 3))),
     "groups[3]: duplicate update group 'c-late'"),
    (lambda i: replace(i, groups=(GroupPolicy("c-control", 0, 0), *i.groups[1:])),
     "groups[0].concurrentUpdates: must be >= 1"),
    (lambda i: replace(i, groups=(GroupPolicy("c-control", -1), *i.groups[1:])),
     "groups[0].index: must be >= 0"),
    (lambda i: replace(i, machines=(*i.machines, i.machines[0])),
     "machines[9]: duplicate machine 'cp-0'"),
    (lambda i: replace(i, machines=(UpdateMachine("x", "nope"),)),
     "machines[0].group: unknown update group 'nope'"),
    (lambda i: replace(i, machines=(UpdateMachine("x", "c-late", duration=float("nan")),)),
     "machines[0].duration: must be positive and finite"),
    (lambda i: replace(i, machines=(UpdateMachine("x", "c-late", upgrade_index=-1),)),
     "machines[0].upgradeIndex: must be >= 0"),
    (lambda i: replace(i, done=frozenset({"ghost"})), "done: unknown machine 'ghost'"),
])
def test_refusals(change: Callable[[UpdateInputs], UpdateInputs], message: str) -> None:
    inputs = change(fleet())
    errors = plan_update(inputs)
    assert isinstance(errors, list)
    assert message in [str(e) for e in errors]
    assert message in check(ok(plan_update(fleet())), inputs)


def test_error_str_without_field() -> None:
    assert str(UpdateError("", "boom")) == "boom"


# --- check catches broken schedules --------------------------------------------------


def _with_slot(schedule: Schedule, who: str, **changes: object) -> Schedule:
    steps = []
    for step in schedule.steps:
        waves = tuple(
            replace(w, slots=tuple(
                replace(s, **changes) if s.machine == who else s  # type: ignore[arg-type]
                for s in w.slots))
            for w in step.waves
        )
        steps.append(replace(step, waves=waves))
    return replace(schedule, steps=tuple(steps))


def test_check_catches_broken_schedules() -> None:
    inputs = fleet()
    good = ok(plan_update(inputs))

    def problems(bad: Schedule) -> str:
        found = check(bad, inputs)
        assert found
        return "\n".join(found)

    assert "etcd members ['cp-1', 'cp-2'] are down together" in problems(
        _with_slot(good, "cp-1", start=0.0))
    assert "control-plane machines" in problems(_with_slot(good, "cp-1", start=0.0))
    assert "starts before cp-1, which ranks first" in problems(
        _with_slot(_with_slot(good, "cp-1", start=1200.0), "cp-0", start=600.0))
    assert f"{RACK_LABEL}=r1 has 2 machines in update (maxUnavailable 1)" in problems(
        _with_slot(good, "w-2", start=1800.0))
    assert "before the earlier steps end" in problems(_with_slot(good, "w-4", start=2000.0))
    assert "w-4: reboot is True, expected False" in problems(_with_slot(good, "w-4", reboot=True))
    assert "w-4: duration is 5.0, expected 600.0" in problems(
        _with_slot(good, "w-4", duration=5.0))
    assert "w-4: starts before the plan" in problems(_with_slot(good, "w-4", start=-1.0))
    assert "w-4: scheduled 2 times" in problems(_with_slot(good, "w-5", machine="w-4"))
    assert "w-5: never scheduled" in problems(_with_slot(good, "w-5", machine="w-4"))
    assert "zz: not a machine of the inputs" in problems(_with_slot(good, "w-5", machine="zz"))
    assert "cp-0: already updated but scheduled again" in check(
        good, replace(inputs, done=frozenset({"cp-0"})))
    assert "schedule.done differs" in problems(replace(good, done=frozenset({"w-0"})))
    assert "maxUnavailable differs" in problems(replace(good, max_unavailable={}))
    assert "steps are" in problems(replace(good, steps=good.steps[::-1]))
    wide = replace(good, steps=(*good.steps[:2], replace(good.steps[2], concurrency=1)))
    assert "steps are" in problems(wide)
    # Three machines of a concurrency-2 group at once, and w-3 overtaking unblocked.
    crowded = _with_slot(_with_slot(good, "w-3", start=1800.0), "w-2", start=1800.0)
    text = problems(replace(crowded, max_unavailable={}))
    assert "step group-c-default has 4 machines in update (concurrency 2)" in text
    unblocked = _with_slot(good, "w-2", start=3000.0)
    assert "w-3: starts at 2400s before w-2, which ranks first and was not blocked" in problems(
        replace(unblocked, steps=(*unblocked.steps[:2], replace(
            unblocked.steps[2], waves=tuple(
                replace(w, start=w.start + 600, slots=tuple(
                    replace(s, start=s.start + 600) for s in w.slots))
                for w in unblocked.steps[2].waves)))))
    moved = replace(good, steps=(good.steps[0], replace(good.steps[1], waves=(
        replace(good.steps[1].waves[0], start=0.0), *good.steps[1].waves[1:])), good.steps[2]))
    assert "holds slots starting elsewhere" in problems(moved)
    swapped = replace(good, steps=(good.steps[0], replace(
        good.steps[1], waves=good.steps[2].waves), replace(good.steps[2], waves=())))
    assert "in step group-c-default but names step group-c-late" in problems(swapped)


# --- properties ----------------------------------------------------------------------

DURATIONS = st.one_of(st.none(), st.integers(1, 50).map(float))
ROLE_SETS = st.sampled_from([CP, frozenset({Role.MASTER}), frozenset({Role.ETCD}), WORKER,
                             frozenset({Role.NODE, Role.INFRA}), frozenset({Role.ETCD, Role.NODE})])


@st.composite
def inputs_strategy(draw: st.DrawFn) -> UpdateInputs:
    n_groups = draw(st.integers(1, 4))
    groups = tuple(
        GroupPolicy(f"g{i}", draw(st.integers(0, 2)), draw(st.integers(1, 5)), draw(st.booleans()))
        for i in range(n_groups)
    )
    n_racks = draw(st.integers(1, 4))
    machines = []
    for i in range(draw(st.integers(0, 24))):
        roles = draw(ROLE_SETS) if draw(st.integers(0, 5)) == 0 else WORKER
        labels: dict[str, str] = {}
        if draw(st.integers(0, 9)) > 0:
            rack = draw(st.integers(0, n_racks - 1))
            labels = {RACK_LABEL: f"r{rack}", ZONE_LABEL: f"z{rack % 2}"}
        machines.append(UpdateMachine(
            f"m{i:02d}", f"g{draw(st.integers(0, n_groups - 1))}", roles,
            upgrade_index=draw(st.one_of(st.none(), st.integers(0, 3))),
            labels=labels, duration=draw(DURATIONS), requires_reboot=draw(st.booleans()),
        ))
    limits: dict[str, int] = {}
    for key in (RACK_LABEL, ZONE_LABEL):
        if draw(st.booleans()):
            limits[key] = draw(st.integers(1, 3))
    done = frozenset(m.name for m in machines if draw(st.integers(0, 4)) == 0)
    return UpdateInputs(tuple(machines), groups, float(draw(st.integers(1, 50))), limits, done)


def _limits_hold(schedule: Schedule, running: set[str]) -> bool:
    slots = [s for s in schedule.slots if s.machine in running]
    concurrency = {step.id: step.concurrency for step in schedule.steps}
    if sum(s.control_plane for s in slots) > 1 or sum(s.etcd for s in slots) > 1:
        return False
    for step, limit in concurrency.items():
        if sum(s.step == step for s in slots) > limit:
            return False
    for key, limit in schedule.max_unavailable.items():
        values = [v for s in slots for k, v in s.domains if k == key]
        if any(values.count(v) > limit for v in values):
            return False
    return True


@settings(max_examples=200, deadline=None)
@given(inputs_strategy())
def test_schedules_are_valid_and_within_bounds(inputs: UpdateInputs) -> None:
    schedule = ok(plan_update(inputs))
    assert check(schedule, inputs) == []
    pending = sorted(m.name for m in inputs.machines if m.name not in inputs.done)
    assert sorted(s.machine for s in schedule.slots) == pending
    low, high = lower_bound(schedule), upper_bound(schedule)
    assert low - 1e-6 <= schedule.makespan <= high + 1e-6
    # The stated bound W/c + p_max per group holds whenever no rack/zone limit applies
    # (then the groups of a stage never block one another).
    if not inputs.max_unavailable:
        stage_bounds: dict[int, float] = {}
        for step in schedule.steps:
            if step.slots:
                work = sum(s.duration for s in step.slots)
                longest = max(s.duration for s in step.slots)
                bound = work / step.concurrency + longest
                stage_bounds[step.stage] = max(stage_bounds.get(step.stage, 0.0), bound)
        assert schedule.makespan <= sum(stage_bounds.values()) + 1e-6
    assert plan_update(inputs) == schedule  # deterministic


@settings(max_examples=200, deadline=None)
@given(inputs_strategy())
def test_replaying_next_machines_reproduces_the_schedule(inputs: UpdateInputs) -> None:
    schedule = ok(plan_update(inputs))
    durations = {s.machine: s.duration for s in schedule.slots}
    done: set[str] = set()
    running: list[tuple[float, str]] = []
    started: dict[str, float] = {}
    t = 0.0
    while True:
        in_progress = {name for _, name in running}
        for name in next_machines(schedule, done, in_progress):
            assert name not in started
            started[name] = t
            heapq.heappush(running, (t + durations[name], name))
        assert _limits_hold(schedule, {name for _, name in running})
        if not running:
            break
        t = running[0][0]
        while running and running[0][0] <= t:
            done.add(heapq.heappop(running)[1])
    assert started == {s.machine: s.start for s in schedule.slots}


@settings(max_examples=200, deadline=None)
@given(inputs_strategy(), st.data())
def test_next_machines_is_safe_from_any_state(inputs: UpdateInputs, data: st.DataObject) -> None:
    schedule = ok(plan_update(inputs))
    names = [s.machine for s in schedule.slots]
    done = {n for n in names if data.draw(st.booleans())}
    running: set[str] = set()
    for name in data.draw(st.permutations(sorted(set(names) - done))):
        if data.draw(st.booleans()) and _limits_hold(schedule, running | {name}):
            running.add(name)
    chosen = next_machines(schedule, done, running)
    assert len(chosen) == len(set(chosen))
    assert not set(chosen) & (done | running | inputs.done)
    assert _limits_hold(schedule, running | set(chosen))
    stages = {s.stage for s in schedule.steps for slot in s.slots if slot.machine in chosen}
    assert len(stages) <= 1
    for stage in stages:
        earlier = [slot.machine for s in schedule.steps if s.stage < stage for slot in s.slots]
        assert set(earlier) <= done - running
    # Idempotent: asking again with those started offers nothing that breaks a limit.
    again = next_machines(schedule, done, running | set(chosen))
    assert _limits_hold(schedule, running | set(chosen) | set(again))
    assert not set(again) & set(chosen)
