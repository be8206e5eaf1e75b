"""The pure decisions of the LCM update controller.

Owns, from observed objects (as plain values): which UpdateGroups a cluster
needs, whether a ClusterUpdatePlan is due and what it says (steps, names,
descriptions, constraints, impact, Go-style duration estimates), which
machines are done or in progress, which steps auto-pause, which machines
start now, and the plan's status (step phases, per-machine progress, ETA,
conditions). No I/O, no clock: ``controller`` reads the world, calls these
and writes what they return. The schedule itself is
``racksmith.planners.update``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from racksmith.controllers.update.flow import NodeProgress
from racksmith.controllers.update.names import (
    BLOCKED,
    COND_ALERTS_REACHABLE,
    COND_AUTO_PAUSED,
    COND_BACKUP,
    COND_BLOCKED,
    COND_LOCK_FAILED,
    DONE,
    LOCK_FAILED,
    control_group,
    default_group,
)
from racksmith.kinds.cluster import Role
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.lcm import (
    ClusterUpdatePlan,
    ClusterUpdatePlanStatus,
    Granularity,
    Impact,
    MachineProgress,
    PlanPhase,
    StepDuration,
    StepImpact,
    StepPhase,
    StepStatus,
    UpdateStep,
)
from racksmith.planners.update import (
    CONTROL_PLANE_STEP,
    GroupPolicy,
    Schedule,
    Step,
    UpdateInputs,
    UpdateMachine,
    next_machines,
    plan_update,
)
from racksmith.runtime.conditions import ConditionSpec, same_but_times, set_condition

_CONTROL_ROLES = frozenset({Role.MASTER, Role.ETCD})
_STUCK_STATES = frozenset({BLOCKED, LOCK_FAILED})
ETA_SLACK = 60.0
"""An ETA within this many seconds of the recorded one is not rewritten (no churn)."""


# --- observed values ------------------------------------------------------------------


@dataclass(frozen=True)
class MachineView:
    """One machine of the cluster as the controller sees it.

    ``release``: the release its LCMMachine reports applied (``None``: not
    deployed yet); ``pinned``: its ``lcm.racksmith.io/release`` annotation;
    ``nmr_owner``: the owner label of its node's NodeMaintenanceRequest, if any.
    """

    name: str
    group: str
    roles: frozenset[Role] = frozenset({Role.NODE})
    upgrade_index: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    release: str | None = None
    pinned: str | None = None
    nmr_owner: str | None = None

    @property
    def is_control_plane(self) -> bool:
        return bool(self.roles & _CONTROL_ROLES)

    @property
    def is_etcd(self) -> bool:
        return Role.ETCD in self.roles


def group_of(cluster_name: str, label: str | None, roles: Iterable[Role],
             known: Collection[str]) -> str:
    """The UpdateGroup of a machine: its label when that group exists, else the default."""
    if label and label in known:
        return label
    if set(roles) & _CONTROL_ROLES:
        return control_group(cluster_name)
    return default_group(cluster_name)


def default_group_specs(cluster_name: str, max_worker_upgrade_count: int
                        ) -> list[GroupPolicy]:
    """The UpdateGroups every cluster has (created when missing, never overwritten)."""
    return [
        GroupPolicy(control_group(cluster_name), 0, 1),
        GroupPolicy(default_group(cluster_name), 1, max_worker_upgrade_count),
    ]


def is_done(m: MachineView, target: str, owner: str) -> bool:
    """The machine runs ``target`` and no maintenance of the plan is open on it."""
    return m.release == target and m.nmr_owner != owner


def is_in_progress(m: MachineView, target: str, owner: str) -> bool:
    """The plan's maintenance of the machine has begun and not ended."""
    return m.nmr_owner == owner or (m.pinned == target and not is_done(m, target, owner))


# --- plan creation --------------------------------------------------------------------


def source_release(releases: Iterable[str]) -> str:
    """The release most machines run (ties: the smallest name)."""
    counts = Counter(releases)
    return min(counts, key=lambda r: (-counts[r], r))


def wants_plan(target: str, machines: Sequence[MachineView]) -> bool:
    """Every machine is deployed and one runs another release than ``target``."""
    return bool(machines) and all(m.release is not None for m in machines) and any(
        m.release != target for m in machines)


def is_completed(plan: ClusterUpdatePlan) -> bool:
    return plan.status is not None and plan.status.phase == PlanPhase.COMPLETED


def has_started(plan: ClusterUpdatePlan, machines: Sequence[MachineView], owner: str) -> bool:
    """A machine of the plan has begun its maintenance (now or earlier)."""
    if plan.status is not None and any(m.started_at for m in plan.status.machines):
        return True
    return any(m.nmr_owner == owner for m in machines)


