"""The rendered disk layout: what the deploy agent applies, as plain data.

Owns the output records of the disk-layout planner (chosen disks,
partitions with offsets and sizes, software RAID, LVM, file systems, kernel
settings) and their camelCase dict form, which is stored in status and
passed to the deploy. Produced only by ``racksmith.planners.disklayout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FitError:
    """Why a profile cannot be laid out on a host; ``field`` points into the profile."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass(frozen=True)
class ChosenDevice:
    """The disk chosen for the profile's ``devices[entry]``."""

    entry: int
    name: str
    size_bytes: int
    type: str
    wipe: bool


@dataclass(frozen=True)
class PlannedPartition:
    """A partition: ``number`` from 1 on ``device``, at ``start_bytes``."""

    name: str
    device: str
    number: int
    start_bytes: int
    size_bytes: int
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedRAID:
    """A software RAID array over partitions (each on a different disk)."""

    name: str
    level: str
    members: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True)
class PlannedVolumeGroup:
    """An LVM volume group over partitions or arrays."""

    name: str
    members: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True)
class PlannedLogicalVolume:
    """An LVM logical volume."""

    name: str
    vg: str
    size_bytes: int


@dataclass(frozen=True)
class PlannedFileSystem:
    """A file system on a partition, array or logical volume."""

    file_system: str
    source: str
    mount_point: str | None
    mount_opts: str
    size_bytes: int


@dataclass(frozen=True)
class PlannedHugePages:
    """Huge pages reserved at boot."""

    size: str
    count: int
    bytes_total: int


@dataclass(frozen=True)
class RenderedLayout:
    """Everything the deploy needs to lay out disks and tune the kernel."""

    devices: tuple[ChosenDevice, ...] = ()
    partitions: tuple[PlannedPartition, ...] = ()
    soft_raid_devices: tuple[PlannedRAID, ...] = ()
    volume_groups: tuple[PlannedVolumeGroup, ...] = ()
    logical_volumes: tuple[PlannedLogicalVolume, ...] = ()
    file_systems: tuple[PlannedFileSystem, ...] = ()
    kernel_cmdline: tuple[str, ...] = ()
    sysctl: dict[str, str] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    huge_pages: tuple[PlannedHugePages, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The camelCase form (status, annotations, the deploy's metadata)."""
        return {
            "devices": [
                {"name": d.name, "sizeBytes": d.size_bytes, "type": d.type, "wipe": d.wipe}
                for d in self.devices
            ],
            "partitions": [
                {
                    "name": p.name,
                    "device": p.device,
                    "number": p.number,
                    "startBytes": p.start_bytes,
                    "sizeBytes": p.size_bytes,
                    "flags": list(p.flags),
                }
                for p in self.partitions
            ],
            "softRaidDevices": [
                {"name": r.name, "level": r.level, "devices": list(r.members),
                 "sizeBytes": r.size_bytes}
                for r in self.soft_raid_devices
            ],
            "volumeGroups": [
                {"name": v.name, "devices": list(v.members), "sizeBytes": v.size_bytes}
                for v in self.volume_groups
            ],
            "logicalVolumes": [
                {"name": lv.name, "vg": lv.vg, "sizeBytes": lv.size_bytes}
                for lv in self.logical_volumes
            ],
            "fileSystems": [
                {
                    "fileSystem": f.file_system,
                    "source": f.source,
                    "mountPoint": f.mount_point,
                    "mountOpts": f.mount_opts,
                    "sizeBytes": f.size_bytes,
                }
                for f in self.file_systems
            ],
            "kernel": {
                "cmdline": list(self.kernel_cmdline),
                "sysctl": dict(self.sysctl),
                "modules": list(self.modules),
            },
            "hugePages": [
                {"size": h.size, "count": h.count} for h in self.huge_pages
            ],
        }

    def summary(self) -> str:
        """One line for conditions and events: disks and mount points."""
        disks = ", ".join(d.name for d in self.devices) or "no disks"
        mounts = ", ".join(
            f.mount_point or f.file_system for f in self.file_systems
        ) or "no file systems"
        return f"disks {disks}; mounts {mounts}"
