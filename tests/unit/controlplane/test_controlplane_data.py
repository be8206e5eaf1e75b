"""racksmith.controlplane: the PKI, the endpoint and the admin kubeconfig of a
cluster, as pure data."""

from __future__ import annotations

import base64
import copy

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from racksmith.controlplane.endpoint import ClusterVip, Endpoint, plan_endpoint
from racksmith.controlplane.kubeconfig import (
    KubeconfigDamaged,
    KubeconfigStale,
    admin_kubeconfig,
    check_kubeconfig,
    kubeconfig_secret,
)
from racksmith.controlplane.pki import (
    CLUSTER_NAME_LABEL,
    SECRET_TYPE,
    ClusterPki,
    PkiDamaged,
    issue_client,
    issue_serving,
)

PKI = ClusterPki.generate()


def test_secrets_carry_cluster_api_names_keys_type_and_label() -> None:
    secrets = PKI.secrets("ns1", "demo")
    assert [s["metadata"]["name"] for s in secrets] == [
        "demo-ca", "demo-proxy", "demo-etcd", "demo-sa"]
    for secret in secrets:
        assert secret["type"] == SECRET_TYPE
        assert secret["metadata"]["labels"] == {CLUSTER_NAME_LABEL: "demo"}
        assert set(secret["data"]) == {"tls.crt", "tls.key"}
    ca = x509.load_pem_x509_certificate(base64.b64decode(secrets[0]["data"]["tls.crt"]))
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubernetes"


def test_secrets_round_trip_and_kubeadm_layout() -> None:
    secrets = {s["metadata"]["name"].rsplit("-", 1)[1]: s for s in PKI.secrets("n", "demo")}
    assert ClusterPki.from_secrets("demo", secrets) == PKI
    files = PKI.kubeadm_files()
    assert sorted(files) == ["ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key",
                             "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"]
    assert files["sa.pub"].startswith(b"-----BEGIN PUBLIC KEY-----")


@pytest.mark.parametrize("damage, message", [
    (lambda s: s.pop("proxy"), "Secret demo-proxy is missing"),
    (lambda s: s["etcd"]["data"].pop("tls.key"), "Secret demo-etcd has no usable tls.key"),
    (lambda s: s["ca"]["data"].update({"tls.crt": "bm90IGEgY2VydA=="}),
     "Secret demo-ca holds no usable certificate and key"),
    (lambda s: s["ca"]["data"].update({"tls.key": s["proxy"]["data"]["tls.key"]}),
     "Secret demo-ca: tls.key does not belong to tls.crt"),
])
def test_a_damaged_secret_is_named_and_never_quoted(damage: object, message: str) -> None:
    secrets = {s["metadata"]["name"].rsplit("-", 1)[1]: copy.deepcopy(s)
               for s in PKI.secrets("n", "demo")}
    damage(secrets)  # type: ignore[operator]
    with pytest.raises(PkiDamaged) as raised:
        ClusterPki.from_secrets("demo", secrets)
    assert str(raised.value) == message
    assert "PRIVATE" not in str(raised.value)


