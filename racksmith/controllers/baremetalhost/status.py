"""Applying a proposal to a status: the committer's pure core.

Owns how a ``Proposal`` changes ``BareMetalHostStatus`` (state via the
table, operation history, error count, credentials, conditions, derived
operational status; conditions through ``runtime.conditions``) and the
error back-off. Pure: the
caller passes the time. Called by ``committer`` and by unit tests.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.states import OPERATION_OF, transition
from racksmith.kinds.common import Condition
from racksmith.kinds.metal import (
    BareMetalHostStatus,
    OperationalStatus,
    OperationHistory,
    OperationMetric,
    ProvisioningState,
    ProvisionStatus,
)
from racksmith.runtime.conditions import set_condition

BACKEND_REACHABLE = "BackendReachable"
_HISTORY_FIELD = {"register": "register_", "inspect": "inspect", "provision": "provision",
                  "deprovision": "deprovision"}


def condition(status: BareMetalHostStatus | None, kind: str) -> Condition | None:
    """The condition of type ``kind``, if set."""
    for cond in (status.conditions if status else []):
        if cond.type == kind:
            return cond
    return None


def apply_proposal(
    old: BareMetalHostStatus | None, p: Proposal, *, now: datetime, generation: int | None
) -> BareMetalHostStatus:
    """The status after ``p``; raises IllegalTransition for a transition not in the table."""
    new = (old or BareMetalHostStatus()).model_copy(deep=True)
    prov = new.provisioning or ProvisionStatus()
    old_state = prov.state
    if p.next_state is not None and p.next_state != old_state:
        transition(old_state, p.next_state)
        prov.state = p.next_state
        _time_operations(new, old_state, p.next_state, now)
    if p.provisioning_id is not None:
        prov.id = p.provisioning_id
    if p.record_image is not None:
        prov.image = p.record_image
    if p.record_layout is not None:
        prov.disk_layout = p.record_layout
    if p.clear_image:
        prov.image = None
        prov.disk_layout = None
    if p.forget_registration:
        prov.id = None
        new.good_credentials = None
    new.provisioning = prov
    if p.hardware is not None:
        new.hardware = p.hardware
    if p.powered_on is not None:
        new.powered_on = p.powered_on
    if p.tried_credentials is not None:
        new.tried_credentials = p.tried_credentials
    if p.good_credentials is not None:
        new.good_credentials = p.good_credentials
    if p.error is not None:
        new.error_type, new.error_message = p.error
        new.error_count += 1
    elif p.clear_error:
        new.error_type, new.error_message, new.error_count = None, None, 0
    for spec in p.conditions:
        new.conditions = set_condition(new.conditions, spec, now, generation)
    new.operational_status = _operational(new, p, old)
    return new


def _time_operations(
    status: BareMetalHostStatus, old: ProvisioningState | None, new: ProvisioningState,
    now: datetime,
) -> None:
    history = status.operation_history or OperationHistory()
    if old in OPERATION_OF:
        field = _HISTORY_FIELD[OPERATION_OF[old]]
        metric = getattr(history, field)
        if metric is not None and metric.end is None:
            metric.end = now
    if new in OPERATION_OF:
        setattr(history, _HISTORY_FIELD[OPERATION_OF[new]], OperationMetric(start=now))
    status.operation_history = history


def _operational(
    new: BareMetalHostStatus, p: Proposal, old: BareMetalHostStatus | None
) -> OperationalStatus:
    if p.operational_status is not None:
        return p.operational_status
    if (old is not None and old.operational_status is OperationalStatus.DETACHED
            and not p.clear_detached):
        return OperationalStatus.DETACHED
    if new.error_type is not None:
        return OperationalStatus.ERROR
    state = new.provisioning.state if new.provisioning else None
    if state in (None, ProvisioningState.UNMANAGED):
        return OperationalStatus.DISCOVERED
    return OperationalStatus.OK


def error_delay(count: int, settings: BareMetalHostSettings, random: Callable[[], float]) -> float:
    """Wait after the ``count``-th consecutive error: doubling, jittered, capped."""
    raw = settings.error_backoff_base * 2.0 ** min(max(count - 1, 0), 40)
    raw = min(settings.error_backoff_cap, raw)
    scaled = raw * (1.0 + settings.jitter * (2.0 * random() - 1.0))
    return max(settings.poll_floor, min(settings.error_backoff_cap, scaled))
