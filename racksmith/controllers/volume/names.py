"""Names the Volume controller and the claim binder share with the rest of Racksmith.

Owns their field managers, the finalizer, the annotations of the task
protocol (``docs/design/volume-contracts.md``), the PV label, the Ready
reasons' spelling and the timings of the job poll. No I/O. The resources
they read and write are in ``racksmith.runtime.resources``.
"""

from __future__ import annotations

from racksmith.kinds import storage

VOLUME_API_VERSION = storage.Volume.info.api_version
VOLUME_KIND = storage.Volume.info.kind
FIELD_MANAGER = "racksmith-volume"
COMPONENT = "racksmith-volume"
BINDER_FIELD_MANAGER = "racksmith-claim-binder"

FINALIZER = f"{storage.GROUP}/volume-protection"
"""On the Volume and on its PersistentVolume: the device is not released yet."""
VOLUME_LABEL = f"{storage.GROUP}/volume"
"""On the PersistentVolume: name of its Volume."""
HOSTNAME_LABEL = "kubernetes.io/hostname"

READY = storage.READY_CONDITION

DEFAULT_FS_TYPE = "ext4"
"""File system of a Filesystem-mode PV whose StorageClass has no ``parameters.fsType``."""
