"""Building the IpamHost and L2Template statuses: pure helpers.

Owns :class:`Outcome` (what one IpamHost reconcile concluded: state,
condition reason, messages and, when rendered, the new netconfig), the
IpamHost status it leads to (:func:`host_status`), condition updates that
keep ``lastTransitionTime`` while a condition's status is unchanged
(:func:`set_condition`) and the comparison that spares writes of an
unchanged status (:func:`same_status`). No I/O; the caller passes the time.

``status.netconfig`` and ``status.l2TemplateRef`` always describe the last
successful render: an Error or Pending outcome changes state, messages and
the Ready condition but leaves the render a provisioned host may be using.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from racksmith.controllers.ipamhost.names import READY, REASON_RENDERED
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.ipam import IpamHostState, IpamHostStatus
from racksmith.runtime.conditions import ConditionSpec, find, same_but_times
from racksmith.runtime.conditions import set_condition as runtime_set_condition


@dataclass(frozen=True)
class Outcome:
    """What one IpamHost reconcile concluded."""

    state: IpamHostState
    reason: str
    messages: list[str] = field(default_factory=list)
    netconfig: dict[str, Any] | None = None
    template: str | None = None
    ip_addresses: list[str] | None = None
    """Names of the IPaddrs held; None keeps the previous list."""

    @property
    def message(self) -> str:
        return "; ".join(self.messages) if self.messages else "netconfig rendered"


def set_condition(conditions: Sequence[Condition], new: Condition, now: datetime
                  ) -> list[Condition]:
    """``conditions`` with ``new`` set: ``runtime.conditions.set_condition``
    (``lastTransitionTime`` kept when the status did not change, else ``now``)."""
    spec = ConditionSpec(new.type, new.status, new.reason or "", new.message or "")
    return runtime_set_condition(conditions, spec, now, new.observed_generation)


def condition_of(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return find(conditions, kind)


def host_status(previous: IpamHostStatus | None, outcome: Outcome, generation: int | None,
                now: datetime) -> IpamHostStatus:
    """The IpamHost status showing ``outcome`` (see the module docstring)."""
    base = previous if previous is not None else IpamHostStatus()
    ok = outcome.state == IpamHostState.OK
    ready = Condition(
        type=READY, status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE,
        reason=REASON_RENDERED if ok else outcome.reason, message=outcome.message,
        observed_generation=generation)
    return IpamHostStatus(
        state=outcome.state,
        l2TemplateRef=outcome.template if ok else base.l2_template_ref,
        netconfig=outcome.netconfig if ok else base.netconfig,
        ip_addresses=(outcome.ip_addresses if outcome.ip_addresses is not None
                      else base.ip_addresses),
        messages=list(outcome.messages),
        observed_generation=generation,
        conditions=set_condition(base.conditions, ready, now),
    )


def same_status(a: BaseModel | None, b: BaseModel) -> bool:
    """Equal but for condition transition times."""
    return same_but_times(a, b)
