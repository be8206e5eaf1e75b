"""The update planner: machines, update groups and limits → a rolling-update schedule.

Owns the order in which a cluster's machines are taken down for an update,
the simulated timing of that order (offsets and makespan), the makespan
bounds, the validator of a schedule, and the rule that tells which machines
may start now. Pure: no I/O, no clock. Called by the LCM update controller
when it writes a ClusterUpdatePlan (steps and estimated durations) and on
every reconcile (``next_machines``) to decide what to start; the property
tests and the controller use ``check`` to validate a schedule.

Rules:

- **control plane first, one at a time**: every machine with the ``master``
  or ``etcd`` role is updated in the control-plane step, whatever its update
  group (the group only supplies its reboot policy), strictly one after the
  other; hence never two etcd members down at once (``check`` verifies both);
- **workers by group**: every other machine is updated in the step of its
  update group. Groups run in ascending ``index``; groups with the *same*
  index form one stage and run together (as MOSK's UpdateGroup says), each
  with its own concurrency. A stage starts when every machine of the earlier
  stages has finished (a barrier); the control-plane step is stage 0;
- **concurrency**: at most ``concurrentUpdates`` machines of a group are in
  update at once;
- **maxUnavailable per rack/zone**: ``UpdateInputs.max_unavailable`` maps a
  label key (``metal.racksmith.io/rack``, ``topology.kubernetes.io/zone``,
  any key) to a limit; machines sharing a value of that key form a domain,
  and at most ``limit`` machines of one domain are in update at once, across
  all steps. Machines without the label are not limited by that key. The
  limits are cluster settings passed by the caller, not read from machine
  labels, so one value holds for every rack;
- **priority**: machines are ranked by ``upgradeIndex`` (lower first; none
  last), then name. The control plane starts in exactly this order. In a
  worker stage it is a priority, not a strict order: at every instant the
  scheduler walks the stage's pending machines in rank order and starts each
  one that fits (list scheduling), so a machine blocked only by its rack
  limit is overtaken by a lower-ranked one — never otherwise (``check``);
- **each machine exactly once**: machines listed in ``done`` (already
  updated, for a resumed plan) are not scheduled again; every other machine
  is in exactly one slot;
- **reboot** = the machine requires a reboot AND its group's
  ``rebootIfUpdateRequires``;
- **durations**: a machine's estimate in seconds, else the caller's
  ``default_duration``; every estimate is positive and finite;
- **timing**: a slot starts at the instant a machine finishes (or its stage
  starts) and the constraints allow it; the makespan is the end of the last
  slot. ``next_machines`` applies the very same selection to the observed
  ``done`` and ``in_progress`` sets, so replaying it reproduces the
  schedule, and after a restart the update resumes where it was.

Bounds (``lower_bound``, ``upper_bound``), per stage, added over stages:

- control-plane stage: exactly the sum of its durations (both bounds);
- worker stage, lower bound: the maximum of its longest duration, of every
  group's work / concurrency, and of every limited domain's work / limit;
- worker stage, upper bound (proved for this greedy): for the machine j
  that ends last, at every instant before it starts j is pending and does
  not fit, so its group is full or one of its domains is full. Its group is
  full for at most (W_g - p_j) / c_g, each domain D of j for at most
  (W_D - p_j) / L_D, so the stage lasts at most
  ``max_j p_j + (W_g(j) - p_j) / c_g(j) + sum_{D of j} (W_D - p_j) / L_D``.
  Without limits this is Graham's ``W / c + (1 - 1/c) p_max``, within the
  stated ``W / c + p_max``.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from racksmith.kinds.cluster import Role

__all__ = [
    "CONTROL_PLANE_STEP",
    "GROUP_STEP_PREFIX",
    "RACK_LABEL",
    "ZONE_LABEL",
    "GroupPolicy",
    "Schedule",
    "Slot",
    "Step",
    "UpdateError",
    "UpdateInputs",
    "UpdateMachine",
    "Wave",
    "check",
    "lower_bound",
    "next_machines",
    "plan_update",
    "upper_bound",
]

RACK_LABEL = "metal.racksmith.io/rack"
ZONE_LABEL = "topology.kubernetes.io/zone"
CONTROL_PLANE_STEP = "control-plane"
GROUP_STEP_PREFIX = "group-"
_CONTROL_ROLES = frozenset({Role.MASTER, Role.ETCD})
_EPSILON = 1e-6


# --- inputs --------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateMachine:
    """One machine to update.

    ``group`` names its UpdateGroup (the caller resolves the group label and
    its default); ``labels`` carry the rack and zone; ``duration`` is the
    estimate in seconds (``None``: the caller's default).
    """

    name: str
    group: str
    roles: frozenset[Role] = frozenset({Role.NODE})
    upgrade_index: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    duration: float | None = None
    requires_reboot: bool = False

    @property
    def is_control_plane(self) -> bool:
        """True for a ``master`` or ``etcd`` machine."""
        return bool(self.roles & _CONTROL_ROLES)

    @property
    def is_etcd(self) -> bool:
        """True for an etcd member."""
        return Role.ETCD in self.roles


@dataclass(frozen=True)
class GroupPolicy:
    """The spec of one UpdateGroup."""

    name: str
    index: int
    concurrent_updates: int = 1
    reboot_if_update_requires: bool = True


@dataclass(frozen=True)
class UpdateInputs:
    """Everything the planner reads.

    ``max_unavailable``: label key → how many machines sharing one value of
    it may be in update at once. ``done``: machines already updated.
    """

    machines: tuple[UpdateMachine, ...]
    groups: tuple[GroupPolicy, ...]
    default_duration: float
    max_unavailable: Mapping[str, int] = field(default_factory=dict)
    done: frozenset[str] = frozenset()


@dataclass(frozen=True)
class UpdateError:
    """Why the inputs cannot be planned; ``field`` points into the inputs."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


# --- outputs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One machine's update: when (seconds from the plan's start), how long, how.

    ``domains`` are the (label key, value) pairs of the limited labels the
    machine carries; ``step`` is the id of its step.
    """

    machine: str
    step: str
    group: str
    start: float
    duration: float
    reboot: bool
    upgrade_index: int | None = None
    etcd: bool = False
    control_plane: bool = False
    domains: tuple[tuple[str, str], ...] = ()

    @property
    def end(self) -> float:
        """When the update is expected to finish."""
        return self.start + self.duration

    @property
    def rank(self) -> tuple[bool, int, str]:
        """The priority key: ``upgradeIndex`` (none last), then name."""
        return (self.upgrade_index is None, self.upgrade_index or 0, self.machine)


@dataclass(frozen=True)
class Wave:
    """The slots of a step that start at the same instant."""

    start: float
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class Step:
    """One ClusterUpdatePlan step: the control plane, or one worker group.

    Steps with the same ``stage`` run together; ``group`` is ``None`` for the
    control plane.
    """

    id: str
    stage: int
    group: str | None
    index: int | None
    concurrency: int
    start: float
    waves: tuple[Wave, ...]

    @property
    def slots(self) -> tuple[Slot, ...]:
        """Every slot of the step, in start order."""
        return tuple(s for w in self.waves for s in w.slots)

    @property
    def end(self) -> float:
        """When the last machine of the step is expected to finish."""
        return max((s.end for s in self.slots), default=self.start)

    @property
    def duration(self) -> float:
        """Estimated duration of the step, in seconds."""
        return self.end - self.start


@dataclass(frozen=True)
class Schedule:
    """The planned update: ordered steps, the limits used, and what was already done."""

    steps: tuple[Step, ...]
    max_unavailable: Mapping[str, int]
    done: frozenset[str]

    @property
    def slots(self) -> tuple[Slot, ...]:
        """Every slot, step by step."""
        return tuple(s for step in self.steps for s in step.slots)

    @property
    def makespan(self) -> float:
        """Simulated duration of the whole update, in seconds."""
        return max((s.end for s in self.slots), default=0.0)

    def slot(self, machine: str) -> Slot | None:
        """The slot of ``machine``, if it is scheduled."""
        return next((s for s in self.slots if s.machine == machine), None)


# --- planning ------------------------------------------------------------------------


def _step_id(group: str) -> str:
    return f"{GROUP_STEP_PREFIX}{group}"


def _validate(inputs: UpdateInputs) -> list[UpdateError]:
    errors: list[UpdateError] = []
    if not (math.isfinite(inputs.default_duration) and inputs.default_duration > 0):
        errors.append(UpdateError("defaultDuration", "must be positive and finite"))
    for key, limit in inputs.max_unavailable.items():
        if limit < 1:
            errors.append(UpdateError(f"maxUnavailable[{key}]", f"limit {limit} must be >= 1"))
    groups: dict[str, GroupPolicy] = {}
    for i, g in enumerate(inputs.groups):
        where = f"groups[{i}]"
        if g.name in groups:
            errors.append(UpdateError(where, f"duplicate update group {g.name!r}"))
        groups[g.name] = g
        if g.concurrent_updates < 1:
            errors.append(UpdateError(f"{where}.concurrentUpdates", "must be >= 1"))
        if g.index < 0:
            errors.append(UpdateError(f"{where}.index", "must be >= 0"))
    names: set[str] = set()
    for i, m in enumerate(inputs.machines):
        where = f"machines[{i}]"
        if m.name in names:
            errors.append(UpdateError(where, f"duplicate machine {m.name!r}"))
        names.add(m.name)
        if m.group not in groups:
            errors.append(UpdateError(f"{where}.group", f"unknown update group {m.group!r}"))
        if m.duration is not None and not (math.isfinite(m.duration) and m.duration > 0):
            errors.append(UpdateError(f"{where}.duration", "must be positive and finite"))
        if m.upgrade_index is not None and m.upgrade_index < 0:
            errors.append(UpdateError(f"{where}.upgradeIndex", "must be >= 0"))
    for name in sorted(inputs.done - names):
        errors.append(UpdateError("done", f"unknown machine {name!r}"))
    return errors


def _job(m: UpdateMachine, inputs: UpdateInputs, groups: Mapping[str, GroupPolicy]) -> Slot:
    """The slot of ``m``, not yet timed (start 0)."""
    policy = groups[m.group]
    return Slot(
        machine=m.name,
        step=CONTROL_PLANE_STEP if m.is_control_plane else _step_id(m.group),
        group=m.group,
        start=0.0,
        duration=inputs.default_duration if m.duration is None else float(m.duration),
        reboot=m.requires_reboot and policy.reboot_if_update_requires,
        upgrade_index=m.upgrade_index,
        etcd=m.is_etcd,
        control_plane=m.is_control_plane,
        domains=tuple(
            (key, m.labels[key]) for key in sorted(inputs.max_unavailable) if key in m.labels
        ),
    )


@dataclass(frozen=True)
class _StepShape:
    """A step before timing: its place and its (untimed) jobs."""

    id: str
    stage: int
    group: str | None
    index: int | None
    concurrency: int
    jobs: tuple[Slot, ...]


def _shape(inputs: UpdateInputs) -> list[_StepShape]:
    """The steps, in order, with their jobs in rank order (done machines left out)."""
    groups = {g.name: g for g in inputs.groups}
    control: list[Slot] = []
    workers: dict[str, list[Slot]] = {}
    has_control = False
    for m in inputs.machines:
        has_control |= m.is_control_plane
        if not m.is_control_plane:
            workers.setdefault(m.group, [])
        if m.name in inputs.done:
            continue
        job = _job(m, inputs, groups)
        (control if m.is_control_plane else workers[m.group]).append(job)
    shapes: list[_StepShape] = []
    if has_control:
        jobs = tuple(sorted(control, key=lambda s: s.rank))
        shapes.append(_StepShape(CONTROL_PLANE_STEP, 0, None, None, 1, jobs))
    indices = sorted({groups[name].index for name in workers})
    stage_of = {index: i + 1 for i, index in enumerate(indices)}
    for name in sorted(workers, key=lambda n: (groups[n].index, n)):
        g = groups[name]
        jobs = tuple(sorted(workers[name], key=lambda s: s.rank))
        shapes.append(
            _StepShape(_step_id(name), stage_of[g.index], name, g.index, g.concurrent_updates, jobs)
        )
    return shapes


class _Tally:
    """Machines in update now, counted per constraint."""

    def __init__(self, concurrency: Mapping[str, int], limits: Mapping[str, int]) -> None:
        self.concurrency = concurrency
        self.limits = limits
        self.control = 0
        self.etcd = 0
        self.steps: Counter[str] = Counter()
        self.domains: Counter[tuple[str, str]] = Counter()

    def fits(self, s: Slot) -> bool:
        """True when ``s`` may start without breaking a constraint."""
        if s.control_plane and self.control >= 1:
            return False
        if s.etcd and self.etcd >= 1:
            return False
        if self.steps[s.step] >= self.concurrency.get(s.step, 1):
            return False
        return all(self.domains[d] < self.limits[d[0]] for d in s.domains)

    def add(self, s: Slot, sign: int = 1) -> None:
        self.control += sign * s.control_plane
        self.etcd += sign * s.etcd
        self.steps[s.step] += sign
        for d in s.domains:
            self.domains[d] += sign


def _select(pending: Iterable[Slot], tally: _Tally) -> list[Slot]:
    """Walk ``pending`` in rank order; take every slot that fits (updates ``tally``)."""
    chosen = []
    for s in sorted(pending, key=lambda s: s.rank):
        if tally.fits(s):
            tally.add(s)
            chosen.append(s)
    return chosen


def _simulate(jobs: Sequence[Slot], t0: float, tally: _Tally) -> list[Slot]:
    """List-schedule one stage's jobs from ``t0``; the timed slots."""
    pending = list(jobs)
    running: list[tuple[float, str, Slot]] = []
    timed: list[Slot] = []
    t = t0
    while pending:
        chosen = _select(pending, tally)
        names = {s.machine for s in chosen}
        pending = [s for s in pending if s.machine not in names]
        for s in chosen:
            slot = replace(s, start=t)
            timed.append(slot)
            heapq.heappush(running, (slot.end, slot.machine, slot))
        if not pending:
            break
        # Something always runs here: with nothing running every job fits.
        t = running[0][0]
        while running and running[0][0] <= t:
            tally.add(heapq.heappop(running)[2], -1)
    return timed


def _waves(slots: Sequence[Slot]) -> tuple[Wave, ...]:
    by_start: dict[float, list[Slot]] = {}
    for s in slots:
        by_start.setdefault(s.start, []).append(s)
    return tuple(
        Wave(start, tuple(sorted(group, key=lambda s: s.rank)))
        for start, group in sorted(by_start.items())
    )


def plan_update(inputs: UpdateInputs) -> Schedule | list[UpdateError]:
    """The schedule of ``inputs`` per the module's rules, or why it cannot be planned.

    Deterministic: equal inputs give equal schedules.
    """
    errors = _validate(inputs)
    if errors:
        return errors
    shapes = _shape(inputs)
    concurrency = {sh.id: sh.concurrency for sh in shapes}
    steps: list[Step] = []
    t = 0.0
    for stage in sorted({sh.stage for sh in shapes}):
        members = [sh for sh in shapes if sh.stage == stage]
        jobs = [j for sh in members for j in sh.jobs]
        timed = _simulate(jobs, t, _Tally(concurrency, inputs.max_unavailable))
        for sh in members:
            mine = [s for s in timed if s.step == sh.id]
            steps.append(
                Step(sh.id, sh.stage, sh.group, sh.index, sh.concurrency, t, _waves(mine))
            )
        t = max((s.end for s in timed), default=t)
    return Schedule(tuple(steps), dict(inputs.max_unavailable), inputs.done)


# --- bounds --------------------------------------------------------------------------


def _stages(schedule: Schedule) -> list[list[Step]]:
    stages: dict[int, list[Step]] = {}
    for step in schedule.steps:
        stages.setdefault(step.stage, []).append(step)
    return [stages[k] for k in sorted(stages)]


def _work(
    slots: Iterable[Slot], schedule: Schedule
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Work (seconds) per step and per limited domain."""
    per_step: dict[str, float] = defaultdict(float)
    per_domain: dict[tuple[str, str], float] = defaultdict(float)
    for s in slots:
        per_step[s.step] += s.duration
        for d in s.domains:
            if d[0] in schedule.max_unavailable:
                per_domain[d] += s.duration
    return per_step, per_domain


def lower_bound(schedule: Schedule) -> float:
    """A lower bound on the makespan of any schedule of this work under the rules.

    Uses only the slots' durations, steps and domains, not their timing.
    """
    total = 0.0
    for steps in _stages(schedule):
        slots = [s for step in steps for s in step.slots]
        if not slots:
            continue
        if any(step.id == CONTROL_PLANE_STEP for step in steps):
            total += sum(s.duration for s in slots)
            continue
        per_step, per_domain = _work(slots, schedule)
        total += max(
            max(s.duration for s in slots),
            max(per_step[step.id] / step.concurrency for step in steps),
            max((w / schedule.max_unavailable[d[0]] for d, w in per_domain.items()), default=0.0),
        )
    return total


def upper_bound(schedule: Schedule) -> float:
    """The makespan bound this planner's list scheduling never exceeds (module docstring)."""
    total = 0.0
    for steps in _stages(schedule):
        slots = [s for step in steps for s in step.slots]
        if not slots:
            continue
        if any(step.id == CONTROL_PLANE_STEP for step in steps):
            total += sum(s.duration for s in slots)
            continue
        per_step, per_domain = _work(slots, schedule)
        concurrency = {step.id: step.concurrency for step in steps}
        total += max(
            s.duration
            + (per_step[s.step] - s.duration) / concurrency[s.step]
            + sum(
                (per_domain[d] - s.duration) / schedule.max_unavailable[d[0]]
                for d in s.domains
                if d[0] in schedule.max_unavailable
            )
            for s in slots
        )
    return total


# --- what may start now --------------------------------------------------------------


def next_machines(
    schedule: Schedule, done: Collection[str], in_progress: Collection[str]
) -> list[str]:
    """The machines that may start now, in rank order.

    ``done``: machines whose update finished (besides ``schedule.done``);
    ``in_progress``: machines in update now — each scheduled one counts
    against every limit, even if also listed as done (names not in the
    schedule are ignored). Only the first stage with a machine not done
    (running counts as not done) may start machines. Never returns a done or running machine;
    idempotent: calling it again with the returned machines added to
    ``in_progress`` returns nothing new that breaks a limit.
    """
    finished = set(done) | schedule.done
    busy = set(in_progress)
    tally = _Tally({step.id: step.concurrency for step in schedule.steps}, schedule.max_unavailable)
    for s in schedule.slots:
        if s.machine in busy:
            tally.add(s)
    for steps in _stages(schedule):
        slots = [s for step in steps for s in step.slots]
        if all(s.machine in finished and s.machine not in busy for s in slots):
            continue
        pending = [s for s in slots if s.machine not in finished and s.machine not in busy]
        return [s.machine for s in _select(pending, tally)]
    return []


# --- validation ----------------------------------------------------------------------


def _check_cover(
    schedule: Schedule, expected: Mapping[str, Slot], inputs: UpdateInputs
) -> list[str]:
    problems = []
    if schedule.done != inputs.done:
        problems.append("schedule.done differs from the inputs' done machines")
    seen = Counter(s.machine for s in schedule.slots)
    for name, count in sorted(seen.items()):
        if name in inputs.done:
            problems.append(f"{name}: already updated but scheduled again")
        elif name not in expected:
            problems.append(f"{name}: not a machine of the inputs")
        elif count > 1:
            problems.append(f"{name}: scheduled {count} times")
    for name in sorted(set(expected) - set(seen)):
        problems.append(f"{name}: never scheduled")
    for s in schedule.slots:
        want = expected.get(s.machine)
        if want is None:
            continue
        got = replace(s, start=0.0)
        for attr in ("step", "group", "duration", "reboot", "upgrade_index", "etcd",
                     "control_plane", "domains"):
            if getattr(got, attr) != getattr(want, attr):
                problems.append(
                    f"{s.machine}: {attr} is {getattr(got, attr)!r}, "
                    f"expected {getattr(want, attr)!r}"
                )
        if s.start < 0:
            problems.append(f"{s.machine}: starts before the plan ({s.start})")
    return problems


def _check_steps(schedule: Schedule, shapes: Sequence[_StepShape]) -> list[str]:
    got = [(st.id, st.stage, st.group, st.index, st.concurrency) for st in schedule.steps]
    want = [(sh.id, sh.stage, sh.group, sh.index, sh.concurrency) for sh in shapes]
    problems = []
    if got != want:
        problems.append(f"steps are {got}, expected {want}")
    for st in schedule.steps:
        for s in st.slots:
            if s.step != st.id:
                problems.append(f"{s.machine}: in step {st.id} but names step {s.step}")
        for w in st.waves:
            if any(s.start != w.start for s in w.slots):
                problems.append(f"step {st.id}: a wave at {w.start} holds slots starting elsewhere")
    return problems


def _running(slots: Sequence[Slot], t: float) -> list[Slot]:
    return [s for s in slots if s.start <= t < s.end]


def _check_limits(schedule: Schedule, inputs: UpdateInputs) -> list[str]:
    problems: list[str] = []
    slots = schedule.slots
    concurrency = {st.id: st.concurrency for st in schedule.steps}
    for t in sorted({s.start for s in slots}):
        now = _running(slots, t)
        if sum(s.control_plane for s in now) > 1:
            names = sorted(s.machine for s in now if s.control_plane)
            problems.append(f"at {t:g}s control-plane machines {names} are in update together")
        if sum(s.etcd for s in now) > 1:
            names = sorted(s.machine for s in now if s.etcd)
            problems.append(f"at {t:g}s etcd members {names} are down together")
        for step, count in sorted(Counter(s.step for s in now).items()):
            if count > concurrency.get(step, 1):
                problems.append(
                    f"at {t:g}s step {step} has {count} machines in update "
                    f"(concurrency {concurrency.get(step, 1)})"
                )
        domains = Counter(d for s in now for d in s.domains)
        for (key, value), count in sorted(domains.items()):
            limit = inputs.max_unavailable.get(key)
            if limit is not None and count > limit:
                problems.append(
                    f"at {t:g}s {key}={value} has {count} machines in update "
                    f"(maxUnavailable {limit})"
                )
    return problems


def _check_order(schedule: Schedule, inputs: UpdateInputs) -> list[str]:
    problems: list[str] = []
    concurrency = {st.id: st.concurrency for st in schedule.steps}
    previous_end = 0.0
    for steps in _stages(schedule):
        slots = [s for st in steps for s in st.slots]
        for s in slots:
            if s.start < previous_end - _EPSILON:
                problems.append(
                    f"{s.machine}: starts at {s.start:g}s before the earlier steps end "
                    f"({previous_end:g}s)"
                )
        tallies: dict[float, _Tally] = {}
        for b in slots:
            for a in slots:
                if not (a.rank < b.rank and b.start < a.start):
                    continue
                if a.control_plane:
                    problems.append(f"{b.machine}: starts before {a.machine}, which ranks first")
                    continue
                if b.start not in tallies:
                    tallies[b.start] = _Tally(concurrency, inputs.max_unavailable)
                    for s in _running(slots, b.start):
                        tallies[b.start].add(s)
                if tallies[b.start].fits(a):
                    problems.append(
                        f"{b.machine}: starts at {b.start:g}s before {a.machine}, which ranks "
                        "first and was not blocked"
                    )
        previous_end = max([previous_end, *(s.end for s in slots)])
    return problems


def check(schedule: Schedule, inputs: UpdateInputs) -> list[str]:
    """Every rule of the module that ``schedule`` breaks for ``inputs`` (empty: valid).

    Checks coverage (each machine not done exactly once, with its duration,
    reboot flag, step and domains), the steps and their order, the stage
    barriers, the priority rule, and at every instant the control-plane,
    etcd, concurrency and maxUnavailable limits.
    """
    errors = _validate(inputs)
    if errors:
        return [str(e) for e in errors]
    groups = {g.name: g for g in inputs.groups}
    expected = {
        m.name: _job(m, inputs, groups) for m in inputs.machines if m.name not in inputs.done
    }
    problems = _check_cover(schedule, expected, inputs)
    problems += _check_steps(schedule, _shape(inputs))
    if dict(schedule.max_unavailable) != dict(inputs.max_unavailable):
        problems.append("schedule.maxUnavailable differs from the inputs'")
    problems += _check_limits(schedule, inputs)
    problems += _check_order(schedule, inputs)
    return list(dict.fromkeys(problems))
