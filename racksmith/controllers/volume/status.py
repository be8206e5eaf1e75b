"""Applying a planner step to a Volume's status: the committer's pure core.

Owns how a ``Step`` changes ``VolumeStatus`` — the Ready condition
(transition time moves only with its status), the phase derived from it
(True → Available; False → Failed; Unknown+Pending → Pending; otherwise
Terminating), ``job``, ``deviceName`` and ``size`` — and which Events a
change is worth: a phase change (Normal) and Ready turning False or
changing while False (Warning, with the condition's reason and message).
A phase change whose step tells its own Normal Event (``JobStarted`` with
Pending, ``PersistentVolumeCreated`` with Available) is told by that Event
alone: two Events per provisioned volume, as Kubernetes' external
provisioner writes (Provisioning, ProvisioningSucceeded), not four.
Pure: the caller passes the time and the new job.
"""

from __future__ import annotations

from datetime import datetime

from racksmith.controllers.volume.names import READY
from racksmith.controllers.volume.plan import Step
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.storage import VolumePhase, VolumeReason, VolumeStatus
from racksmith.runtime.conditions import (
    ConditionSpec,
    EventSpec,
    changed,
    find,
    same_but_times,
    set_condition,
)


def phase_of(ready: ConditionSpec) -> VolumePhase:
    """The user-facing phase for a Ready condition."""
    if ready.status is ConditionStatus.TRUE:
        return VolumePhase.AVAILABLE
    if ready.status is ConditionStatus.FALSE:
        return VolumePhase.FAILED
    if ready.reason == VolumeReason.PENDING.value:
        return VolumePhase.PENDING
    return VolumePhase.TERMINATING


def apply_step(old: VolumeStatus | None, step: Step, *, job: str | None, now: datetime,
               generation: int | None) -> VolumeStatus:
    """The status after ``step``; ``job``: the job just started, if any."""
    new = (old or VolumeStatus()).model_copy(deep=True)
    if step.ready is not None:
        new.conditions = set_condition(new.conditions, step.ready, now, generation)
        new.phase = phase_of(step.ready)
    if job is not None:
        new.job = job
    elif step.clear_job:
        new.job = None
    if step.device_name is not None:
        new.device_name = step.device_name
    if step.size is not None:
        new.size = step.size
    return new


def status_events(old: VolumeStatus | None, step: Step,
                  told: list[EventSpec] | tuple[EventSpec, ...] = ()) -> list[EventSpec]:
    """The Events the change from ``old`` is worth, besides ``told`` (the
    step's own Events; see the module docstring)."""
    if step.ready is None:
        return []
    events: list[EventSpec] = []
    old_phase = old.phase if old else None
    phase = phase_of(step.ready)
    if phase != old_phase and not any(e.type == "Normal" for e in told):
        was = old_phase.value if old_phase else "new"
        events.append(EventSpec("Normal", phase.value, f"phase {was} → {phase.value}"))
    before = find(old.conditions if old else [], READY)
    if step.ready.status is ConditionStatus.FALSE and changed(before, step.ready):
        events.append(EventSpec("Warning", step.ready.reason, step.ready.message or ""))
    return events


def same_status(a: VolumeStatus | None, b: VolumeStatus) -> bool:
    """``a`` and ``b`` say the same (transition times aside)."""
    return same_but_times(a, b)
