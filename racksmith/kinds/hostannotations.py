"""The annotations and the finalizer of a BareMetalHost (``metal``), and
the predicates over a host's annotations.

Owns the names (Metal3's for what Metal3 has, Racksmith's group for what it
adds) and the pure predicates over them. The BareMetalHost controller
honours them; other controllers read them too (the Machine controller
never claims a paused or detached host), so they live here, next to the
kind, rather than in a controller. Users set them with ``kubectl
annotate``:

- ``baremetalhost.metal3.io/paused``: do nothing at all (whatever its value:
  a value another controller set, such as Cluster API's, is kept);
- ``baremetalhost.metal3.io/detached``: release the host from the backend
  without touching the server (power and disks untouched); its value is
  ``""`` or JSON ``{"deleteAction": "delay"|"delete", "force": bool}``
  (``detach_arguments``): ``delay`` keeps a deleted detached host (and its
  finalizer) until the annotation is removed, ``force`` detaches a host
  in any state, not only once settled;
- ``baremetalhost.metal3.io/status``: a JSON copy of ``.status`` (written by
  ``racksmith export``); a host created with it and no status takes that
  status (so it is not inspected again), then the annotation is removed;
- ``reboot.metal3.io``: power-cycle once (off, the annotation removed, on
  again if ``online``); ``reboot.metal3.io/<key>``: power off and stay off
  until every keyed annotation is removed by whoever set it (several clients
  can hold one host off; Racksmith's graceful reboots use
  ``reboot.metal3.io/racksmith-lcm``). The value is ``""`` or JSON
  ``{"mode": "hard"|"soft"}`` (``reboot_mode``);
- ``inspect.metal3.io``: re-inspect an available host (removed once the
  backend accepts it); the value ``disabled`` skips inspection at
  registration (as ``spec.inspectionMode: disabled`` does);
- ``inspect.metal3.io/hardwaredetails``: the hardware details (JSON, the
  shape of ``status.hardware``) of a host whose inspection is disabled;
  taken into the status at registration, then removed.

Racksmith's own, in its group's prefix (so Metal3's kind keeps Metal3's
fields only): ``baremetalhost.metal.racksmith.io/profile`` names the
BareMetalHostProfile (same namespace) to deploy the host with (``profile``).

The BareMetalHost controller writes
``baremetalhost.metal.racksmith.io/rendered-layout`` (the disk layout of the
profile, as deployed) and Metal3's finalizer ``baremetalhost.metal3.io``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

METAL3_PREFIX = "baremetalhost.metal3.io"
GROUP_PREFIX = "baremetalhost.metal.racksmith.io"
"""Racksmith's own host annotations."""
PAUSED = f"{METAL3_PREFIX}/paused"
DETACHED = f"{METAL3_PREFIX}/detached"
STATUS = f"{METAL3_PREFIX}/status"
DEPLOYED_AFTER_BACKUP = f"{GROUP_PREFIX}/deployed-after-restored-backup"
"""Set (with DETACHED) by ``racksmith up`` after a restore on a host Ironic
had deployed that the restored backup knew as not deployed; its value says
when. The BareMetalHost controller reports it as condition
``RecordMatchesHardware`` False; remove both annotations once checked."""
RECORD_MATCHES_HARDWARE = "RecordMatchesHardware"
RENDERED_LAYOUT = f"{GROUP_PREFIX}/rendered-layout"
PROFILE = f"{GROUP_PREFIX}/profile"
"""The BareMetalHostProfile (same namespace) the host is deployed with."""
REBOOT = "reboot.metal3.io"
REBOOT_HARD = "hard"
REBOOT_SOFT = "soft"
INSPECT = "inspect.metal3.io"
HARDWARE_DETAILS = f"{INSPECT}/hardwaredetails"
INSPECT_DISABLED = "disabled"
FINALIZER = "baremetalhost.metal3.io"


def profile(annotations: Mapping[str, str]) -> str | None:
    """The BareMetalHostProfile the host names, if any."""
    return annotations.get(PROFILE) or None


def is_paused(annotations: Mapping[str, str]) -> bool:
    return PAUSED in annotations


def is_detached(annotations: Mapping[str, str]) -> bool:
    return DETACHED in annotations


@dataclass(frozen=True)
class DetachArguments:
    """The detached annotation's value."""

    delete_action: str = "delete"
    """``delay``: a deleted detached host waits; ``delete``: it goes at once."""
    force: bool = False


DETACH_DELETE_ACTIONS = ("delay", "delete")


def detach_arguments(value: str) -> DetachArguments | None:
    """The detached annotation's arguments, or None when the value is not
    valid (refused at admission)."""
    if not value.strip():
        return DetachArguments()
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    if not isinstance(parsed, dict):  # other keys ignored, as in Metal3
        return None
    action = parsed.get("deleteAction", "delete")
    force = parsed.get("force", False)
    if action not in DETACH_DELETE_ACTIONS or not isinstance(force, bool):
        return None
    return DetachArguments(action, force)


def reboot_keys(annotations: Mapping[str, str]) -> list[str]:
    """The reboot annotations present, unkeyed and keyed."""
    return sorted(k for k in annotations if k == REBOOT or k.startswith(REBOOT + "/"))


def held_off_by(annotations: Mapping[str, str]) -> list[str]:
    """The keyed reboot annotations (``reboot.metal3.io/<key>``): while any
    is present the host stays powered off."""
    return sorted(k for k in annotations if k.startswith(REBOOT + "/"))


def reboot_mode(value: str) -> str | None:
    """The mode a reboot annotation's value asks for (``hard`` or ``soft``;
    ``""`` is ``hard`` in Racksmith), or None when the value is not valid
    (refused at admission, so only seen on hosts stored before): not JSON,
    not an object, a mode other than hard or soft, a force that is not a
    boolean."""
    if not value.strip():
        return REBOOT_HARD
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    # Other keys are ignored, as Metal3 decodes the value (Go's json.Unmarshal).
    if not isinstance(parsed, dict) or not isinstance(parsed.get("force", False), bool):
        return None
    mode = parsed.get("mode") or REBOOT_HARD
    return mode if mode in (REBOOT_HARD, REBOOT_SOFT) else None


def is_inspection_disabled(annotations: Mapping[str, str]) -> bool:
    return annotations.get(INSPECT) == INSPECT_DISABLED


def is_inspection_requested(annotations: Mapping[str, str]) -> bool:
    return INSPECT in annotations and annotations[INSPECT] != INSPECT_DISABLED
