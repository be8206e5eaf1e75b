"""Applying a planner step to a Machine's status: the committer's pure core.

Owns how a ``Step`` (plus the conditions the action's outcome adds) changes
``MachineStatus`` — phase, hostRef, the Ready fields, conditions (transition
time moves only with the status), observedGeneration — and which Events a
change is worth: a phase change (Normal) and a condition that turns False
or changes while False (Warning), unless it only says what is being waited
for (Ready, HostProvisioned, a network still rendering, a drain in progress).
Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.plan import Step
from racksmith.kinds.cluster import MachineStatus
from racksmith.kinds.common import ConditionStatus
from racksmith.runtime.conditions import (
    ConditionSpec,
    EventSpec,
    changed,
    find,
    same_but_times,
    set_condition,
)


def apply_step(
    old: MachineStatus | None,
    step: Step,
    extra: Iterable[ConditionSpec] = (),
    *,
    now: datetime,
    generation: int | None,
) -> MachineStatus:
    """The status after ``step``; ``extra`` conditions (from the action's
    outcome) win over the step's own."""
    new = (old or MachineStatus()).model_copy(deep=True)
    new.phase = step.phase
    if step.host_ref is not None:
        new.host_ref = step.host_ref
    if step.ready is not None:
        new.node_ref = step.ready.node_ref
        new.addresses = list(step.ready.addresses)
        new.release = step.ready.release
    for spec in _last_per_type([*step.conditions, *extra]):
        new.conditions = set_condition(new.conditions, spec, now, generation)
    new.observed_generation = generation
    return new


def _last_per_type(specs: list[ConditionSpec]) -> list[ConditionSpec]:
    by_type: dict[str, ConditionSpec] = {}
    for spec in specs:
        by_type.pop(spec.type, None)
        by_type[spec.type] = spec
    return list(by_type.values())


_QUIET: frozenset[tuple[str, str | None]] = frozenset({
    (n.NETWORK_READY, "Pending"), (n.DRAINED, "Draining"), (n.HOST_CLAIMED, "Releasing"),
})
"""False conditions that are ordinary progress, not worth an Event (besides
Ready and HostProvisioned, which only say what is being waited for)."""
_QUIET_TYPES = frozenset({n.READY, n.HOST_PROVISIONED})


def _worth_event(spec: ConditionSpec) -> bool:
    return spec.type not in _QUIET_TYPES and (spec.type, spec.reason) not in _QUIET


def status_events(
    old: MachineStatus | None, step: Step, extra: Iterable[ConditionSpec] = ()
) -> list[EventSpec]:
    """The Events the change from ``old`` is worth (see the module docstring)."""
    events: list[EventSpec] = []
    old_phase = old.phase if old else None
    if step.phase != old_phase:
        was = old_phase.value if old_phase else "new"
        events.append(EventSpec("Normal", step.phase.value, f"phase {was} → {step.phase.value}"))
    conditions = old.conditions if old else []
    for spec in _last_per_type([*step.conditions, *extra]):
        if (spec.status is ConditionStatus.FALSE and _worth_event(spec)
                and changed(find(conditions, spec.type), spec)):
            events.append(EventSpec("Warning", spec.reason, spec.message or ""))
    return events


def same_status(a: MachineStatus | None, b: MachineStatus) -> bool:
    """``a`` and ``b`` say the same (transition times aside)."""
    return same_but_times(a, b)