def estimate_from(plans: Iterable[ClusterUpdatePlan]) -> tuple[float, str] | None:
    """Mean per-machine time of the latest Completed plan, and where it comes from."""
    best: tuple[datetime, float, str] | None = None
    for plan in plans:
        if not is_completed(plan) or plan.status is None:
            continue
        spans = [(m.finished_at - m.started_at).total_seconds()
                 for m in plan.status.machines if m.started_at and m.finished_at]
        spans = [s for s in spans if s > 0]
        if not spans:
            continue
        ended = max(m.finished_at for m in plan.status.machines if m.finished_at)
        if best is None or ended > best[0]:
            best = (ended, sum(spans) / len(spans), plan.metadata.name or "")
    if best is None:
        return None
    return best[1], best[2]


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration`` text, to the second: ``45s``, ``10m0s``, ``1h2m3s``."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def update_inputs(machines: Sequence[MachineView], groups: Sequence[GroupPolicy],
                  max_unavailable: Mapping[str, int], per_machine: float) -> UpdateInputs:
    """The planner's inputs for the whole cluster (nothing done: the plan covers all)."""
    return UpdateInputs(
        machines=tuple(
            UpdateMachine(name=m.name, group=m.group, roles=m.roles,
                          upgrade_index=m.upgrade_index, labels=dict(m.labels))
            for m in sorted(machines, key=lambda m: m.name)),
        groups=tuple(groups),
        default_duration=per_machine,
        max_unavailable=dict(max_unavailable),
    )


def _names(step: Step) -> list[str]:
    return [s.machine for s in sorted(step.slots, key=lambda s: s.rank)]


def _limits_text(schedule: Schedule) -> str:
    if not schedule.max_unavailable:
        return ""
    parts = ", ".join(f"{k}: {v}" for k, v in sorted(schedule.max_unavailable.items()))
    return f"; at most {parts} machines per value in maintenance at once"


def build_steps(schedule: Schedule, *, commence: bool, per_machine: float,
                estimate_info: str) -> list[UpdateStep]:
    """The spec steps of a plan: the control plane, then one per group, in order."""
    steps: list[UpdateStep] = []
    for step in schedule.steps:
        names = _names(step)
        earlier = [s.id for s in schedule.steps if s.stage < step.stage]
        after = f"Starts after step(s) {', '.join(earlier)} completed. " if earlier else ""
        if step.id == CONTROL_PLANE_STEP:
            name = "Update the control plane"
            description = (f"Update the master/etcd machines one at a time: {', '.join(names)}"
                           ". Each is cordoned, drained, updated, rebooted if required, "
                           "and uncordoned.")
            constraints = (after + "One machine at a time; a machine starts only when every "
                           "etcd member's Node is Ready and no other etcd member is in "
                           "maintenance; every ClusterWorkloadLock must be inactive.")
            impact = StepImpact(users=Impact.MINOR, workloads=Impact.NONE,
                                info="The API may answer slowly while a master restarts.")
        else:
            name = f"Update group {step.group}"
            description = (f"Update the machines of UpdateGroup {step.group} "
                           f"(index {step.index}): {', '.join(names)}.")
            constraints = (after + f"At most {step.concurrency} machine(s) of the group at "
                           "once; each waits for its NodeWorkloadLocks to be inactive"
                           + _limits_text(schedule) + ".")
            impact = StepImpact(users=Impact.NONE, workloads=Impact.MINOR,
                                info="Workloads move off each machine before its drain.")
        steps.append(UpdateStep(
            id=step.id, name=name, description=description, constraints=constraints,
            impact=impact,
            duration=StepDuration(
                estimated=format_duration(step.duration),
                info=(f"{len(names)} machine(s), {format_duration(per_machine)} each "
                      f"({estimate_info}), {step.concurrency} at a time")),
            granularity=Granularity.MACHINE, commence=commence))
    return steps


# --- driving --------------------------------------------------------------------------


def autopause(steps: Sequence[UpdateStep], started: Collection[str]
              ) -> list[UpdateStep] | None:
    """Steps with commence removed from every step not ``started``; None if unchanged."""
    out = [replace_step(s, commence=False) if s.commence and s.id not in started else s
           for s in steps]
    return None if out == list(steps) else out


def replace_step(step: UpdateStep, *, commence: bool) -> UpdateStep:
    return step.model_copy(update={"commence": commence})


def started_steps(schedule: Schedule, in_progress: Collection[str],
                  plan: ClusterUpdatePlan) -> set[str]:
    """Steps where a machine is in maintenance or has been."""
    began = set(in_progress)
    if plan.status is not None:
        began |= {m.name for m in plan.status.machines if m.started_at}
    return {s.step for s in schedule.slots if s.machine in began}


