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
  without touching the server (power and disks untouched);
- ``reboot.metal.racksmith.io`` (or ``reboot.metal.racksmith.io/<who>``):
  power-cycle once, then the annotation is removed (Racksmith's, until
  Metal3's keyed ``reboot.metal3.io/<key>``, which keeps the host off until
  every key is gone, is served);
- ``inspect.metal3.io``: re-inspect an available host (removed once the
  backend accepts it); the value ``disabled`` skips inspection at
  registration.

The BareMetalHost controller writes
``baremetalhost.metal.racksmith.io/rendered-layout`` (the disk layout of the
profile, as deployed) and Metal3's finalizer ``baremetalhost.metal3.io``.
"""

from __future__ import annotations

from collections.abc import Mapping

METAL3_PREFIX = "baremetalhost.metal3.io"
GROUP_PREFIX = "baremetalhost.metal.racksmith.io"
"""Racksmith's own host annotations."""
PAUSED = f"{METAL3_PREFIX}/paused"
DETACHED = f"{METAL3_PREFIX}/detached"
DEPLOYED_AFTER_BACKUP = f"{GROUP_PREFIX}/deployed-after-restored-backup"
"""Set (with DETACHED) by ``racksmith up`` after a restore on a host Ironic
had deployed that the restored backup knew as not deployed; its value says
when. The BareMetalHost controller reports it as condition
``RecordMatchesHardware`` False; remove both annotations once checked."""
RECORD_MATCHES_HARDWARE = "RecordMatchesHardware"
RENDERED_LAYOUT = f"{GROUP_PREFIX}/rendered-layout"
REBOOT = "reboot.metal.racksmith.io"
INSPECT = "inspect.metal3.io"
INSPECT_DISABLED = "disabled"
FINALIZER = "baremetalhost.metal3.io"


def is_paused(annotations: Mapping[str, str]) -> bool:
    return PAUSED in annotations


def is_detached(annotations: Mapping[str, str]) -> bool:
    return DETACHED in annotations


def reboot_keys(annotations: Mapping[str, str]) -> list[str]:
    """The reboot annotations present (all are removed by one power cycle)."""
    return sorted(k for k in annotations if k == REBOOT or k.startswith(REBOOT + "/"))


def is_inspection_disabled(annotations: Mapping[str, str]) -> bool:
    return annotations.get(INSPECT) == INSPECT_DISABLED


def is_inspection_requested(annotations: Mapping[str, str]) -> bool:
    return INSPECT in annotations and annotations[INSPECT] != INSPECT_DISABLED
