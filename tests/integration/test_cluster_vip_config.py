"""The keepalived and HAProxy configurations of a 3-master cluster, as the
Machine controller's state items carry them, checked by Debian's own
``keepalived --config-test`` and ``haproxy -c``: one configuration per
control-plane machine, each checked inside a network namespace this test
makes, where the machine's interface (``eno1``, one end of a veth pair) exists. The
namespaces are removed at the end, also when a check fails. Needs root
(CAP_NET_ADMIN) and keepalived, which ``make test`` installs: without them
the test fails saying so, never passes silently."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from racksmith.controlplane.pki import new_ca
from racksmith.controlplane.vrrp import Peer, new_auth_pass, render_keepalived
from tests.harness.apivip import rendered

KEEPALIVED = shutil.which("keepalived") or "/usr/sbin/keepalived"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    assert os.geteuid() == 0, "network namespaces need root (CAP_NET_ADMIN), as CI has"
    assert Path(KEEPALIVED).exists(), "keepalived is missing: `make test` installs it"
    made: list[str] = []
    try:
        yield made
    finally:
        for name in made:
            _ip("netns", "delete", name)


def test_each_masters_rendered_keepalived_and_haproxy_pass_their_checks(
        namespaces: list[str], tmp_path: Path) -> None:
    """The files the Machine controller's state items carry for each master
    (``planners.apivip``), with the VRRP password file the user data
    writes: ``keepalived --config-test`` in the master's namespace, where its
    interface exists, and ``haproxy -c``."""
    assert Path(HAPROXY).exists(), "haproxy is missing: `make test` installs it"
    ca = tmp_path / "ca.crt"
    ca.write_bytes(new_ca("kubernetes").cert_pem)
    masters = {f"demo-master-{i}": f"10.10.0.10{i}" for i in (1, 2, 3)}
    configs = rendered(tmp_path, masters=masters, vip="10.10.0.5", cidr="10.10.0.0/24",
                       router_id=51, auth_pass=new_auth_pass(), ca_file=ca)
    for me in masters:
        name = _namespace(namespaces)
        check = subprocess.run(["ip", "netns", "exec", name, KEEPALIVED, "--config-test",
                                "-f", str(configs[me].keepalived)],
                               capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr
        proxy = subprocess.run([HAPROXY, "-c", "-f", str(configs[me].haproxy)],
                               capture_output=True, text=True, timeout=30)
        assert proxy.returncode == 0, proxy.stdout + proxy.stderr
        assert "WARNING" not in proxy.stdout + proxy.stderr, proxy.stdout + proxy.stderr
    assert len(namespaces) == 3


def test_a_config_with_the_password_inline_passes_too(namespaces: list[str],
                                                      tmp_path: Path) -> None:
    peers = [Peer(f"demo-master-{i}", f"10.10.0.10{i}") for i in (1, 2, 3)]
    name = _namespace(namespaces)
    config = tmp_path / "inline.conf"
    config.write_text(render_keepalived(
        cluster="demo", me=peers[0], peers=peers, vip="10.10.0.5", prefix_length=24,
        interface="eno1", router_id=51, auth_pass=new_auth_pass(), api_port=6443,
        ca_file="/etc/kubernetes/pki/ca.crt"))
    check = subprocess.run(["ip", "netns", "exec", name, KEEPALIVED, "--config-test",
                            "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


def _namespace(namespaces: list[str]) -> str:
    """A namespace with an ``eno1`` (one end of a veth pair), removed at the end."""
    name = f"rs-vip-{uuid.uuid4().hex[:8]}"
    assert _ip("netns", "add", name).returncode == 0
    namespaces.append(name)
    res = _ip("-n", name, "link", "add", "eno1", "type", "veth", "peer", "name", "eno1-p")
    assert res.returncode == 0, res.stderr
    return name