def to_start(schedule: Schedule, done: Collection[str], in_progress: Collection[str],
             commenced: Collection[str], *, etcd_healthy: bool) -> list[str]:
    """The machines that may start now, in rank order.

    ``next_machines`` on the current stage with its un-commenced steps left
    out (their running machines still count against the limits); no
    control-plane machine when ``etcd_healthy`` is False.
    """
    finished = set(done)
    busy = set(in_progress)
    stages: dict[int, list[Step]] = {}
    for step in schedule.steps:
        stages.setdefault(step.stage, []).append(step)
    for stage in sorted(stages):
        steps = stages[stage]
        if all(s.machine in finished and s.machine not in busy
               for step in steps for s in step.slots):
            continue
        kept = []
        for step in steps:
            if step.id in commenced:
                kept.append(step)
                continue
            waves = tuple(replace(w, slots=tuple(s for s in w.slots if s.machine in busy))
                          for w in step.waves)
            kept.append(replace(step, waves=tuple(w for w in waves if w.slots)))
        current = Schedule(tuple(kept), schedule.max_unavailable, schedule.done)
        chosen = next_machines(current, finished, busy)
        if not etcd_healthy:
            control = {s.machine for s in schedule.slots if s.control_plane}
            chosen = [n for n in chosen if n not in control]
        return chosen
    return []


def remaining_seconds(inputs: UpdateInputs, done: Collection[str],
                      elapsed: Mapping[str, float]) -> float:
    """Expected seconds to the end: the schedule of what is not done, running
    machines shortened by the time they already spent (at least a second)."""
    names = {m.name for m in inputs.machines}
    machines = tuple(
        replace(m, duration=max(1.0, (m.duration or inputs.default_duration)
                                - elapsed[m.name])) if m.name in elapsed else m
        for m in inputs.machines)
    schedule = plan_update(replace(inputs, machines=machines,
                                   done=frozenset(set(done) & names)))
    return schedule.makespan if isinstance(schedule, Schedule) else 0.0


# --- status ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """What one reconcile of an active plan saw and did, for its status."""

    schedule: Schedule
    done: frozenset[str]
    advanced: Mapping[str, NodeProgress]
    started: Mapping[str, datetime]
    finished: Mapping[str, datetime]
    firing: Sequence[str] = ()
    remaining: float = 0.0
    cluster_lock_failed: str | None = None
    alert_error: str | None = None
    now: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    backup: str | None = None
    """The plan's pre-update backup (None: no backup is asked for)."""
    backup_waiting: tuple[str, str] | None = None
    """(reason, message) while the first step waits for that backup."""


def _machine(name: str, step: str, prev: MachineProgress | None, obs: Observed,
             step_state: StepPhase) -> MachineProgress:
    started = obs.started.get(name) or (prev.started_at if prev else None)
    if name in obs.finished or name in obs.done:
        finished = obs.finished.get(name) or (prev.finished_at if prev else None)
        message = None if started else "already at the target release"
        return MachineProgress(name=name, step_id=step, phase=StepPhase.COMPLETED,
                               state=DONE, progress=100, message=message,
                               started_at=started, finished_at=finished)
    p = obs.advanced.get(name)
    if p is not None:
        phase = StepPhase.STUCK if p.state in _STUCK_STATES else StepPhase.IN_PROGRESS
        return MachineProgress(name=name, step_id=step, phase=phase, state=p.state,
                               message=p.message or None,
                               progress=max(0, min(100, p.progress)),
                               started_at=started or obs.now)
    return MachineProgress(name=name, step_id=step, phase=step_state, progress=0)


def _waiting_phase(step: UpdateStep, firing: bool) -> StepPhase:
    if step.commence:
        return StepPhase.SCHEDULED
    return StepPhase.AUTO_PAUSED if firing else StepPhase.NOT_STARTED


def _step_status(step: UpdateStep, machines: Sequence[MachineProgress], firing: bool
                 ) -> StepStatus:
    if not machines:
        return StepStatus(id=step.id, phase=StepPhase.COMPLETED, progress=100)
    done = [m for m in machines if m.phase == StepPhase.COMPLETED]
    begun = [m for m in machines if m.started_at]
    stuck = [m for m in machines if m.phase == StepPhase.STUCK]
    active = [m for m in machines if m.phase in (StepPhase.IN_PROGRESS, StepPhase.STUCK)]
    progress = round(sum(m.progress or 0 for m in machines) / len(machines))
    started_at = min((m.started_at for m in begun if m.started_at), default=None)
    message = f"{len(done)}/{len(machines)} machines done, {len(active)} in progress"
    if len(done) == len(machines):
        finished_at = max((m.finished_at for m in done if m.finished_at), default=None)
        return StepStatus(id=step.id, phase=StepPhase.COMPLETED, progress=100,
                          message=message, started_at=started_at, finished_at=finished_at)
    if stuck:
        phase = StepPhase.STUCK
        message = "; ".join(f"{m.name}: {m.message or m.state}" for m in stuck)
    elif begun or active:
        phase = StepPhase.IN_PROGRESS
    else:
        phase = _waiting_phase(step, firing)
    return StepStatus(id=step.id, phase=phase, progress=progress, message=message,
                      started_at=started_at)


