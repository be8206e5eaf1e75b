"""Metal3's admission rules for BareMetalHost (``racksmith.kinds.metal3rules``):
each rule refuses with its field path and BMO's words; a valid host passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from racksmith.kinds import hostannotations as ann
from racksmith.kinds.metal3rules import host_violations

NS = "site"


def host(name: str = "worker-0", *, annotations: dict[str, str] | None = None,
         status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"online": True, "bmc": {"address": "redfish+http://127.0.0.1:8000/redfish/v1/"
                                         "Systems/w0", "credentialsName": "w0-bmc"}, **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def paths(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, str]:
    return dict(host_violations(obj, old, NS))


def state(name: str, **extra: Any) -> dict[str, Any]:
    return {"provisioning": {"state": name}, **extra}


def test_a_metal3_host_passes() -> None:
    assert paths(host(bootMACAddress="52:54:00:12:34:56", bootMode="UEFI",
                      image={"url": "http://i/img.qcow2", "checksum": "http://i/img.sha256sum",
                             "checksumType": "sha256", "format": "qcow2"},
                      hardwareProfile="unknown", automatedCleaningMode="metadata")) == {}


CREATE_CASES = [
    (host(firmware={"sriovEnabled": True}), "spec.firmware",
     "the Firmware field is no longer supported, use HostFirmwareSettings resource instead"),
    (host("0b1e9a52-6d9d-4c51-9d5b-0c1b8f3c2c11"), "metadata.name",
     "BareMetalHost resource name cannot be a UUID"),
    (host(userData={"name": "ud", "namespace": "other"}), "spec.userData.namespace",
     "cross-namespace Secret references are not allowed"),
    (host(bmc={"address": "ipmi://10.0.0.1", "credentialsName": "c"},
          raid={"hardwareRAIDVolumes": [{"level": "1"}]}), "spec.raid.hardwareRAIDVolumes",
     "BMC driver ipmi does not support configuring RAID"),
    (host(bmc={"address": "10.0.0.1:623", "credentialsName": "c"}, bootMode="UEFISecureBoot"),
     "spec.bootMode", "BMC driver ipmi does not support secure boot"),
    (host(bmc={"address": "ipmi://10.0.0.1", "credentialsName": "c"}, inspectionMode="fast"),
     "spec.inspectionMode", "BMC driver ipmi does not support fast (out-of-band) inspection"),
    (host(bmc={"address": "fake+http://127.0.0.1:9/h", "credentialsName": "c"},
          inspectionMode="fast"), "spec.inspectionMode",
     "BMC driver fake+http does not support fast (out-of-band) inspection"),
    (host(image={"url": "http://i/img.qcow2"}), "spec.image.checksum",
     "checksum is required for normal images"),
    (host(image={"url": "oci://registry/img"}), "spec.image.url", "not supported by Racksmith"),
    (host(customDeploy={"method": "install_coreos"}), "spec.customDeploy",
     "not supported by Racksmith"),
    (host(preprovisioningNetworkDataName="ramdisk-net"), "spec.preprovisioningNetworkDataName",
     "not supported by Racksmith"),
    (host(disablePowerOff=True), "spec.disablePowerOff", "not supported by Racksmith"),
    (host(networkInterfaces=[{"name": "eth0"}]), "spec.networkInterfaces",
     "not supported by Racksmith"),
    (host(taints=[{"key": "k", "effect": "NoSchedule"}]), "spec.taints",
     "not supported by Racksmith"),
    (host(architecture="aarch64"), "spec.architecture", "aarch64 hosts are not supported"),
    (host(annotations={ann.REBOOT: "now"}), f"metadata.annotations[{ann.REBOOT}]",
     'allowed modes are "hard", "soft" or ""'),
    (host(annotations={f"{ann.REBOOT}/me": '{"mode": "gentle"}'}),
     f"metadata.annotations[{ann.REBOOT}/me]", "invalid value"),
    (host(annotations={ann.DETACHED: '{"deleteAction": "later"}'}),
     f"metadata.annotations[{ann.DETACHED}]", "deleteAction"),
    (host(annotations={ann.INSPECT: "now"}), f"metadata.annotations[{ann.INSPECT}]",
     'allowed are "disabled" or ""'),
    (host(annotations={ann.HARDWARE_DETAILS: '{"ramMebibytes": 1024}'}),
     f"metadata.annotations[{ann.HARDWARE_DETAILS}]", "inspection must be disabled"),
    (host(inspectionMode="disabled", annotations={ann.HARDWARE_DETAILS: '{"ram": 1}'}),
     f"metadata.annotations[{ann.HARDWARE_DETAILS}]", "error decoding"),
    (host(annotations={ann.STATUS: "{"}), f"metadata.annotations[{ann.STATUS}]",
     "error decoding status annotation"),
    (host(annotations={ann.STATUS: json.dumps({"errorType": "detach error"})}),
     f"metadata.annotations[{ann.STATUS}]", "invalid errorType 'detach error'"),
]


@pytest.mark.parametrize(("obj", "path", "words"), CREATE_CASES,
                         ids=[c[1] + ":" + c[2][:30] for c in CREATE_CASES])
def test_each_rule_names_its_field(obj: dict[str, Any], path: str, words: str) -> None:
    found = paths(obj)
    assert path in found, found
    assert words in found[path]


def test_fast_inspection_is_redfish_s() -> None:
    assert paths(host(inspectionMode="fast")) == {}
    assert paths(host(inspectionMode="agent")) == {}


def test_valid_annotation_values_pass() -> None:
    assert paths(host(annotations={
        ann.REBOOT: "", f"{ann.REBOOT}/remediation": '{"mode": "soft"}',
        ann.DETACHED: '{"deleteAction": "delay", "force": true}',
        ann.INSPECT: "disabled", ann.HARDWARE_DETAILS: '{"ramMebibytes": 1024}',
        ann.STATUS: json.dumps(state("provisioned", operationalStatus="OK")),
    })) == {}
    assert paths(host(image={"url": "http://i/x.iso", "format": "live-iso"})) == {}


def test_boot_mac_is_immutable_once_set() -> None:
    old = host(bootMACAddress="52:54:00:12:34:56", status=state("available"))
    assert paths(host(bootMACAddress="52:54:00:12:34:56"), old) == {}
    assert paths(host(bootMACAddress="52:54:00:12:34:56".upper()), old) == {}
    for changed in ("52:54:00:12:34:57", None):
        found = paths(host(bootMACAddress=changed), old)
        assert found == {"spec.bootMACAddress":
                         "bootMACAddress can not be changed once it is set"}
    assert paths(host(bootMACAddress="52:54:00:12:34:56"), host(status=state("available"))) == {}


def test_bmc_address_changes_only_while_registering_or_detached() -> None:
    moved = {"address": "redfish+http://127.0.0.1:8001/redfish/v1/Systems/w0",
             "credentialsName": "w0-bmc"}
    for allowed in (state("registering"), {**state("provisioned"),
                                           "operationalStatus": "detached"}):
        assert paths(host(bmc=moved), host(status=allowed)) == {}
    found = paths(host(bmc=moved), host(status=state("provisioned")))
    assert found == {"spec.bmc.address": "BMC address can not be changed if the BMH is not "
                     "in the Registering state, or if the BMH is not detached"}


def test_externally_provisioned_is_switched_on_only_from_available() -> None:
    assert paths(host(externallyProvisioned=True)) == {}  # at creation
    assert paths(host(externallyProvisioned=True), host(status=state("available"))) == {}
    found = paths(host(externallyProvisioned=True), host(status=state("inspecting")))
    assert found == {"spec.externallyProvisioned": "externallyProvisioned can only be "
                     "enabled when in Available state, currently in inspecting"}


def test_a_stored_violation_does_not_block_other_writes() -> None:
    """Ratcheting: a host stored before a rule existed still gets its status
    and metadata written; a new violation is refused."""
    legacy = host("0b1e9a52-6d9d-4c51-9d5b-0c1b8f3c2c11", image={"url": "http://i/x.qcow2"})
    written = {**legacy, "status": state("available")}
    assert paths(written, legacy) == {}
    worse = host("0b1e9a52-6d9d-4c51-9d5b-0c1b8f3c2c11", image={"url": "http://i/x.qcow2"},
                 firmware={})
    assert set(paths(worse, legacy)) == {"spec.firmware"}


def test_every_violation_is_reported_at_once() -> None:
    found = paths(host(firmware={}, customDeploy={"method": "m"}, taints=[{"key": "k"}]))
    assert set(found) == {"spec.firmware", "spec.customDeploy", "spec.taints"}
