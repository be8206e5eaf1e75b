"""The LCM update controller's Events: what a plan's status change is worth telling.

Owns ``plan_events(plan, new, cluster_lock_failed=...)``, pure: the Events
(about the ClusterUpdatePlan) the change from ``plan.status`` to ``new`` is
worth. The controller reconciles an active plan every few seconds; only
transitions are told:

- ``StepCommenced`` (Normal): a step left NotStarted/AutoPaused (commence
  set, by the plan's auto-commence or by hand) for Scheduled or InProgress;
- ``StepCompleted`` (Normal): a step turned Completed;
- ``PlanCompleted`` (Normal): the plan turned Completed;
- ``AutoPaused`` (Warning): the AutoPaused condition turned True (an
  UpdateAutoPause alert fires; the un-started steps lost commence);
- ``MachineBlocked`` (Warning): a machine's node flow turned Blocked (its
  drain outlived the drain timeout; the message names the pod and budget);
- ``MachineLockFailed`` (Warning): a machine's NodeWorkloadLock failed;
- ``ClusterLockFailed`` (Warning): a ClusterWorkloadLock failed (told again
  when the failure's message changes).
"""

from __future__ import annotations

from racksmith.controllers.update.names import (
    BLOCKED,
    COND_AUTO_PAUSED,
    COND_LOCK_FAILED,
    LOCK_FAILED,
)
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.lcm import ClusterUpdatePlan, ClusterUpdatePlanStatus, PlanPhase, StepPhase
from racksmith.runtime.conditions import EventSpec, find

STEP_COMMENCED = "StepCommenced"
STEP_COMPLETED = "StepCompleted"
PLAN_COMPLETED = "PlanCompleted"
AUTO_PAUSED = "AutoPaused"
MACHINE_BLOCKED = "MachineBlocked"
MACHINE_LOCK_FAILED = "MachineLockFailed"
CLUSTER_LOCK_FAILED = "ClusterLockFailed"

_WAITING = (None, StepPhase.NOT_STARTED, StepPhase.AUTO_PAUSED)
_GOING = (StepPhase.SCHEDULED, StepPhase.IN_PROGRESS)
_MACHINE_EVENTS = ((BLOCKED, MACHINE_BLOCKED), (LOCK_FAILED, MACHINE_LOCK_FAILED))


def plan_events(plan: ClusterUpdatePlan, new: ClusterUpdatePlanStatus, *,
                cluster_lock_failed: str | None = None) -> list[EventSpec]:
    """The Events the change from ``plan.status`` to ``new`` is worth (see the
    module docstring); ``cluster_lock_failed``: the failed ClusterWorkloadLocks'
    message this reconcile saw, if any."""
    old = plan.status or ClusterUpdatePlanStatus()
    names = {s.id: s.name or s.id for s in plan.spec.steps}
    events: list[EventSpec] = []
    before = {s.id: s.phase for s in old.steps} if plan.status is not None else {}
    for step in new.steps:
        was = before.get(step.id)
        label = f"step {step.id} ({names.get(step.id, step.id)})"
        if was in _WAITING and step.phase in _GOING:
            events.append(EventSpec("Normal", STEP_COMMENCED, f"{label} commenced"))
        if step.phase == StepPhase.COMPLETED and was != StepPhase.COMPLETED:
            events.append(EventSpec("Normal", STEP_COMPLETED,
                                    f"{label} completed" + (f": {step.message}"
                                                            if step.message else "")))
    states = {m.name: m.state for m in old.machines}
    for m in new.machines:
        for state, reason in _MACHINE_EVENTS:
            if m.state == state and states.get(m.name) != state:
                events.append(EventSpec("Warning", reason,
                                        f"machine {m.name}: {m.message or state}"))
    paused = find(new.conditions, COND_AUTO_PAUSED)
    paused_before = find(old.conditions, COND_AUTO_PAUSED)
    if paused is not None and paused.status is ConditionStatus.TRUE and (
            paused_before is None or paused_before.status is not ConditionStatus.TRUE):
        events.append(EventSpec("Warning", AUTO_PAUSED,
                                f"update paused, alerts {paused.message or 'firing'}; "
                                "steps not started lost commence"))
    if cluster_lock_failed:
        failed_before = find(old.conditions, COND_LOCK_FAILED)
        told = failed_before is not None and failed_before.status is ConditionStatus.TRUE \
            and cluster_lock_failed in (failed_before.message or "")
        if not told:
            events.append(EventSpec("Warning", CLUSTER_LOCK_FAILED, cluster_lock_failed))
    if new.phase == PlanPhase.COMPLETED and old.phase != PlanPhase.COMPLETED:
        events.append(EventSpec("Normal", PLAN_COMPLETED,
                                f"every machine of cluster {plan.spec.cluster} runs release "
                                f"{plan.spec.target}"))
    return events
