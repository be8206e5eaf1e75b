"""A cluster's endpoint through a real HAProxy (Debian's), rendered by
``racksmith.controlplane.haproxy``: ``haproxy -c`` accepts the config of a
3-master cluster; then HAProxy on loopback fronts two API servers serving
with the cluster's PKI (``racksmith apiserver``), health-checked on
``/readyz`` against the cluster CA. The cluster's admin kubeconfig reaches
the API through it, and still does after one API server is killed with
SIGKILL. How long the endpoint answered nothing is printed, never asserted.
Every process is stopped by PID."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from racksmith.controlplane.endpoint import Endpoint
from racksmith.controlplane.haproxy import Backend, render_haproxy
from racksmith.controlplane.kubeconfig import admin_kubeconfig
from racksmith.controlplane.pki import ClusterPki, issue_serving
from tests.harness.process import ServerProc, kubectl_path, start_server

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
PKI = ClusterPki.generate()
"""Debian's haproxy, which `make test` installs (DEV_DEBS): missing, these
tests fail rather than pass without it."""


def test_the_config_of_a_three_master_cluster_passes_haproxy_check(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(PKI.ca.cert_pem)
    config = render_haproxy(bind_host="10.10.0.5", bind_port=6443, backends=[
        Backend(f"demo-master-{i}", f"10.10.0.10{i}", 6443) for i in (1, 2, 3)],
        ca_file=str(tmp_path / "ca.crt"))
    (tmp_path / "haproxy.cfg").write_text(config)
    res = subprocess.run([HAPROXY, "-c", "-f", str(tmp_path / "haproxy.cfg")],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Configuration file is valid" in res.stdout + res.stderr
    with pytest.raises(ValueError):
        render_haproxy(bind_host="127.0.0.1", bind_port=1, backends=[], ca_file="x")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def control_plane(tmp_path: Path) -> Iterator[tuple[list[ServerProc], subprocess.Popen[bytes],
                                                   Path]]:
    """Two API servers on the cluster PKI and HAProxy in front; stopped by PID."""
    pki = tmp_path / "pki"
    pki.mkdir(mode=0o700)
    (pki / "ca.crt").write_bytes(PKI.ca.cert_pem)
    serving = issue_serving(PKI.ca, "kube-apiserver", ["127.0.0.1"])
    (pki / "apiserver.crt").write_bytes(serving.cert_pem)
    (pki / "apiserver.key").write_bytes(serving.key_pem)
    servers: list[ServerProc] = []
    haproxy: subprocess.Popen[bytes] | None = None
    try:
        for i in (1, 2):
            servers.append(start_server(tmp_path / f"master-{i}", command="apiserver", extra=[
                "--tls-cert-file", str(pki / "apiserver.crt"),
                "--tls-private-key-file", str(pki / "apiserver.key"),
                "--client-ca-file", str(pki / "ca.crt")]))
        port = _free_port()
        config = render_haproxy(
            bind_host="127.0.0.1", bind_port=port, ca_file=str(pki / "ca.crt"),
            check_interval="300ms", backends=[
                Backend(f"master-{i}", "127.0.0.1", int(urlsplit(s.url).port or 0))
                for i, s in enumerate(servers, 1)])
        (tmp_path / "haproxy.cfg").write_text(config)
        log = (tmp_path / "haproxy.log").open("wb")
        haproxy = subprocess.Popen([HAPROXY, "-db", "-f", str(tmp_path / "haproxy.cfg")],
                                   stdout=log, stderr=subprocess.STDOUT)
        kubeconfig = tmp_path / "admin.conf"
        kubeconfig.write_text(admin_kubeconfig("demo", Endpoint("127.0.0.1", port), PKI.ca))
        yield servers, haproxy, kubeconfig
    finally:
        if haproxy is not None:
            haproxy.kill()
            haproxy.wait(10)
        for server in servers:
            server.kill()


def _kubectl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(config),
                           "--request-timeout=5s", *args],
                          capture_output=True, text=True, timeout=60)


def _answers(config: Path, limit: float = 60.0) -> float:
    """Seconds until ``kubectl get namespaces`` through the endpoint succeeds."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if _kubectl(config, "get", "namespaces", "-o", "name").returncode == 0:
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"the endpoint did not answer within {limit}s")


def test_the_endpoint_survives_an_api_server_killed(
        control_plane: tuple[list[ServerProc], subprocess.Popen[bytes], Path]) -> None:
    servers, haproxy, kubeconfig = control_plane
    _answers(kubeconfig)
    assert haproxy.poll() is None
    servers[0].kill(9)
    gap = _answers(kubeconfig)
    for _ in range(5):  # every request now lands on the live server
        res = _kubectl(kubeconfig, "get", "namespaces", "-o", "name")
        assert res.returncode == 0, res.stderr
        assert "namespace/kube-system" in res.stdout.split()
    print(f"endpoint answered again {gap:.2f}s after an API server was killed")
