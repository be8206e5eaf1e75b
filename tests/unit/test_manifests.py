"""``racksmith up --apply`` reads YAML as kubectl does: Metal3's generator
output (an unquoted MAC) and BMO's examples load, and pass Metal3's rules."""

from __future__ import annotations

from pathlib import Path

from racksmith.apiserver.http.yamldecode import load_all
from racksmith.app.manifests import load_manifests
from racksmith.kinds.metal import BareMetalHost
from racksmith.kinds.metal3rules import host_violations

METAL3 = Path(__file__).resolve().parents[1] / "e2e" / "manifests" / "metal3"


def test_an_unquoted_mac_stays_a_string_and_numbers_stay_numbers() -> None:
    (doc,) = load_all("mac: 52:54:00:12:34:56\nn: 12\nf: 1.5\nh: 0x1f\nt: 1:20\n")
    assert doc == {"mac": "52:54:00:12:34:56", "n": 12, "f": 1.5, "h": 31, "t": "1:20"}


def test_the_generators_output_loads_as_a_valid_host() -> None:
    secret, host = load_manifests([METAL3 / "make-bm-worker.yaml"])
    assert secret["kind"] == "Secret" and secret["data"]["username"] == "YWRtaW4="
    assert host["spec"]["bootMACAddress"] == "52:54:00:12:34:56"
    parsed = BareMetalHost.model_validate(host)
    assert parsed.spec.online and parsed.spec.bmc is not None
    assert host_violations(host, None, "default") == []


def test_bmos_examples_pass_metal3s_rules() -> None:
    for obj in load_manifests([METAL3 / "examples"]):
        if obj["kind"] == "BareMetalHost":
            # worker-0.yaml names its user data in openshift-machine-api: applied there.
            assert host_violations(obj, None, "openshift-machine-api") == [], obj


def test_the_api_servers_yaml_bodies_read_it_the_same() -> None:
    from racksmith.apiserver.http.yamldecode import load
    assert load(b"spec:\n  bootMACAddress: 52:54:00:12:34:56\n") == {
        "spec": {"bootMACAddress": "52:54:00:12:34:56"}}
