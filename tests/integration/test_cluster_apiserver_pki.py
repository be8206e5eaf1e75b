"""``racksmith apiserver`` in place of a cluster's kube-apiserver, with the
cluster's PKI in kubeadm's layout: the cluster's admin kubeconfig (a client
certificate in ``system:masters``, as the Cluster controller writes it into
``<cluster>-kubeconfig``) works with the real kubectl; a certificate of
another user is that user under RBAC; one from another CA is refused."""

from __future__ import annotations

import base64
import http.client
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from racksmith.controlplane.endpoint import Endpoint
from racksmith.controlplane.identities import identity_secret
from racksmith.controlplane.kubeconfig import admin_kubeconfig
from racksmith.controlplane.pki import ClusterPki, issue_client, issue_serving
from tests.harness.process import ServerProc, kubectl_path, start_server

PKI = ClusterPki.generate()


@pytest.fixture(scope="module")
def cluster_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProc, Path]]:
    """The cluster's API on its PKI: kubeadm's files under pki/, a serving
    certificate from the cluster CA for 127.0.0.1; stopped by PID."""
    root = tmp_path_factory.mktemp("host")
    pki = root / "pki"
    for rel, data in PKI.kubeadm_files().items():
        (pki / rel).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (pki / rel).write_bytes(data)
    serving = issue_serving(PKI.ca, "kube-apiserver", ["127.0.0.1", "localhost", "kubernetes"])
    (pki / "apiserver.crt").write_bytes(serving.cert_pem)
    (pki / "apiserver.key").write_bytes(serving.key_pem)
    proc = start_server(root / "data", command="apiserver", extra=[
        "--tls-cert-file", str(pki / "apiserver.crt"),
        "--tls-private-key-file", str(pki / "apiserver.key"),
        "--client-ca-file", str(pki / "ca.crt")])
    try:
        yield proc, root
    finally:
        proc.kill()


def kubectl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(config), *args],
                          capture_output=True, text=True, timeout=60)


def endpoint(proc: ServerProc) -> Endpoint:
    url = urlsplit(proc.url)
    assert url.hostname is not None and url.port is not None
    return Endpoint(url.hostname, url.port)


def test_the_cluster_admin_kubeconfig_works_with_kubectl(
        cluster_api: tuple[ServerProc, Path]) -> None:
    proc, root = cluster_api
    config = root / "admin.conf"
    config.write_text(admin_kubeconfig("demo", endpoint(proc), PKI.ca))
    res = kubectl(config, "get", "namespaces", "-o", "name")
    assert res.returncode == 0, res.stderr + proc.log()[-2000:]
    assert "namespace/kube-system" in res.stdout.split()
    res = kubectl(config, "auth", "can-i", "delete", "nodes")
    assert res.stdout.strip() == "yes", res.stderr


def test_another_users_certificate_is_that_user_under_rbac(
        cluster_api: tuple[ServerProc, Path]) -> None:
    """A client certificate for ``racksmith:probe`` (no role): authenticated
    as that user, so RBAC refuses the list with a 403 naming it."""
    proc, root = cluster_api
    other = root / "probe.conf"
    text = admin_kubeconfig("demo", endpoint(proc), PKI.ca)
    probe = issue_client(PKI.ca, "racksmith:probe", ["racksmith:probes"])
    data = yaml.safe_load(text)
    data["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(probe.cert_pem).decode(),
        "client-key-data": base64.b64encode(probe.key_pem).decode()}
    other.write_text(yaml.safe_dump(data))
    res = kubectl(other, "get", "namespaces")
    assert res.returncode != 0
    assert 'User "racksmith:probe" cannot list resource "namespaces"' in res.stderr, res.stderr


def test_a_certificate_from_another_ca_is_refused(
        cluster_api: tuple[ServerProc, Path]) -> None:
    """The TLS handshake refuses a client certificate another CA issued, so no
    request is served with it (kube-apiserver answers 401 instead: Python's
    ssl verifies a client certificate it is given during the handshake)."""
    proc, root = cluster_api
    stranger = issue_client(ClusterPki.generate().ca, "kubernetes-admin", ["system:masters"])
    (root / "stranger.crt").write_bytes(stranger.cert_pem)
    (root / "stranger.key").write_bytes(stranger.key_pem)
    (root / "cluster-ca.crt").write_bytes(PKI.ca.cert_pem)
    context = ssl.create_default_context(cafile=str(root / "cluster-ca.crt"))
    context.load_cert_chain(root / "stranger.crt", root / "stranger.key")
    where = endpoint(proc)
    conn = http.client.HTTPSConnection(where.host, where.port, context=context, timeout=30)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        conn.request("GET", "/api/v1/namespaces")
        conn.getresponse().read()
    conn.close()


def test_a_controller_identity_has_its_access_inside_the_cluster(
        cluster_api: tuple[ServerProc, Path]) -> None:
    """The roles of ``racksmith rbac --in-cluster``, applied with the admin
    kubeconfig at the cluster's bootstrap, give the machine controller's own
    certificate (``<cluster>-racksmith-machine``) its ACCESS there and
    nothing more."""
    proc, root = cluster_api
    admin = root / "admin-rbac.conf"
    admin.write_text(admin_kubeconfig("demo", endpoint(proc), PKI.ca))
    manifest = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "rbac",
                               "--in-cluster"], capture_output=True, text=True, timeout=60)
    assert manifest.returncode == 0, manifest.stderr
    res = subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(admin), "apply", "-f",
                          "-"], input=manifest.stdout, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    secret = identity_secret("default", "demo", "machine", PKI.ca)
    data = yaml.safe_load(admin_kubeconfig("demo", endpoint(proc), PKI.ca))
    data["users"][0]["user"] = {"client-certificate-data": secret["data"]["tls.crt"],
                                "client-key-data": secret["data"]["tls.key"]}
    machine = root / "machine.conf"
    machine.write_text(yaml.safe_dump(data))
    for verb, resource, allowed in (("update", "nodes", "yes"), ("delete", "nodes", "yes"),
                                    ("create", "pods/eviction", "yes"),
                                    ("create", "clusterroles", "no"),
                                    ("delete", "namespaces", "no")):
        plural, _, sub = resource.partition("/")
        extra = [f"--subresource={sub}"] if sub else []
        got = kubectl(machine, "auth", "can-i", verb, plural, *extra).stdout.strip()
        assert got == allowed, (verb, resource, got)
    res = kubectl(machine, "get", "configmaps", "-A")
    assert res.returncode != 0
    assert 'User "racksmith:machine" cannot list resource "configmaps"' in res.stderr, res.stderr
