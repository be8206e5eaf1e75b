"""Inventory generation: deterministic, varied, valid identifiers, IPA views."""

from __future__ import annotations

import re

import pytest

from racksmith.emulator import ipa_inventory
from racksmith.emulator.inventory import (
    from_dict,
    generate_host,
    generate_hosts,
    host_mac,
    root_disk,
    to_dict,
)
from racksmith.kinds.hardware import HardwareDetails

MAC = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


def test_same_seed_same_hosts_different_seed_different_hosts() -> None:
    assert generate_hosts(5, seed=3) == generate_hosts(5, seed=3)
    a, b = generate_hosts(5, seed=3), generate_hosts(5, seed=4)
    assert [h.uuid for h in a] != [h.uuid for h in b]
    assert {n.mac for h in a for n in h.inventory.nics}.isdisjoint(
        {n.mac for h in b for n in h.inventory.nics}
    )
    # A host does not depend on how many hosts there are.
    assert generate_hosts(3, seed=3)[2] == generate_host(2, seed=3)


def test_ranges_and_identifiers() -> None:
    hosts = generate_hosts(60, seed=1)
    names = [h.name for h in hosts]
    assert names[:2] == ["host-000", "host-001"] and len(set(names)) == 60
    assert len({h.uuid for h in hosts}) == 60
    macs = [n.mac for h in hosts for n in h.inventory.nics]
    assert len(set(macs)) == len(macs)
    for h in hosts:
        inv = h.inventory
        assert 1 <= len(inv.disks) <= 4
        assert 2 <= len(inv.nics) <= 4
        assert inv.cpu.count == inv.cpu.sockets * inv.cpu.cores_per_socket * 2
        assert inv.memory_mib % 1024 == 0 and inv.memory_mib >= 32 * 1024
        assert h.boot_mac == inv.nics[0].mac
        for nic in inv.nics:
            assert MAC.match(nic.mac)
            first = int(nic.mac[:2], 16)
            assert first & 0x02 and not first & 0x01  # locally administered, unicast
        sata = [d.name for d in inv.disks if d.kind != "nvme"]
        assert sata == [f"/dev/sd{c}" for c in "abcd"[: len(sata)]]
        nvme = [d.name for d in inv.disks if d.kind == "nvme"]
        assert nvme == [f"/dev/nvme{i}n1" for i in range(len(nvme))]
        assert len({d.serial for d in inv.disks}) == len(inv.disks)
        assert all(d.size_bytes % 512 == 0 for d in inv.disks)
        assert h.rack == f"rack-{h.index % 4 + 1}"


def test_the_fleet_is_varied() -> None:
    hosts = generate_hosts(40, seed=0)
    assert len({h.inventory.system.manufacturer for h in hosts}) >= 3
    assert len({h.inventory.cpu.model for h in hosts}) >= 3
    assert len({h.inventory.memory_mib for h in hosts}) >= 3
    assert {d.kind for h in hosts for d in h.inventory.disks} == {"hdd", "ssd", "nvme"}
    assert {len(h.inventory.disks) for h in hosts} == {1, 2, 3, 4}
    assert {len(h.inventory.nics) for h in hosts} == {2, 3, 4}


def test_mac_layout() -> None:
    assert host_mac(7, 0x010203, 2) == "02:07:01:02:03:02"


def test_password_stays_out_of_repr_and_round_trips() -> None:
    host = generate_host(0, seed=9)
    assert host.bmc_password not in repr(host)
    assert from_dict(to_dict(host)) == host


def test_root_disk_hints() -> None:
    host = next(h for h in generate_hosts(40, seed=2) if len(h.inventory.disks) >= 3)
    disks = host.inventory.disks
    assert root_disk(host.inventory) == min(disks, key=lambda d: d.size_bytes)
    last = disks[-1]
    assert root_disk(host.inventory, {"name": last.name}) == last
    assert root_disk(host.inventory, {"serial": last.serial}) == last
    assert root_disk(host.inventory, {"wwn": last.wwn}) == last
    with pytest.raises(LookupError):
        root_disk(host.inventory, {"serial": "nope"})


def test_ipa_inventory_matches_declared_hardware() -> None:
    host = generate_host(5, seed=1)
    inv = ipa_inventory.ipa_inventory(host)
    assert inv["cpu"]["count"] == host.inventory.cpu.count
    assert inv["cpu"]["architecture"] == "x86_64"
    assert inv["memory"]["physical_mb"] == host.inventory.memory_mib
    assert [d["size"] for d in inv["disks"]] == [d.size_bytes for d in host.inventory.disks]
    assert [i["mac_address"] for i in inv["interfaces"]] == [n.mac for n in host.inventory.nics]
    assert inv["boot"]["pxe_interface"] == host.boot_mac
    steps = ipa_inventory.deploy_steps_result()["deploy_steps"]
    assert [s["priority"] for s in steps["GenericHardwareManager"]] == [0]


def test_inventory_fits_the_hardware_details_model() -> None:
    """The declared inventory maps onto the BareMetalHost hardware fields."""
    host = generate_host(1)
    inv = host.inventory
    details = HardwareDetails.model_validate(
        {
            "systemVendor": {"manufacturer": inv.system.manufacturer,
                             "productName": inv.system.product,
                             "serialNumber": inv.system.serial},
            "firmware": {"bios": {"vendor": inv.system.bios_vendor,
                                  "version": inv.system.bios_version,
                                  "date": inv.system.bios_date}},
            "ramMebibytes": inv.memory_mib,
            "cpu": {"arch": inv.cpu.arch, "model": inv.cpu.model,
                    "clockMegahertz": inv.cpu.frequency_mhz, "count": inv.cpu.count},
            "nics": [{"name": n.name, "mac": n.mac, "speedGbps": n.speed_mbps // 1000}
                     for n in inv.nics],
            "storage": [{"name": d.name, "type": d.kind.upper(), "sizeBytes": d.size_bytes,
                         "rotational": d.rotational, "serialNumber": d.serial, "wwn": d.wwn}
                        for d in inv.disks],
        }
    )
    assert details.cpu is not None and details.cpu.count == inv.cpu.count
