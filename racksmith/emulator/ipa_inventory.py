"""What the emulated ramdisk reports to Ironic, in ironic-python-agent's shapes (pure).

Owns the IPA inventory sent to ``/v1/continue_inspection`` and the step
lists answered to ``get_deploy_steps``/``get_clean_steps``. Field names and
units follow IPA's hardware manager (sizes in bytes, memory in bytes and
MiB, frequency as a string). Used by ``agent``.
"""

from __future__ import annotations

from typing import Any

from racksmith.emulator.inventory import DiskInfo, EmulatedHost, root_disk

AGENT_VERSION = "10.0.0"
HARDWARE_MANAGER = "GenericHardwareManager"
HARDWARE_MANAGER_VERSION = {"generic_hardware_manager": "1.2"}

#: Deploy steps: priority 0 so they never join the plan on their own
#: (Ironic runs write_image from its own step list).
DEPLOY_STEPS: tuple[tuple[str, int], ...] = (("write_image", 0),)
#: Clean steps with IPA's default priorities; Ironic's
#: ``[deploy]erase_devices_priority`` / ``erase_devices_metadata_priority``
#: override them (metal3: 0 and 10).
CLEAN_STEPS: tuple[tuple[str, int], ...] = (("erase_devices", 10), ("erase_devices_metadata", 99))


def _steps(steps: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    return [
        {
            "step": name,
            "priority": priority,
            "interface": "deploy",
            "reboot_requested": False,
            "abortable": True,
            "argsinfo": None,
        }
        for name, priority in steps
    ]


def deploy_steps_result() -> dict[str, Any]:
    """The result of ``deploy.get_deploy_steps``."""
    return {
        "deploy_steps": {HARDWARE_MANAGER: _steps(DEPLOY_STEPS)},
        "hardware_manager_version": HARDWARE_MANAGER_VERSION,
    }


def clean_steps_result() -> dict[str, Any]:
    """The result of ``clean.get_clean_steps``."""
    return {
        "clean_steps": {HARDWARE_MANAGER: _steps(CLEAN_STEPS)},
        "hardware_manager_version": HARDWARE_MANAGER_VERSION,
    }


def disk_entry(disk: DiskInfo) -> dict[str, Any]:
    """One ``inventory.disks`` item."""
    return {
        "name": disk.name,
        "model": disk.model,
        "size": disk.size_bytes,
        "rotational": disk.rotational,
        "wwn": disk.wwn,
        "serial": disk.serial,
        "vendor": disk.vendor,
        "wwn_with_extension": disk.wwn,
        "wwn_vendor_extension": None,
        "hctl": disk.hctl,
        "by_path": (
            f"/dev/disk/by-path/pci-0000:3b:00.0-ata-{disk.hctl.split(':')[2]}"
            if disk.hctl
            else f"/dev/disk/by-path/pci-0000:5e:00.0-nvme-{disk.short_name[4]}"
        ),
        "uuid": None,
        "partuuid": None,
        "logical_sectors": 512,
        "physical_sectors": 512 if disk.kind == "hdd" else 4096,
        "tran": "nvme" if disk.kind == "nvme" else "sata",
    }


def ipa_inventory(host: EmulatedHost) -> dict[str, Any]:
    """The ``inventory`` dict of IPA's inspection data for ``host``."""
    inv = host.inventory
    cpu = inv.cpu
    return {
        "interfaces": [
            {
                "name": nic.name,
                "mac_address": nic.mac,
                "ipv4_address": None,
                "ipv6_address": None,
                "has_carrier": True,
                "lldp": [],
                "vendor": nic.vendor,
                "product": nic.product,
                "client_id": None,
                "biosdevname": None,
                "speed_mbps": nic.speed_mbps,
            }
            for nic in inv.nics
        ],
        "cpu": {
            "model_name": cpu.model,
            "frequency": f"{cpu.frequency_mhz:.4f}",
            "count": cpu.count,
            "architecture": cpu.arch,
            "flags": list(cpu.flags),
            "socket_count": cpu.sockets,
        },
        "memory": {"total": inv.memory_mib * 1024 * 1024, "physical_mb": inv.memory_mib},
        "disks": [disk_entry(d) for d in inv.disks],
        "system_vendor": {
            "product_name": inv.system.product,
            "serial_number": inv.system.serial,
            "manufacturer": inv.system.manufacturer,
            "firmware": {
                "vendor": inv.system.bios_vendor,
                "version": inv.system.bios_version,
                "build_date": inv.system.bios_date,
            },
        },
        "boot": {"current_boot_mode": "uefi", "pxe_interface": host.boot_mac},
        "hostname": host.name,
    }


def inspection_data(host: EmulatedHost) -> dict[str, Any]:
    """The body POSTed to ``/v1/continue_inspection`` (inventory + plugin data)."""
    return {
        "inventory": ipa_inventory(host),
        "root_disk": disk_entry(root_disk(host.inventory)),
        "boot_interface": host.boot_mac,
        "error": None,
        "configuration": {"collectors": ["default"], "managers": [
            {"name": HARDWARE_MANAGER, "version": HARDWARE_MANAGER_VERSION[
                "generic_hardware_manager"]}
        ]},
    }
