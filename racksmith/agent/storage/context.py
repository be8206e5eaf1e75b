"""What every storage task gets: the host, its tools and one volume's request.

Owns :class:`StorageContext` (the host seam, the device tools, the loop
devices; built once by ``main``/``loop``), :class:`VolumeRequest` (the
parts of a Volume and its StorageClass a task reads) and the on-host layout
(``/var/lib/racksmith/volumes``), plus :class:`TaskRecords`, the small
per-volume notes (``records/<uid>.json``) that let raw and LVM tasks tell
their own earlier, perhaps interrupted, work from a stranger's data.
Called by ``sparse``, ``raw``, ``lvm`` and ``tasks``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from racksmith.agent.host import Host, Runner, run_process
from racksmith.agent.storage.devices import DeviceTools
from racksmith.agent.storage.loops import EmulatedLoops, LoopDevices, RealLoops
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.kinds.storage import VolumeMode, VolumeSpec
from racksmith.kinds.volumejobs import FailureReason

__all__ = [
    "RECORDS_DIR",
    "VOLUMES_DIR",
    "StorageContext",
    "TaskRecords",
    "VolumeRequest",
]

VOLUMES_DIR = "/var/lib/racksmith/volumes"
RECORDS_DIR = f"{VOLUMES_DIR}/records"
_UID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{0,127}$")


@dataclass
class StorageContext:
    """The host the tasks change and how (real or emulated)."""

    host: Host
    tools: DeviceTools
    loops: LoopDevices

    @classmethod
    def for_host(cls, host: Host, runner: Runner = run_process) -> StorageContext:
        """The context of ``host``: real loop devices on a real host, emulated ones else.

        ``runner`` runs mkfs/blkid/wipefs (in both modes) and, on a real
        host, losetup and lvcreate.
        """
        loops: LoopDevices = EmulatedLoops(host) if host.emulated else RealLoops(host, runner)
        return cls(host, DeviceTools(runner), loops)

    @property
    def emulated(self) -> bool:
        return self.host.emulated


@dataclass(frozen=True)
class VolumeRequest:
    """One Volume as a task sees it."""

    name: str
    uid: str
    spec: VolumeSpec
    forced: bool = False
    fs_type: str = "ext4"
    mkfs_options: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not _UID_RE.match(self.uid):
            raise TaskFailed(FailureReason.INVALID_VOLUME,
                             f"volume uid {self.uid!r} is not a plain identifier")

    @property
    def formats(self) -> bool:
        """Whether the device gets a filesystem (Filesystem mode)."""
        return self.spec.mode == VolumeMode.FILESYSTEM


class TaskRecords:
    """Per-volume notes under ``RECORDS_DIR``, written atomically."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def path(self, uid: str) -> str:
        return f"{RECORDS_DIR}/{uid}.json"

    def get(self, uid: str) -> dict[str, Any] | None:
        raw = self.host.read_file(self.path(uid))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None  # a torn record counts as none; the caller re-checks the device
        return data if isinstance(data, dict) else None

    def put(self, uid: str, record: dict[str, Any]) -> None:
        text = json.dumps(record, sort_keys=True) + "\n"
        self.host.write_file(self.path(uid), text.encode(), 0o644)

    def drop(self, uid: str) -> None:
        self.host.resolve(self.path(uid)).unlink(missing_ok=True)
