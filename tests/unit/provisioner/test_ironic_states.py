"""The Ironic state translation table, BMC address parsing and inventory mapping."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.kinds.hardware import DiskType
from racksmith.provisioner import ironic_states as st
from racksmith.provisioner.base import BMCAccess, ErrorKind
from racksmith.provisioner.ironic_bmc import BMCAddressError, parse_bmc
from racksmith.provisioner.ironic_inventory import hardware_from_inventory


@pytest.mark.parametrize(("state", "phase", "kind"), [
    ("enroll", st.Phase.STABLE, None),
    ("verifying", st.Phase.BUSY, None),
    ("manageable", st.Phase.STABLE, None),
    ("inspecting", st.Phase.BUSY, None),
    ("inspect wait", st.Phase.BUSY, None),
    ("inspect failed", st.Phase.FAILED, ErrorKind.INSPECTION),
    ("cleaning", st.Phase.BUSY, None),
    ("clean wait", st.Phase.BUSY, None),
    ("clean failed", st.Phase.FAILED, ErrorKind.PREPARATION),
    ("available", st.Phase.STABLE, None),
    ("deploying", st.Phase.BUSY, None),
    ("wait call-back", st.Phase.BUSY, None),
    ("deploy failed", st.Phase.FAILED, ErrorKind.PROVISIONING),
    ("active", st.Phase.STABLE, None),
    ("deleting", st.Phase.BUSY, None),
    ("error", st.Phase.FAILED, ErrorKind.PROVISIONING),
    ("adopt failed", st.Phase.FAILED, ErrorKind.PROVISIONING),
    ("some future state", st.Phase.BUSY, None),
])
def test_provision_state_table(state: str, phase: st.Phase, kind: ErrorKind | None) -> None:
    info = st.state_info(state)
    assert info.phase is phase
    assert info.error_kind is kind
    if phase is st.Phase.BUSY:
        assert info.poll > 0


@pytest.mark.parametrize(("node", "busy"), [
    ({"provision_state": "available", "target_provision_state": None}, False),
    ({"provision_state": "available", "target_provision_state": "active"}, True),
    ({"provision_state": "deploying", "target_provision_state": "active"}, True),
    ({"provision_state": "deploy failed", "target_provision_state": "active"}, False),
])
def test_is_busy(node: dict[str, Any], busy: bool) -> None:
    assert st.is_busy(node) is busy


@pytest.mark.parametrize(("power", "on"), [
    ("power on", True), ("power off", False), ("rebooting", True), (None, None),
    ("error", None), ("weird", None),
])
def test_power_states(power: str | None, on: bool | None) -> None:
    assert st.power_on(power) is on


def test_failure_uses_last_error_and_masks_secrets() -> None:
    node = {"provision_state": "deploy failed",
            "last_error": "image http://x/os.img: HTTP 404; password hunter2"}
    result = st.failure(node, secrets=("hunter2",))
    assert result.error_kind is ErrorKind.PROVISIONING
    assert result.error == "image http://x/os.img: HTTP 404; password ******"
    bare = st.failure({"provision_state": "clean failed", "last_error": None})
    assert bare.error_kind is ErrorKind.PREPARATION and "clean failed" in (bare.error or "")


def bmc(address: str, *, insecure: bool = False) -> BMCAccess:
    return BMCAccess(address=address, username="u", password="p",
                     disable_certificate_verification=insecure)


@pytest.mark.parametrize(("address", "driver", "info"), [
    ("redfish://10.0.0.1/redfish/v1/Systems/1", "redfish",
     {"redfish_address": "https://10.0.0.1", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("redfish+http://10.0.0.1:8000/redfish/v1/Systems/abc", "redfish",
     {"redfish_address": "http://10.0.0.1:8000", "redfish_system_id": "/redfish/v1/Systems/abc"}),
    ("redfish+https://bmc.example", "redfish", {"redfish_address": "https://bmc.example"}),
    ("redfish-virtualmedia+http://[fd00::1]:8000/redfish/v1/Systems/x", "redfish",
     {"redfish_address": "http://[fd00::1]:8000", "redfish_system_id": "/redfish/v1/Systems/x"}),
    ("ipmi://10.0.0.2:623", "ipmi", {"ipmi_address": "10.0.0.2", "ipmi_port": 623}),
    ("fake://rack1/h1", "fake-hardware", {"fake_address": "fake://rack1/h1"}),
    ("fake+http://127.0.0.1:8123/systems/abc/", "racksmith-fake",
     {"fake_bmc_address": "http://127.0.0.1:8123/systems/abc"}),
    # As Metal3 parses them: a bare host[:port] is IPMI; the ilo5 aliases;
    # idrac; UEFI HTTP boot.
    ("10.0.0.1", "ipmi", {"ipmi_address": "10.0.0.1"}),
    ("10.0.0.1:6230", "ipmi", {"ipmi_address": "10.0.0.1", "ipmi_port": 6230}),
    ("[fd00::2]:6230", "ipmi", {"ipmi_address": "fd00::2", "ipmi_port": 6230}),
    ("ilo5-redfish://10.0.0.3/redfish/v1/Systems/1", "redfish",
     {"redfish_address": "https://10.0.0.3", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("ilo5-virtualmedia+http://10.0.0.3:8000/redfish/v1/Systems/1", "redfish",
     {"redfish_address": "http://10.0.0.3:8000"}),
    ("idrac-virtualmedia://10.0.0.4/redfish/v1/Systems/System.Embedded.1", "idrac",
     {"redfish_address": "https://10.0.0.4",
      "redfish_system_id": "/redfish/v1/Systems/System.Embedded.1"}),
    ("idrac-redfish+https://10.0.0.4", "idrac", {"redfish_address": "https://10.0.0.4"}),
    ("redfish-uefihttp+http://10.0.0.5:8000/redfish/v1/Systems/1", "redfish",
     {"redfish_address": "http://10.0.0.5:8000"}),
])
def test_bmc_schemes(address: str, driver: str, info: dict[str, Any]) -> None:
    spec = parse_bmc(bmc(address), deploy_iso="http://i/ipa.iso", ipmi_enabled=True)
    assert spec.driver == driver
    for key, value in info.items():
        assert spec.driver_info[key] == value
    assert "p" not in spec.driver_info.values()
    if driver == "redfish":
        boot = "redfish-https" if "uefihttp" in address else "redfish-virtual-media"
        assert spec.interfaces["boot"] == boot
        assert spec.driver_info["deploy_iso"] == "http://i/ipa.iso"
        assert spec.credentials == {"redfish_username": "u", "redfish_password": "p"}
    if driver == "idrac":
        assert spec.interfaces == {"boot": "idrac-redfish-virtual-media", "deploy": "direct",
                                   "inspect": "idrac-redfish", "management": "idrac-redfish",
                                   "power": "idrac-redfish"}
        assert spec.credentials == {"redfish_username": "u", "redfish_password": "p"}
    if driver == "racksmith-fake":
        # Instant BMC, but the real ramdisk agent protocol for the rest.
        assert spec.interfaces == {"boot": "racksmith-fake", "deploy": "direct",
                                   "inspect": "agent", "management": "racksmith-fake",
                                   "power": "racksmith-fake"}
        assert spec.credentials == {"fake_bmc_username": "u", "fake_bmc_password": "p"}


def test_inspection_mode_agent_boots_the_ramdisk_on_redfish() -> None:
    spec = parse_bmc(bmc("redfish://h/x"), deploy_iso=None, ipmi_enabled=False)
    assert spec.interfaces["inspect"] == "redfish"
    agent = BMCAccess(address="redfish://h/x", username="u", password="p", inspection="agent")
    spec = parse_bmc(agent, deploy_iso=None, ipmi_enabled=False)
    assert spec.interfaces["inspect"] == "agent"


def test_insecure_redfish() -> None:
    spec = parse_bmc(bmc("redfish://h/x", insecure=True), deploy_iso=None, ipmi_enabled=False)
    assert spec.driver_info["redfish_verify_ca"] is False


@pytest.mark.parametrize(("address", "ipmi", "iso", "needle"), [
    ("ilo4://h", True, "x", "unsupported BMC address scheme 'ilo4'.*idrac-virtualmedia"),
    ("irmc://h", True, "x", "supported: fake, .*redfish-uefihttp"),
    ("redfish://", True, "x", "no host"),
    ("redfish://h:notaport", True, "x", "port"),
    ("ipmi://h", False, "x", "ipmitool"),
    ("redfish-virtualmedia://h/x", True, None, "deploy ISO"),
    ("redfish-uefihttp://h/x", True, None, "UEFI HTTP"),
    ("fake+http://", True, None, "no host"),
])
def test_bad_bmc(address: str, ipmi: bool, iso: str | None, needle: str) -> None:
    with pytest.raises(BMCAddressError, match=needle):
        parse_bmc(bmc(address), deploy_iso=iso, ipmi_enabled=ipmi)


def test_inventory_mapping() -> None:
    inventory = {
        "cpu": {"architecture": "x86_64", "model_name": "Xeon", "count": 8,
                "frequency": "2400", "flags": ["vmx"]},
        "memory": {"total": 17179869184, "physical_mb": 16384},
        "interfaces": [{"name": "eno1", "mac_address": "AA:BB:CC:00:00:01",
                        "ipv4_address": "10.0.0.5", "speed_mbps": 25000,
                        "vendor": "0x8086", "product": "0x1572"}],
        "disks": [{"name": "/dev/sda", "size": 480103981056, "rotational": False,
                   "serial": "S1", "wwn": "0x5000", "by_path": "/dev/disk/by-path/p"},
                  {"name": "/dev/nvme0n1", "size": 1000, "rotational": False},
                  {"name": "/dev/sdb", "size": 2000, "rotational": True}],
        "system_vendor": {"manufacturer": "Acme", "product_name": "R1", "serial_number": "X1",
                          "firmware": {"vendor": "AMI", "version": "1.2",
                                       "build_date": "2024-01-01"}},
        "boot": {"current_boot_mode": "uefi", "pxe_interface": "aa:bb:cc:00:00:01"},
        "hostname": "h1",
    }
    hw = hardware_from_inventory(inventory, {"properties": {}},
                                 [{"address": "aa:bb:cc:00:00:02", "pxe_enabled": False}])
    assert hw.cpu is not None and hw.cpu.arch == "x86_64" and hw.cpu.count == 8
    assert hw.cpu.clock_megahertz == 2400.0 and hw.cpu.model == "Xeon"
    assert hw.ram_mebibytes == 16384
    assert [(n.name, n.mac, n.speed_gbps, n.pxe) for n in hw.nics] == [
        ("eno1", "aa:bb:cc:00:00:01", 25, True), (None, "aa:bb:cc:00:00:02", None, False)]
    assert hw.nics[0].ip == "10.0.0.5"
    assert [d.type for d in hw.storage] == [DiskType.SSD, DiskType.NVME, DiskType.HDD]
    assert hw.storage[0].serial_number == "S1" and hw.storage[0].wwn == "0x5000"
    assert hw.storage[0].size_bytes == 480103981056
    assert hw.system_vendor is not None and hw.system_vendor.manufacturer == "Acme"
    assert hw.firmware is not None and hw.firmware.bios is not None
    assert hw.firmware.bios.version == "1.2" and hw.firmware.bios.date == "2024-01-01"
    assert hw.hostname == "h1"


def test_empty_inventory_uses_node_properties() -> None:
    hw = hardware_from_inventory({}, {"properties": {"cpu_arch": "aarch64", "cpus": "4",
                                                     "memory_mb": "2048"}})
    assert hw.cpu is not None and hw.cpu.arch == "aarch64" and hw.cpu.count == 4
    assert hw.ram_mebibytes == 2048
    assert hw.storage == [] and hw.nics == []
