"""Metal3's ``baremetalhost.metal3.io/status`` annotation: a host moved from
another site (or recreated from ``racksmith export``) keeps what was known.

Owns ``restored_status``: the status a host created with the annotation and
no status takes. Pure. As Metal3 (BMO) does, the copy is taken once (when
the host has no status), and the annotation is removed on the next
reconcile. What the copy keeps and what it drops is Racksmith's choice,
made for a host whose backend record is gone (a new site, a new Ironic):

- kept: the hardware details (so the host is **not inspected again**), the
  power state, the operation history, what was provisioned (image, root
  device hints, boot mode, RAID, disk layout);
- a provisioned or externally provisioned host keeps its state: it is
  registered with the new backend and adopted, its disks untouched;
- any other state (available, or an operation that was under way) becomes
  ``registering``: the host is enrolled again and, its hardware known, goes
  through preparing (cleaning) to available without inspection;
- dropped: the backend's id, the credentials versions (they were the old
  site's Secret), errors and conditions (they were about the old site).
"""

from __future__ import annotations

from datetime import datetime

from racksmith.kinds.metal import (
    BareMetalHostStatus,
    OperationalStatus,
    ProvisionStatus,
)
from racksmith.kinds.metal import ProvisioningState as S

KEPT_STATES = frozenset({S.PROVISIONED, S.EXTERNALLY_PROVISIONED})
"""States a restored host keeps; any other restarts at registering."""


def restored_status(value: str, now: datetime) -> BareMetalHostStatus | None:
    """The status to take from the annotation's ``value``; None when the value
    is not a status (refused at admission, so only on a host stored before)."""
    if not value.strip():
        return None
    try:
        copied = BareMetalHostStatus.model_validate_json(value)
    except ValueError:
        return None
    provisioning = copied.provisioning or ProvisionStatus()
    state = provisioning.state if provisioning.state in KEPT_STATES else S.REGISTERING
    return copied.model_copy(update={
        "provisioning": provisioning.model_copy(update={"state": state, "id": None}),
        "operational_status": OperationalStatus.OK,
        "error_type": None,
        "error_message": None,
        "error_count": 0,
        "good_credentials": None,
        "tried_credentials": None,
        "conditions": [],
        "last_updated": now,
    })
