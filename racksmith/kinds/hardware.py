"""Hardware details found by inspection, shared by BareMetalHost and its inventory.

Owns the shape of an inspected server (vendor, firmware, CPU, RAM, NICs,
disks), following Metal3's hardware details field names.
"""

from __future__ import annotations

from pydantic import Field

from racksmith.kinds.base import DocEnum, RacksmithModel


class DiskType(DocEnum):
    """Kind of storage device."""

    HDD = "HDD", "Rotational disk."
    SSD = "SSD", "Solid state disk on SATA/SAS."
    NVME = "NVME", "NVMe solid state disk."


class SystemVendor(RacksmithModel):
    """Who made the server."""

    manufacturer: str | None = Field(default=None, description="System manufacturer.")
    product_name: str | None = Field(default=None, description="Product (model) name.")
    serial_number: str | None = Field(default=None, description="Chassis serial number.")


class BIOS(RacksmithModel):
    """System firmware version."""

    date: str | None = Field(default=None, description="Release date, as reported.")
    vendor: str | None = Field(default=None, description="Firmware vendor.")
    version: str | None = Field(default=None, description="Firmware version.")


class Firmware(RacksmithModel):
    """Firmware of the server."""

    bios: BIOS | None = Field(default=None, description="System firmware (BIOS/UEFI).")


class VLAN(RacksmithModel):
    """A VLAN seen on a NIC."""

    id: int = Field(ge=0, le=4094, description="VLAN id.")
    name: str | None = Field(default=None, description="VLAN name, if advertised.")


class NIC(RacksmithModel):
    """A network interface."""

    name: str | None = Field(
        default=None, description="Interface name as seen by the ramdisk (e.g. eno1)."
    )
    model: str | None = Field(default=None, description="Vendor and product.")
    mac: str | None = Field(default=None, description="MAC address.")
    ip: str | None = Field(default=None, description="IP address seen during inspection, if any.")
    speed_gbps: int | None = Field(default=None, ge=0, description="Link speed in Gbit/s.")
    vlans: list[VLAN] = Field(default_factory=list, description="VLANs seen by LLDP.")
    vlan_id: int | None = Field(
        default=None, ge=0, le=4094, description="Untagged (native) VLAN id."
    )
    pxe: bool = Field(default=False, description="True if the host booted from this NIC.")


class Storage(RacksmithModel):
    """A storage device."""

    name: str | None = Field(default=None, description="Device path, e.g. /dev/sda.")
    alternate_names: list[str] = Field(
        default_factory=list, description="Other paths to the device (e.g. /dev/disk/by-path/...)."
    )
    rotational: bool | None = Field(default=None, description="True for spinning disks.")
    type: DiskType | None = Field(default=None, description="Kind of device.")
    size_bytes: int | None = Field(default=None, ge=0, description="Capacity in bytes.")
    vendor: str | None = Field(default=None, description="Device vendor.")
    model: str | None = Field(default=None, description="Device model.")
    serial_number: str | None = Field(default=None, description="Device serial number.")
    wwn: str | None = Field(default=None, description="World Wide Name.")
    wwn_vendor_extension: str | None = Field(default=None, description="WWN vendor extension.")
    wwn_with_extension: str | None = Field(
        default=None, description="WWN with the vendor extension."
    )
    hctl: str | None = Field(default=None, description="SCSI host:channel:target:lun.")


class CPU(RacksmithModel):
    """The server's processors."""

    arch: str | None = Field(default=None, description="Architecture, e.g. x86_64.")
    model: str | None = Field(default=None, description="Processor model.")
    clock_megahertz: float | None = Field(default=None, ge=0, description="Clock speed in MHz.")
    flags: list[str] = Field(default_factory=list, description="CPU feature flags.")
    count: int | None = Field(default=None, ge=0, description="Number of logical CPUs.")


class HardwareDetails(RacksmithModel):
    """What inspection found on a server."""

    system_vendor: SystemVendor | None = Field(default=None, description="Manufacturer and model.")
    firmware: Firmware | None = Field(default=None, description="Firmware versions.")
    ram_mebibytes: int | None = Field(default=None, ge=0, description="Installed memory in MiB.")
    nics: list[NIC] = Field(default_factory=list, description="Network interfaces.")
    storage: list[Storage] = Field(default_factory=list, description="Storage devices.")
    cpu: CPU | None = Field(default=None, description="Processors.")
    hostname: str | None = Field(default=None, description="Host name reported by the ramdisk.")
