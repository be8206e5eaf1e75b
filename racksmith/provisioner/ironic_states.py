"""Ironic's node states, translated into our terms in one table.

Owns :data:`PROVISION_STATES` (every Ironic provision state → whether it is
stable, busy or failed, which :class:`ErrorKind` a failure is, and how long
to wait before looking again), :class:`IronicTimings` (the waits after our
own requests), :data:`POWER_STATES` (Ironic power states → on/off/unknown)
and :func:`failure`, which turns a failed node's
``last_error`` into a :class:`Result`. Nothing else in Racksmith knows
Ironic's state names; :mod:`racksmith.provisioner.ironic` asks this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from racksmith.provisioner.base import ErrorKind, Result
from racksmith.redact import mask_values


class Phase(Enum):
    """How a provision state behaves."""

    STABLE = "stable"
    """Nothing happens until someone asks for a change."""
    BUSY = "busy"
    """Ironic is working; look again later."""
    FAILED = "failed"
    """An operation failed; ``last_error`` says why."""


@dataclass(frozen=True)
class StateInfo:
    phase: Phase
    poll: float = 0.0
    """Seconds to wait before looking again (BUSY states)."""
    error_kind: ErrorKind | None = None
    """What a FAILED state means for the operator."""


# Ironic provision state names (ironic/common/states.py).
ENROLL = "enroll"
VERIFYING = "verifying"
MANAGEABLE = "manageable"
INSPECTING = "inspecting"
INSPECT_WAIT = "inspect wait"
INSPECT_FAILED = "inspect failed"
CLEANING = "cleaning"
CLEAN_WAIT = "clean wait"
CLEAN_HOLD = "clean hold"
CLEAN_FAILED = "clean failed"
AVAILABLE = "available"
DEPLOYING = "deploying"
DEPLOY_WAIT = "wait call-back"
DEPLOY_HOLD = "deploy hold"
DEPLOY_FAILED = "deploy failed"
ACTIVE = "active"
DELETING = "deleting"
ERROR = "error"
ADOPTING = "adopting"
ADOPT_FAILED = "adopt failed"
RESCUING = "rescuing"
RESCUE_WAIT = "rescue wait"
RESCUE = "rescue"
RESCUE_FAILED = "rescue failed"
UNRESCUING = "unrescuing"
UNRESCUE_FAILED = "unrescue failed"
SERVICING = "servicing"
SERVICE_WAIT = "service wait"
SERVICE_HOLD = "service hold"
SERVICE_FAILED = "service failed"

#: The one translation table. Poll intervals follow how long each phase
#: takes on real hardware: short for API-side work, longer while a ramdisk
#: boots (the controller should not hammer Ironic: a field pain point).
PROVISION_STATES: dict[str, StateInfo] = {
    ENROLL: StateInfo(Phase.STABLE),
    VERIFYING: StateInfo(Phase.BUSY, poll=2.0),
    MANAGEABLE: StateInfo(Phase.STABLE),
    INSPECTING: StateInfo(Phase.BUSY, poll=5.0),
    INSPECT_WAIT: StateInfo(Phase.BUSY, poll=10.0),
    INSPECT_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.INSPECTION),
    CLEANING: StateInfo(Phase.BUSY, poll=5.0),
    CLEAN_WAIT: StateInfo(Phase.BUSY, poll=10.0),
    CLEAN_HOLD: StateInfo(Phase.BUSY, poll=10.0),
    CLEAN_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.PREPARATION),
    AVAILABLE: StateInfo(Phase.STABLE),
    DEPLOYING: StateInfo(Phase.BUSY, poll=5.0),
    DEPLOY_WAIT: StateInfo(Phase.BUSY, poll=10.0),
    DEPLOY_HOLD: StateInfo(Phase.BUSY, poll=10.0),
    DEPLOY_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.PROVISIONING),
    ACTIVE: StateInfo(Phase.STABLE),
    DELETING: StateInfo(Phase.BUSY, poll=5.0),
    ERROR: StateInfo(Phase.FAILED, error_kind=ErrorKind.PROVISIONING),
    ADOPTING: StateInfo(Phase.BUSY, poll=2.0),
    ADOPT_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.PROVISIONING),
    RESCUING: StateInfo(Phase.BUSY, poll=10.0),
    RESCUE_WAIT: StateInfo(Phase.BUSY, poll=10.0),
    RESCUE: StateInfo(Phase.STABLE),
    RESCUE_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.PROVISIONING),
    UNRESCUING: StateInfo(Phase.BUSY, poll=5.0),
    UNRESCUE_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.PROVISIONING),
    SERVICING: StateInfo(Phase.BUSY, poll=5.0),
    SERVICE_WAIT: StateInfo(Phase.BUSY, poll=10.0),
    SERVICE_HOLD: StateInfo(Phase.BUSY, poll=10.0),
    SERVICE_FAILED: StateInfo(Phase.FAILED, error_kind=ErrorKind.SERVICING),
}

#: Unknown states (a newer Ironic) are treated as busy: look again later.
UNKNOWN_STATE = StateInfo(Phase.BUSY, poll=10.0)


@dataclass(frozen=True)
class IronicTimings:
    """How long the Ironic provisioner asks the caller to wait after its own
    requests (seconds). The composition root may override the defaults;
    tests shrink them. The waits of busy states are the table's."""

    action_poll: float = 1.0
    """Look again this soon after requesting a change ourselves (Ironic acts
    within ~0.1 s on fake hardware; real BMCs take seconds), or after a
    conflicting or retryable Ironic API error."""
    power_poll: float = 2.0
    """Look again this soon while a power change is pending."""

    def __post_init__(self) -> None:
        if self.action_poll <= 0 or self.power_poll <= 0:
            raise ValueError("Ironic timings must be > 0")

