"""Conditions and Events as plain data, and the one rule for setting a condition.

Owns ``ConditionSpec`` (what a planner wants a condition to say),
``EventSpec`` (a core v1 Event to emit), ``set_condition`` (the transition
time moves only when the status does), ``find``, ``changed`` and
``same_but_times`` (two statuses equal but for their conditions'
transition times: a controller writes a status only when that is false). Pure (the
caller passes the time). Shared by the Machine, Cluster and Volume
controllers, which import it from here rather than from one another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from racksmith.kinds.common import Condition, ConditionStatus

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class ConditionSpec:
    """A condition to set; ``message`` must never hold a secret."""

    type: str
    status: ConditionStatus
    reason: str
    message: str | None
    """None: the condition carries no message."""

    @classmethod
    def true(cls, type_: str, reason: str, message: str) -> ConditionSpec:
        return cls(type_, ConditionStatus.TRUE, reason, message)

    @classmethod
    def false(cls, type_: str, reason: str, message: str) -> ConditionSpec:
        return cls(type_, ConditionStatus.FALSE, reason, message)


@dataclass(frozen=True)
class EventSpec:
    """A core v1 Event about the object; ``message`` must never hold a secret."""

    type: EventType
    reason: str
    message: str


def set_condition(
    conditions: Iterable[Condition], spec: ConditionSpec, now: datetime, generation: int | None
) -> list[Condition]:
    """``conditions`` with ``spec`` set (appended when new); the transition
    time moves only when the status changes."""
    out: list[Condition] = []
    found = False
    for cond in conditions:
        if cond.type != spec.type:
            out.append(cond)
            continue
        found = True
        since = cond.last_transition_time if cond.status == spec.status else now
        out.append(_condition(spec, since or now, generation))
    if not found:
        out.append(_condition(spec, now, generation))
    return out


def find(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """The condition of type ``type_``, if set."""
    return next((c for c in conditions if c.type == type_), None)


def changed(old: Condition | None, spec: ConditionSpec) -> bool:
    """Setting ``spec`` would change what ``old`` says (status, reason or message)."""
    return old is None or (old.status, old.reason, old.message) != (
        spec.status, spec.reason, spec.message)


def _condition(spec: ConditionSpec, since: datetime, generation: int | None) -> Condition:
    return Condition(type=spec.type, status=spec.status, reason=spec.reason,
                     message=spec.message, last_transition_time=since,
                     observed_generation=generation)


def same_but_times(a: BaseModel | None, b: BaseModel, *, also: tuple[str, ...] = ()) -> bool:
    """``a`` and ``b`` (two statuses) are equal but for their conditions'
    transition times and the top-level fields ``also`` (by Python name);
    False when there is no ``a``."""
    if a is None:
        return False

    def plain(s: BaseModel) -> dict[str, Any]:
        out = s.model_dump(mode="json")
        for cond in out.get("conditions") or []:
            cond.pop("last_transition_time", None)
        for name in also:
            out.pop(name, None)
        return out
    return plain(a) == plain(b)

