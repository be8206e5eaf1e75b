"""The BareMetalHost state table: every allowed provisioning-state transition.

Owns the transitions as data (source, target, event reason, when), the
state a deletion leads to from each state, the long operation each state
times in ``status.operationHistory``, and the Mermaid diagram of the table
that ``docs/baremetal.md`` embeds. Handlers propose targets; the committer
refuses any pair not listed here. ``None`` is a host with no status yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from racksmith.kinds.metal import ProvisioningState as S


@dataclass(frozen=True)
class Transition:
    """``source`` → ``target``; ``reason`` is the Event reason, ``when`` the trigger."""

    source: S | None
    target: S
    reason: str
    when: str


def _t(source: S | None, target: S, reason: str, when: str) -> Transition:
    return Transition(source, target, reason, when)


_DELETED = "host deleted"

TRANSITIONS: tuple[Transition, ...] = (
    _t(None, S.UNMANAGED, "Unmanaged", "no BMC details"),
    _t(None, S.REGISTERING, "Registering", "BMC details given"),
    _t(None, S.DELETING, "Deleting", _DELETED),
    _t(S.UNMANAGED, S.REGISTERING, "Registering", "BMC details added"),
    _t(S.UNMANAGED, S.DELETING, "Deleting", _DELETED),
    _t(S.REGISTERING, S.UNMANAGED, "Unmanaged", "BMC details removed"),
    _t(S.REGISTERING, S.INSPECTING, "Registered", "BMC access verified"),
    _t(S.REGISTERING, S.PREPARING, "Registered", "verified; inspection disabled or done"),
    _t(S.REGISTERING, S.EXTERNALLY_PROVISIONED, "Registered", "verified; externallyProvisioned"),
    _t(S.REGISTERING, S.DELETING, "Deleting", _DELETED),
    _t(S.INSPECTING, S.PREPARING, "InspectionComplete", "hardware details collected"),
    _t(S.INSPECTING, S.POWERING_OFF_BEFORE_DELETE, "Deleting", _DELETED),
    _t(S.PREPARING, S.AVAILABLE, "Prepared", "host cleaned and ready"),
    _t(S.PREPARING, S.POWERING_OFF_BEFORE_DELETE, "Deleting", _DELETED),
    _t(S.AVAILABLE, S.PROVISIONING, "ProvisioningStarted", "image set, profile fits"),
    _t(S.AVAILABLE, S.EXTERNALLY_PROVISIONED, "Adopted", "externallyProvisioned set"),
    _t(S.AVAILABLE, S.INSPECTING, "InspectionRequested", "inspect annotation"),
    _t(S.AVAILABLE, S.POWERING_OFF_BEFORE_DELETE, "Deleting", _DELETED),
    _t(S.PROVISIONING, S.PROVISIONED, "ProvisioningComplete", "image deployed"),
    _t(S.PROVISIONING, S.DEPROVISIONING, "Deprovisioning",
       "image changed or removed, deleted, or the deploy failed again (retry)"),
    _t(S.PROVISIONED, S.DEPROVISIONING, "Deprovisioning", "image changed or removed, or deleted"),
    _t(S.PROVISIONED, S.SERVICING, "ServicingStarted",
       "a reboot is asked and the HostFirmwareSettings want other values"),
    _t(S.SERVICING, S.PROVISIONED, "ServicingComplete", "firmware settings applied"),
    _t(S.SERVICING, S.DEPROVISIONING, "Deprovisioning", _DELETED),
    _t(S.EXTERNALLY_PROVISIONED, S.INSPECTING, "ManagementRequested",
       "externallyProvisioned cleared, never inspected"),
    _t(S.EXTERNALLY_PROVISIONED, S.PREPARING, "ManagementRequested",
       "externallyProvisioned cleared"),
    _t(S.EXTERNALLY_PROVISIONED, S.POWERING_OFF_BEFORE_DELETE, "Deleting", _DELETED),
    _t(S.DEPROVISIONING, S.AVAILABLE, "DeprovisioningComplete", "image removed, disks cleaned"),
    _t(S.DEPROVISIONING, S.POWERING_OFF_BEFORE_DELETE, "DeprovisioningComplete",
       "deprovisioned; host deleted"),
    _t(S.POWERING_OFF_BEFORE_DELETE, S.DELETING, "PoweredOff", "host powered off"),
)

_BY_PAIR = {(t.source, t.target): t for t in TRANSITIONS}

DELETION_TARGET: dict[S | None, S] = {
    None: S.DELETING,
    S.UNMANAGED: S.DELETING,
    S.REGISTERING: S.DELETING,
    S.INSPECTING: S.POWERING_OFF_BEFORE_DELETE,
    S.PREPARING: S.POWERING_OFF_BEFORE_DELETE,
    S.AVAILABLE: S.POWERING_OFF_BEFORE_DELETE,
    S.EXTERNALLY_PROVISIONED: S.POWERING_OFF_BEFORE_DELETE,
    S.PROVISIONING: S.DEPROVISIONING,
    S.PROVISIONED: S.DEPROVISIONING,
    S.SERVICING: S.DEPROVISIONING,
    S.DEPROVISIONING: S.DEPROVISIONING,
    S.POWERING_OFF_BEFORE_DELETE: S.POWERING_OFF_BEFORE_DELETE,
    S.DELETING: S.DELETING,
}
"""Where a host being deleted goes next from each state (itself: keep going)."""

OPERATION_OF: dict[S, str] = {
    S.REGISTERING: "register",
    S.INSPECTING: "inspect",
    S.PROVISIONING: "provision",
    S.DEPROVISIONING: "deprovision",
}
"""The ``status.operationHistory`` entry each state times (start on entry, end on exit)."""

POWER_MANAGED = frozenset({S.AVAILABLE, S.PROVISIONED, S.EXTERNALLY_PROVISIONED})
"""States in which ``spec.online`` drives the power."""


class IllegalTransition(ValueError):
    """A handler proposed a transition the table does not list (a bug)."""


def transition(source: S | None, target: S) -> Transition:
    """The table entry for ``source`` → ``target``; raises IllegalTransition."""
    found = _BY_PAIR.get((source, target))
    if found is None:
        raise IllegalTransition(f"{_label(source)} → {target.value} is not in the state table")
    return found


def is_allowed(source: S | None, target: S) -> bool:
    """``source`` → ``target`` is in the table."""
    return (source, target) in _BY_PAIR


def targets(source: S | None) -> list[S]:
    """Every state ``source`` may lead to, in table order."""
    return [t.target for t in TRANSITIONS if t.source == source]


def _label(state: S | None) -> str:
    return '""' if state is None else state.value


def _node(state: S | None) -> str:
    return "[*]" if state is None else state.name.lower()


def render_mermaid() -> str:
    """The table as a Mermaid ``stateDiagram-v2`` (for ``docs/baremetal.md``)."""
    lines = ["stateDiagram-v2"]
    for state in S:
        lines.append(f'    state "{state.value}" as {_node(state)}')
    for t in TRANSITIONS:
        lines.append(f"    {_node(t.source)} --> {_node(t.target)}: {t.when}")
    lines.append("    deleting --> [*]: removed from the backend, finalizer dropped")
    return "\n".join(lines) + "\n"