def test_issued_certificates_chain_to_the_ca_with_the_right_usage() -> None:
    client = issue_client(PKI.ca, "racksmith:machine", ["racksmith:controllers"])
    cert = client.certificate()
    cert.verify_directly_issued_by(PKI.ca.certificate())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == \
        "racksmith:machine"
    assert [a.value for a in cert.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME)] == ["racksmith:controllers"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    serving = issue_serving(PKI.ca, "kube-apiserver",
                            ["10.10.0.5", "127.0.0.1", "kubernetes.default"]).certificate()
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == [
        "10.10.0.5", "127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["kubernetes.default"]


def _vip(name: str, vip: str, created: str = "2026-01-01T00:00:00Z",
         ns: str = "default") -> ClusterVip:
    return ClusterVip(created, ns, name, vip)


def test_endpoint_is_the_explicit_one_then_the_vip_then_the_first_master() -> None:
    explicit = Endpoint("127.0.0.1", 16443)
    args = {"control_plane_cidrs": ["10.10.0.0/24"], "others": [],
            "control_plane_addresses": ["10.10.0.11", "10.10.0.12"]}
    assert plan_endpoint(me=_vip("a", "10.10.0.5"), port=6443, explicit=explicit,
                         **args).endpoint == explicit  # type: ignore[arg-type]
    assert plan_endpoint(me=_vip("a", "10.10.0.5"), port=7443, explicit=None,
                         **args).endpoint == Endpoint("10.10.0.5", 7443)  # type: ignore[arg-type]
    assert plan_endpoint(me=None, port=None, explicit=None,
                         **args).endpoint == Endpoint("10.10.0.11", 6443)  # type: ignore[arg-type]
    waiting = plan_endpoint(me=None, port=None, explicit=None, control_plane_cidrs=[],
                            others=[], control_plane_addresses=[])
    assert waiting.endpoint is None and waiting.problem is None and waiting.waiting


@pytest.mark.parametrize("vip, cidrs, reason", [
    ("10.10.0.300", ["10.10.0.0/24"], "VIPInvalid"),
    ("10.9.0.5", ["10.10.0.0/24", "10.11.0.0/24"], "VIPOutsideControlPlaneNetwork"),
    ("fd00::5", ["10.10.0.0/24"], "VIPOutsideControlPlaneNetwork"),
])
def test_a_vip_outside_the_control_plane_networks_is_refused(vip: str, cidrs: list[str],
                                                             reason: str) -> None:
    plan = plan_endpoint(me=_vip("a", vip), port=6443, explicit=None, control_plane_cidrs=cidrs,
                         others=[], control_plane_addresses=["10.10.0.11"])
    assert plan.endpoint is None
    assert plan.problem is not None and plan.problem.reason == reason, plan


def test_of_two_clusters_naming_one_vip_the_older_keeps_it() -> None:
    old = _vip("first", "10.10.0.5", "2026-01-01T00:00:00Z", ns="a")
    new = _vip("second", "10.10.0.5", "2026-02-01T00:00:00Z", ns="b")
    args = {"port": 6443, "explicit": None, "control_plane_cidrs": ["10.10.0.0/24"],
            "others": [old, new], "control_plane_addresses": []}
    assert plan_endpoint(me=old, **args).problem is None  # type: ignore[arg-type]
    refused = plan_endpoint(me=new, **args).problem  # type: ignore[arg-type]
    assert refused is not None and refused.reason == "VIPConflict"
    assert "a/first" in refused.message


def test_admin_kubeconfig_names_and_checks() -> None:
    endpoint = Endpoint("10.10.0.5", 6443)
    text = admin_kubeconfig("demo", endpoint, PKI.ca)
    config = yaml.safe_load(text)
    assert config["current-context"] == "demo-admin@demo"
    assert config["clusters"][0] == {"name": "demo", "cluster": {
        "server": "https://10.10.0.5:6443",
        "certificate-authority-data": base64.b64encode(PKI.ca.cert_pem).decode()}}
    cert = x509.load_pem_x509_certificate(base64.b64decode(
        config["users"][0]["user"]["client-certificate-data"]))
    assert [a.value for a in cert.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME)] == ["system:masters"]
    secret = kubeconfig_secret("n", "demo", text)
    assert secret["metadata"]["name"] == "demo-kubeconfig" and list(secret["data"]) == ["value"]
    check_kubeconfig(secret, "demo", endpoint, PKI.ca)
    with pytest.raises(KubeconfigStale):
        check_kubeconfig(secret, "demo", Endpoint("10.10.0.6", 6443), PKI.ca)
    other = ClusterPki.generate()
    with pytest.raises(KubeconfigDamaged) as raised:
        check_kubeconfig(secret, "demo", endpoint, other.ca)
    assert not isinstance(raised.value, KubeconfigStale)
    for data in ({"value": "bm90OiBbeWFtbA=="}, {}, {"value": "!!"}):
        with pytest.raises(KubeconfigDamaged):
            check_kubeconfig({**secret, "data": data}, "demo", endpoint, PKI.ca)


def test_an_even_number_of_control_plane_machines_is_reported() -> None:
    from racksmith.controllers.cluster.controlplane import quorum
    from racksmith.kinds.cluster import Machine
    from racksmith.kinds.common import ConditionStatus

    def masters(n: int) -> list[Machine]:
        return [Machine.model_validate({"metadata": {"name": f"m{i}", "namespace": "n"},
                                        "spec": {"clusterName": "c",
                                                 "roles": ["master", "etcd"]}})
                for i in range(n)]
    assert quorum(masters(3)).status is ConditionStatus.TRUE
    assert quorum(masters(0)).status is ConditionStatus.TRUE
    even = quorum(masters(2))
    assert (even.status, even.reason) == (ConditionStatus.FALSE, "EvenControlPlaneMachines")
    assert "use an odd number" in even.message


def test_an_identity_is_renewed_near_its_end_or_when_unusable() -> None:
    import datetime as dt

    from racksmith.controlplane.identities import identity_secret, needs_renewal

    secret = identity_secret("n", "demo", "machine", PKI.ca)
    now = dt.datetime.now(dt.UTC)
    assert not needs_renewal(secret, PKI.ca, now)
    assert needs_renewal(secret, PKI.ca, now + dt.timedelta(days=340))
    assert needs_renewal(secret, ClusterPki.generate().ca, now)
    assert needs_renewal({**secret, "data": {**secret["data"], "tls.key": "eA=="}}, PKI.ca, now)