#: Ironic power states → powered on (True), off (False), unknown (None).
POWER_STATES: dict[str | None, bool | None] = {
    "power on": True,
    "power off": False,
    "rebooting": True,
    "soft rebooting": True,
    "soft power off": False,
    "error": None,
    None: None,
}


def state_info(provision_state: str | None) -> StateInfo:
    """The table entry for ``provision_state`` (unknown → busy)."""
    if provision_state is None:
        return UNKNOWN_STATE
    return PROVISION_STATES.get(provision_state, UNKNOWN_STATE)


def is_busy(node: dict[str, Any]) -> bool:
    """Ironic is working on the node: a busy state, or a stable state with a
    pending target. Failed states keep the target they failed to reach, so a
    target alone does not mean busy."""
    info = state_info(node.get("provision_state"))
    if info.phase is Phase.FAILED:
        return False
    return info.phase is Phase.BUSY or bool(node.get("target_provision_state"))


def busy_result(node: dict[str, Any], timings: IronicTimings, *, dirty: bool = False) -> Result:
    """Look again after the state's poll interval (``timings.action_poll`` for
    a state without one)."""
    info = state_info(node.get("provision_state"))
    return Result.wait(info.poll or timings.action_poll, dirty=dirty)


def power_on(power_state: str | None) -> bool | None:
    return POWER_STATES.get(power_state)


def failure(node: dict[str, Any], *, kind: ErrorKind | None = None,
            secrets: tuple[str, ...] = ()) -> Result:
    """``Result.fail`` for a failed node: Ironic's ``last_error`` (or the
    state name when Ironic gave no reason) with ``secrets`` masked."""
    state = node.get("provision_state")
    info = state_info(state)
    error_kind = kind or info.error_kind or ErrorKind.PROVISIONING
    message = node.get("last_error") or f"Ironic node is in state {state!r}"
    return Result.fail(error_kind, scrub(str(message), secrets))


def scrub(message: str, secrets: tuple[str, ...]) -> str:
    """Mask every secret in ``message`` (:func:`racksmith.redact.mask_values`)."""
    return mask_values(message, secrets)
