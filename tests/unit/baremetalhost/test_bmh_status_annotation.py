"""Metal3's status annotation: what ``racksmith export`` writes, a recreated
host takes (``restored_status``), and the admission rules accept."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from racksmith.cli.export import exported_host
from racksmith.controllers.baremetalhost.statusannotation import restored_status
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.metal import OperationalStatus
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.kinds.metal3rules import host_violations

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
HARDWARE = {"ramMebibytes": 4096, "cpu": {"arch": "x86_64", "count": 4},
            "storage": [{"name": "/dev/sda", "sizeBytes": 10737418240, "type": "SSD"}]}


def live(state: str) -> dict[str, Any]:
    return {
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
        "metadata": {"name": "w0", "namespace": "old", "uid": "u1", "resourceVersion": "42",
                     "finalizers": [ann.FINALIZER], "labels": {"rack": "r1"},
                     "annotations": {"note": "kept",
                                     "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                     "managedFields": [{"manager": "x"}]},
        "spec": {"online": True, "bmc": {"address": "redfish://b/redfish/v1/Systems/1",
                                         "credentialsName": "w0-bmc"}},
        "status": {"operationalStatus": "error", "errorType": "provisioning error",
                   "errorMessage": "old site", "errorCount": 2, "poweredOn": True,
                   "hardware": HARDWARE,
                   "provisioning": {"state": state, "ID": "old-ironic-id",
                                    "image": {"url": "http://i/img", "checksum": "abc"}},
                   "goodCredentials": {"credentials": {"name": "w0-bmc"},
                                       "credentialsVersion": "7"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2026-12-01T00:00:00Z"}]},
    }


def test_export_carries_the_status_and_nothing_the_server_set() -> None:
    out = exported_host(live("provisioned"))
    assert set(out) == {"apiVersion", "kind", "metadata", "spec"}
    assert out["metadata"]["name"] == "w0" and "namespace" not in out["metadata"]
    assert out["metadata"]["labels"] == {"rack": "r1"}
    assert not {"uid", "resourceVersion", "finalizers", "managedFields"} & set(out["metadata"])
    copied = json.loads(out["metadata"]["annotations"][ann.STATUS])
    assert copied == live("provisioned")["status"]
    assert out["metadata"]["annotations"]["note"] == "kept"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in out["metadata"]["annotations"]
    # The recreated host passes the admission rules.
    assert host_violations(out, None, "new") == []


def test_a_provisioned_host_keeps_its_state_and_hardware_and_forgets_the_old_backend() -> None:
    value = exported_host(live("provisioned"))["metadata"]["annotations"][ann.STATUS]
    status = restored_status(value, NOW)
    assert status is not None and status.provisioning is not None
    assert status.provisioning.state is S.PROVISIONED
    assert status.provisioning.image is not None and status.provisioning.image.url == \
        "http://i/img"
    assert status.hardware is not None and status.hardware.ram_mebibytes == 4096
    assert status.provisioning.id is None and status.good_credentials is None
    assert status.error_type is None and status.error_count == 0 and not status.conditions
    assert status.operational_status is OperationalStatus.OK and status.last_updated == NOW


def test_any_other_state_registers_again_without_inspection() -> None:
    for state in ("available", "provisioning", "inspecting", "deprovisioning"):
        value = exported_host(live(state))["metadata"]["annotations"][ann.STATUS]
        status = restored_status(value, NOW)
        assert status is not None and status.provisioning is not None
        assert status.provisioning.state is S.REGISTERING, state
        assert status.hardware is not None  # so registering skips inspection


def test_a_value_that_is_not_a_status_is_ignored() -> None:
    assert restored_status("", NOW) is None
    assert restored_status("{", NOW) is None
    assert restored_status('{"errorCount": -1}', NOW) is None


def test_annotation_values() -> None:
    assert ann.reboot_mode("") == "hard" and ann.reboot_mode('{"mode":"soft"}') == "soft"
    assert ann.reboot_mode('{"mode":"hard","force":true}') == "hard"
    assert ann.reboot_mode("soft") is None and ann.reboot_mode('{"mode":"now"}') is None
    assert ann.reboot_mode('{"owner":"x"}') == "hard"  # other keys ignored, as in Metal3
    assert ann.detach_arguments("") == ann.DetachArguments()
    assert ann.detach_arguments('{"deleteAction":"delay"}') == ann.DetachArguments("delay")
    assert ann.detach_arguments('{"force":"yes"}') is None
    assert ann.held_off_by({ann.REBOOT: "", f"{ann.REBOOT}/a": "", "x": ""}) == \
        [f"{ann.REBOOT}/a"]