def _set(conditions: list[Condition], type_: str, holds: bool, reason: str,
         message: str | None, now: datetime, generation: int | None) -> list[Condition]:
    status = ConditionStatus.TRUE if holds else ConditionStatus.FALSE
    return set_condition(conditions, ConditionSpec(type_, status, reason, message), now,
                         generation)


def plan_status(plan: ClusterUpdatePlan, obs: Observed) -> ClusterUpdatePlanStatus:
    """The plan's status from what this reconcile saw and did."""
    old = plan.status or ClusterUpdatePlanStatus()
    prev = {m.name: m for m in old.machines}
    firing = bool(obs.firing)
    spec_steps = {s.id: s for s in plan.spec.steps}
    machines: list[MachineProgress] = []
    by_step: dict[str, list[MachineProgress]] = {}
    for slot in obs.schedule.slots:
        step = spec_steps.get(slot.step)
        waiting = _waiting_phase(step, firing) if step else StepPhase.NOT_STARTED
        mp = _machine(slot.machine, slot.step, prev.get(slot.machine), obs, waiting)
        machines.append(mp)
        by_step.setdefault(slot.step, []).append(mp)
    steps = [_step_status(s, by_step.get(s.id, []), firing) for s in plan.spec.steps]
    all_done = all(m.phase == StepPhase.COMPLETED for m in machines)
    begun = any(m.started_at for m in machines)
    if all_done:
        phase = PlanPhase.COMPLETED
    elif firing:
        phase = PlanPhase.AUTO_PAUSED
    elif begun or any(s.commence for s in plan.spec.steps):
        phase = PlanPhase.IN_PROGRESS
    else:
        phase = PlanPhase.NOT_STARTED
    started_at = old.started_at or min((m.started_at for m in machines if m.started_at),
                                       default=None)
    eta = None
    if phase in (PlanPhase.IN_PROGRESS, PlanPhase.AUTO_PAUSED) and begun:
        eta = (obs.now + timedelta(seconds=obs.remaining)).replace(microsecond=0)
        if old.eta is not None and abs((old.eta - eta).total_seconds()) < ETA_SLACK:
            eta = old.eta
    gen = plan.metadata.generation
    blocked = [m for m in machines if m.state == BLOCKED]
    failed = [m for m in machines if m.state == LOCK_FAILED]
    conds = list(old.conditions)
    conds = _set(conds, COND_BLOCKED, bool(blocked), "DrainBlocked" if blocked else "NotBlocked",
                 "; ".join(f"{m.name}: {m.message}" for m in blocked) or None, obs.now, gen)
    lock_messages = [f"{m.name}: {m.message}" for m in failed]
    if obs.cluster_lock_failed:
        lock_messages.insert(0, obs.cluster_lock_failed)
    conds = _set(conds, COND_LOCK_FAILED, bool(lock_messages),
                 "LockFailed" if lock_messages else "NoFailedLock",
                 "; ".join(lock_messages) or None, obs.now, gen)
    conds = _set(conds, COND_AUTO_PAUSED, firing, "AlertsFiring" if firing else "NoAlerts",
                 f"firing: {', '.join(obs.firing)}" if firing else None, obs.now, gen)
    if obs.alert_error or any(c.type == COND_ALERTS_REACHABLE for c in conds):
        conds = _set(conds, COND_ALERTS_REACHABLE, obs.alert_error is None,
                     "QueryFailed" if obs.alert_error else "Reachable", obs.alert_error,
                     obs.now, gen)
    if obs.backup is not None:
        holds = obs.backup_waiting
        conds = _set(conds, COND_BACKUP, holds is None,
                     holds[0] if holds else "Completed",
                     holds[1] if holds else f"ControlPlaneBackup {obs.backup}",
                     obs.now, gen)
    return ClusterUpdatePlanStatus(
        phase=phase, started_at=started_at, eta=eta, steps=steps, machines=machines,
        firing_alerts=list(obs.firing), observed_generation=gen,
        backup=obs.backup or old.backup, conditions=conds)


def same_status(a: ClusterUpdatePlanStatus | None, b: ClusterUpdatePlanStatus) -> bool:
    """Equal in everything a reader cares about (transition times aside)."""
    return same_but_times(a, b)
