"""Metal3's admission rules through the genuine kubectl (1.33) against a real
``racksmith apiserver`` process: every rule refuses with 422, the field path
and BMO's words, and nothing refused is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.process import ServerProc
from tests.integration.test_kubectl import Kubectl

NS = "metal3-rules"
ADDRESS = "redfish+http://127.0.0.1:9/redfish/v1/Systems/1"


@pytest.fixture
def k(server_process: ServerProc, tmp_path: Path) -> Kubectl:
    kubectl = Kubectl(33, server_process, tmp_path)
    if kubectl.run("get", "namespace", NS, check=False).returncode != 0:
        kubectl.run("create", "namespace", NS)
    return kubectl


def bmh(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> str:
    return json.dumps({
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"online": False, "bmc": {"address": ADDRESS, "credentialsName": "c"}, **spec}})


def refused(k: Kubectl, *args: str, input_text: str | None = None) -> str:
    res = k.run(*args, input_text=input_text, check=False)
    assert res.returncode != 0, res.stdout
    assert "is invalid" in res.stderr, res.stderr
    return res.stderr


def absent(k: Kubectl, name: str) -> bool:
    return k.run("get", "bmh", "-n", NS, name, check=False).returncode != 0


CREATE = [
    ("firmware", bmh("fw", firmware={"sriovEnabled": True}),
     "spec.firmware: Forbidden: the Firmware field is no longer supported, use "
     "HostFirmwareSettings resource instead"),
    ("uuid", bmh("0b1e9a52-6d9d-4c51-9d5b-0c1b8f3c2c11"),
     "metadata.name: Forbidden: BareMetalHost resource name cannot be a UUID"),
    ("cross-namespace", bmh("xns", userData={"name": "ud", "namespace": "other"}),
     "spec.userData.namespace: Forbidden: cross-namespace Secret references are not allowed"),
    ("raid on ipmi", bmh("raid", bmc={"address": "ipmi://127.0.0.1", "credentialsName": "c"},
                         raid={"hardwareRAIDVolumes": [{"level": "1"}]}),
     "spec.raid.hardwareRAIDVolumes: Forbidden: BMC driver ipmi does not support "
     "configuring RAID"),
    ("secure boot on ipmi", bmh("sb", bmc={"address": "127.0.0.1:623", "credentialsName": "c"},
                                bootMode="UEFISecureBoot"),
     "spec.bootMode: Forbidden: BMC driver ipmi does not support secure boot"),
    ("fast inspection on ipmi", bmh("fi", bmc={"address": "ipmi://127.0.0.1",
                                               "credentialsName": "c"}, inspectionMode="fast"),
     "spec.inspectionMode: Forbidden: BMC driver ipmi does not support fast (out-of-band) "
     "inspection"),
    ("custom deploy", bmh("cd", customDeploy={"method": "install_coreos"}),
     "spec.customDeploy: Forbidden: custom deploy steps are not supported by Racksmith"),
    ("reboot value", bmh("rb", {"reboot.metal3.io/me": "soon"}),
     "metadata.annotations[reboot.metal3.io/me]: Forbidden: invalid value"),
    ("checksum", bmh("ck", image={"url": "http://127.0.0.1:9/img.qcow2"}),
     "spec.image.checksum: Forbidden: checksum is required for normal images"),
]


@pytest.mark.parametrize(("case", "body", "message"), CREATE, ids=[c[0] for c in CREATE])
def test_a_host_breaking_a_rule_is_refused_and_not_stored(k: Kubectl, case: str, body: str,
                                                          message: str) -> None:
    err = refused(k, "apply", "-f", "-", input_text=body)
    assert message in err, err
    assert absent(k, json.loads(body)["metadata"]["name"])


def test_the_rules_of_a_change(k: Kubectl) -> None:
    k.run("apply", "-f", "-", input_text=bmh("moving", bootMACAddress="52:54:00:00:00:01"))

    def status(state: str, **extra: Any) -> None:
        k.run("patch", "bmh", "-n", NS, "moving", "--subresource=status", "--type=merge", "-p",
              json.dumps({"status": {"provisioning": {"state": state}, **extra}}))

    def patch(spec: dict[str, Any]) -> str:
        return refused(k, "patch", "bmh", "-n", NS, "moving", "--type=merge", "-p",
                       json.dumps({"spec": spec}))

    status("provisioned", operationalStatus="OK")
    err = patch({"bootMACAddress": "52:54:00:00:00:02"})
    assert "spec.bootMACAddress: Forbidden: bootMACAddress can not be changed once it is " \
        "set" in err
    new_bmc = {"bmc": {"address": "redfish+http://127.0.0.1:8/redfish/v1/Systems/1",
                       "credentialsName": "c"}}
    err = patch(new_bmc)
    assert "spec.bmc.address: Forbidden: BMC address can not be changed if the BMH is not " \
        "in the Registering state, or if the BMH is not detached" in err
    err = patch({"externallyProvisioned": True})
    assert "spec.externallyProvisioned: Forbidden: externallyProvisioned can only be " \
        "enabled when in Available state, currently in provisioned" in err
    stored = json.loads(k.run("get", "bmh", "-n", NS, "moving", "-o", "json").stdout)
    assert stored["spec"]["bootMACAddress"] == "52:54:00:00:00:01"
    assert stored["spec"]["bmc"]["address"] == ADDRESS
    # Detached, the BMC address may change; available, externallyProvisioned may be set.
    status("provisioned", operationalStatus="detached")
    k.run("patch", "bmh", "-n", NS, "moving", "--type=merge", "-p",
          json.dumps({"spec": new_bmc}))
    status("available", operationalStatus="OK")
    k.run("patch", "bmh", "-n", NS, "moving", "--type=merge", "-p",
          '{"spec":{"externallyProvisioned":true}}')
    k.run("delete", "bmh", "-n", NS, "moving")


def test_every_violation_is_named_at_once(k: Kubectl) -> None:
    err = refused(k, "apply", "-f", "-", input_text=bmh(
        "many", firmware={}, disablePowerOff=True, taints=[{"key": "k"}]))
    for path in ("spec.firmware", "spec.disablePowerOff", "spec.taints"):
        assert path in err, err
