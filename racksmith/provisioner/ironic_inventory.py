"""Ironic inventory (IPA format) → :class:`HardwareDetails`.

Owns the mapping from the inventory Ironic stores after inspection (the
ramdisk agent's format, also produced by Redfish out-of-band inspection) to
Metal3-style hardware details. Pure; called by
:mod:`racksmith.provisioner.ironic`. Missing fields stay unset: a partial
inventory (e.g. fake hardware) still maps.
"""

from __future__ import annotations

from typing import Any

from racksmith.kinds.hardware import (
    BIOS,
    CPU,
    NIC,
    DiskType,
    Firmware,
    HardwareDetails,
    Storage,
    SystemVendor,
)

MIB = 1024 * 1024


def hardware_from_inventory(inventory: dict[str, Any],
                            node: dict[str, Any] | None = None,
                            ports: list[dict[str, Any]] | None = None) -> HardwareDetails:
    """Map ``inventory``; ``node`` properties and ``ports`` fill gaps."""
    props: dict[str, Any] = (node or {}).get("properties") or {}
    boot = _dict(inventory.get("boot"))
    pxe_mac = str(boot.get("pxe_interface") or "").lower()

    nics = [_nic(i, pxe_mac) for i in _list(inventory.get("interfaces"))
            if isinstance(i, dict)]
    known = {n.mac for n in nics if n.mac}
    for port in ports or []:
        mac = str(port.get("address") or "").lower()
        if mac and mac not in known:
            nics.append(NIC(mac=mac, pxe=bool(port.get("pxe_enabled"))))
            known.add(mac)

    cpu_inv = _dict(inventory.get("cpu"))
    cpu: CPU | None = None
    if cpu_inv or props.get("cpu_arch") or props.get("cpus"):
        cpu = CPU(
            arch=cpu_inv.get("architecture") or props.get("cpu_arch"),
            model=cpu_inv.get("model_name"),
            clock_megahertz=_float(cpu_inv.get("frequency")),
            flags=[str(f) for f in _list(cpu_inv.get("flags"))],
            count=_int(cpu_inv.get("count")) or _int(props.get("cpus")),
        )

    memory = _dict(inventory.get("memory"))
    ram = _int(memory.get("physical_mb"))
    if ram is None and _int(memory.get("total")) is not None:
        ram = int(memory["total"]) // MIB
    if ram is None:
        ram = _int(props.get("memory_mb"))

    vendor = _dict(inventory.get("system_vendor"))
    firmware = _dict(vendor.get("firmware"))
    return HardwareDetails(
        system_vendor=SystemVendor(
            manufacturer=vendor.get("manufacturer"),
            product_name=vendor.get("product_name"),
            serial_number=vendor.get("serial_number"),
        ) if vendor else None,
        firmware=Firmware(bios=BIOS(
            date=firmware.get("build_date"),
            vendor=firmware.get("vendor"),
            version=firmware.get("version"),
        )) if firmware else None,
        ram_mebibytes=ram,
        nics=nics,
        storage=[_disk(d) for d in _list(inventory.get("disks")) if isinstance(d, dict)],
        cpu=cpu,
        hostname=inventory.get("hostname"),
    )


def _nic(iface: dict[str, Any], pxe_mac: str) -> NIC:
    mac = str(iface.get("mac_address") or "").lower() or None
    speed = _int(iface.get("speed_mbps"))
    model = " ".join(str(x) for x in (iface.get("vendor"), iface.get("product")) if x) or None
    return NIC(
        name=iface.get("name"),
        model=model,
        mac=mac,
        ip=iface.get("ipv4_address") or iface.get("ipv6_address"),
        speed_gbps=speed // 1000 if speed is not None and speed >= 0 else None,
        pxe=bool(mac and pxe_mac and mac == pxe_mac) or bool(iface.get("pxe_enabled")),
    )


def _disk(disk: dict[str, Any]) -> Storage:
    name = disk.get("name")
    rotational = disk.get("rotational")
    rot = bool(rotational) if rotational is not None else None
    disk_type: DiskType | None = None
    if rot:
        disk_type = DiskType.HDD
    elif name and "nvme" in str(name):
        disk_type = DiskType.NVME
    elif rot is False:
        disk_type = DiskType.SSD
    by_path = disk.get("by_path")
    return Storage(
        name=name,
        alternate_names=[str(by_path)] if by_path else [],
        rotational=rot,
        type=disk_type,
        size_bytes=_int(disk.get("size")),
        vendor=disk.get("vendor"),
        model=disk.get("model"),
        serial_number=disk.get("serial"),
        wwn=disk.get("wwn"),
        wwn_vendor_extension=disk.get("wwn_vendor_extension"),
        wwn_with_extension=disk.get("wwn_with_extension"),
        hctl=disk.get("hctl"),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None
