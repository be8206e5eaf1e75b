"""The Subnet controller's Events: what a change of verdict is worth telling.

Owns ``status_events(old, new)``, pure: the Events (about the Subnet) the
change of its ``Ready`` condition from ``old`` to ``new`` is worth — on
transitions only (the controller re-judges every subnet whenever one
changes, and the free count moves with every claim):

- a Warning named after the reason when the subnet becomes unusable or
  unusable for another reason: ``Exhausted`` (every address allocated),
  ``InvalidSpec`` (the CIDR, gateway or ranges do not parse),
  ``Overlapping`` (an older subnet holds the range);
- ``Ready`` (Normal) when a subnet that was not Ready is again (a new
  subnet that is Ready at once is no news).
"""

from __future__ import annotations

from racksmith.ipamclaims.names import READY, REASON_READY
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.ipam import SubnetStatus
from racksmith.runtime.conditions import EventSpec, find


def status_events(old: SubnetStatus | None, new: SubnetStatus) -> list[EventSpec]:
    """The Events the change from ``old`` to ``new`` is worth (see the module docstring)."""
    now = find(new.conditions, READY)
    was = find(old.conditions, READY) if old is not None else None
    if now is None or (was is not None and (was.status, was.reason) == (now.status, now.reason)):
        return []
    if now.status is ConditionStatus.TRUE:
        if was is None:
            return []
        return [EventSpec("Normal", REASON_READY, now.message or "usable for allocation")]
    return [EventSpec("Warning", now.reason or "NotReady", now.message or "not usable")]
