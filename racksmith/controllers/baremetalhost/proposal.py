"""What a state handler proposes: the next state and the status changes.

Owns the ``Proposal`` record (plain data) handlers return and the committer
applies; handlers never write anything themselves. Conditions and Events
are the runtime's ``ConditionSpec`` and ``EventSpec``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from racksmith.kinds.hardware import HardwareDetails
from racksmith.kinds.metal import (
    CredentialsStatus,
    ErrorType,
    Image,
    OperationalStatus,
    ProvisioningState,
)
from racksmith.runtime.conditions import ConditionSpec, EventSpec


@dataclass
class Proposal:
    """Changes proposed by one handler run; empty fields change nothing."""

    next_state: ProvisioningState | None = None
    """Transition to this state (must be in the state table)."""
    detail: str = ""
    """Extra words for the transition's log line and Event."""
    error: tuple[ErrorType, str] | None = None
    """Record an error (``errorCount`` + 1, back-off)."""
    clear_error: bool = False
    """The step succeeded or progressed: clear errorType/errorMessage/errorCount."""
    requeue_after: float | None = None
    """Look again after this long; None: when something changes (or the steady poll)."""
    steady: bool = False
    """The host is settled in a power-managed state: re-check after the steady poll."""

    hardware: HardwareDetails | None = None
    """New ``status.hardware`` (summary); ``inventory`` holds the full report."""
    inventory: HardwareDetails | None = None
    powered_on: bool | None = None
    provisioning_id: str | None = None
    record_image: Image | None = None
    clear_image: bool = False
    record_layout: dict[str, Any] | None = None
    """The rendered disk layout deployed with the image (status.provisioning.diskLayout)."""
    tried_credentials: CredentialsStatus | None = None
    good_credentials: CredentialsStatus | None = None
    forget_registration: bool = False
    """Drop ``provisioning.ID`` and ``goodCredentials`` (the backend forgot the host)."""
    operational_status: OperationalStatus | None = None
    """Force this operational status (``detached``); otherwise derived."""
    clear_detached: bool = False
    conditions: list[ConditionSpec] = field(default_factory=list)

    add_finalizer: bool = False
    remove_finalizer: bool = False
    remove_annotations: tuple[str, ...] = ()
    set_annotations: dict[str, str] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)

    def merged(self, other: Proposal) -> Proposal:
        """``self`` with every field ``other`` sets (differs from the default) on top;
        lists, annotation changes, conditions and events are combined."""
        out = Proposal(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        for name in self.__dataclass_fields__:
            value = getattr(other, name)
            if name == "conditions":
                out.conditions = [*self.conditions, *other.conditions]
            elif name == "events":
                out.events = [*self.events, *other.events]
            elif name == "set_annotations":
                out.set_annotations = {**self.set_annotations, **other.set_annotations}
            elif name == "remove_annotations":
                out.remove_annotations = (*self.remove_annotations, *other.remove_annotations)
            elif value != _DEFAULTS[name]:
                setattr(out, name, value)
        return out


_DEFAULTS = {
    f.name: (f.default_factory() if f.default_factory is not MISSING else f.default)
    for f in fields(Proposal)
}
