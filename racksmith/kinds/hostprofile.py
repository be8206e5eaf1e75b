"""BareMetalHostProfile, of the ``metal.racksmith.io`` group: disk layout and kernel.

Owns the profile a Machine names in ``hostProfile``: which disks to use
(by size, type or exact hints), partitions, software RAID, LVM, file
systems and mounts, kernel parameters and huge pages. The disk-layout
planner validates it and writes the rendered layout into its status.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    RacksmithModel,
    Resource,
    age_column,
    condition_column,
)
from racksmith.kinds.common import Condition, Quantity, conditions_field
from racksmith.kinds.metal import CATEGORIES, GROUP

# --- BareMetalHostProfile ----------------------------------------------------


class DeviceType(DocEnum):
    """Kind of disk a profile device entry selects."""

    HDD = "hdd", "Rotational disk."
    SSD = "ssd", "Solid state disk on SATA/SAS."
    NVME = "nvme", "NVMe disk."


class FileSystemType(DocEnum):
    """File system to create."""

    EXT4 = "ext4", "ext4."
    XFS = "xfs", "XFS."
    VFAT = "vfat", "FAT (for the EFI system partition)."
    SWAP = "swap", "Swap space (no mount point)."


class RAIDLevel(DocEnum):
    """Software RAID level."""

    RAID1 = "raid1", "Mirror."
    RAID10 = "raid10", "Stripe of mirrors."


class DiskHints(RacksmithModel):
    """Pick one exact disk; all given hints must match."""

    name: str | None = Field(
        default=None, description="Device path, e.g. /dev/sda or /dev/disk/by-id/..."
    )
    wwn: str | None = Field(default=None, description="World Wide Name.")
    serial_number: str | None = Field(default=None, description="Device serial number.")


class DeviceSelector(RacksmithModel):
    """Which disk a device entry uses; the smallest disk matching all criteria wins."""

    min_size: Quantity | None = Field(default=None, description="Minimum disk size, e.g. 100Gi.")
    type: DeviceType | None = Field(default=None, description="Kind of disk.")
    hints: DiskHints | None = Field(default=None, description="Exact disk identification.")


class Partition(RacksmithModel):
    """A partition on a device."""

    name: str = Field(description="Partition name (GPT label), unique in the profile.")
    size: Quantity | None = Field(
        default=None, description="Partition size; empty takes the rest of the disk (last only)."
    )
    flags: list[str] = Field(default_factory=list, description="GPT flags, e.g. esp, bios_grub.")


class DeviceLayout(RacksmithModel):
    """One disk and its partitions."""

    device: DeviceSelector = Field(description="Which disk.")
    wipe: bool = Field(default=True, description="Wipe the disk before partitioning.")
    partitions: list[Partition] = Field(default_factory=list, description="Partitions, in order.")


class SoftRAIDDevice(RacksmithModel):
    """A software RAID (md) device."""

    name: str = Field(description="md device name, e.g. md0, unique in the profile.")
    level: RAIDLevel = Field(default=RAIDLevel.RAID1, description="RAID level.")
    devices: list[str] = Field(
        min_length=2, description="Names of the partitions that make up the array."
    )


class VolumeGroup(RacksmithModel):
    """An LVM volume group."""

    name: str = Field(description="Volume group name.")
    devices: list[str] = Field(
        min_length=1, description="Names of partitions or software RAID devices used as PVs."
    )


class LogicalVolume(RacksmithModel):
    """An LVM logical volume."""

    name: str = Field(description="Logical volume name, unique in its volume group.")
    vg: str = Field(description="Volume group it belongs to.")
    size: Quantity | None = Field(
        default=None, description="Size; empty takes the free space left."
    )


class FileSystem(RacksmithModel):
    """A file system and where it is mounted."""

    file_system: FileSystemType = Field(description="File system type.")
    source: str = Field(
        description="Name of the partition, software RAID device or logical volume it lives on."
    )
    mount_point: str | None = Field(default=None, description="Mount point; empty for swap.")
    mount_opts: str = Field(default="defaults", description="Mount options, comma-separated.")


class KernelParameters(RacksmithModel):
    """Kernel settings applied to the provisioned OS."""

    cmdline: list[str] = Field(default_factory=list, description="Extra kernel command-line args.")
    sysctl: dict[str, str] = Field(default_factory=dict, description="sysctl key and value.")
    modules: list[str] = Field(default_factory=list, description="Kernel modules to load at boot.")


class HugePages(RacksmithModel):
    """Huge pages to reserve at boot."""

    size: str = Field(default="2M", description='Page size as the kernel spells it: "2M" or "1G".')
    count: int = Field(ge=0, description="Number of pages to reserve.")


class BareMetalHostProfileSpec(RacksmithModel):
    """Disk layout and OS settings for the hosts that use the profile."""

    devices: list[DeviceLayout] = Field(default_factory=list, description="Disks and partitions.")
    soft_raid_devices: list[SoftRAIDDevice] = Field(
        default_factory=list, description="Software RAID devices."
    )
    volume_groups: list[VolumeGroup] = Field(default_factory=list, description="LVM volume groups.")
    logical_volumes: list[LogicalVolume] = Field(
        default_factory=list, description="LVM logical volumes."
    )
    file_systems: list[FileSystem] = Field(
        default_factory=list, description="File systems and mount points."
    )
    kernel_parameters: KernelParameters | None = Field(default=None, description="Kernel settings.")
    huge_pages: list[HugePages] = Field(default_factory=list, description="Huge page reservations.")


class BareMetalHostProfileStatus(RacksmithModel):
    """Result of validating and rendering the profile."""

    rendered_layout: dict[str, Any] | None = Field(
        default=None,
        description="The normalised layout the agent applies, as the planner rendered it.",
    )
    conditions: list[Condition] = conditions_field(
        "Current state observations; Valid tells whether the layout is consistent."
    )


class BareMetalHostProfile(Resource):
    """How to lay out disks and tune the kernel of the hosts that use it."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="BareMetalHostProfile",
        plural="baremetalhostprofiles",
        namespaced=True,
        short_names=("bmhp",),
        categories=CATEGORIES,
        printer_columns=(condition_column("Valid", "Valid"), age_column()),
    )

    spec: BareMetalHostProfileSpec = Field(
        default_factory=BareMetalHostProfileSpec, description="Desired layout."
    )
    status: BareMetalHostProfileStatus | None = Field(default=None, description="Rendering result.")
