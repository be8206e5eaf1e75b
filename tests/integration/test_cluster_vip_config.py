"""The keepalived configuration of a 3-master cluster, checked by Debian's
own ``keepalived --config-test``: one configuration per control-plane
machine, each checked inside a network namespace this test makes, where the
machine's interface (``eno1``, one end of a veth pair) exists. The
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

from racksmith.controlplane.vrrp import Peer, new_auth_pass, render_keepalived

KEEPALIVED = shutil.which("keepalived") or "/usr/sbin/keepalived"


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


def test_each_masters_keepalived_config_passes_config_test(namespaces: list[str],
                                                          tmp_path: Path) -> None:
    peers = [Peer(f"demo-master-{i}", f"10.10.0.10{i}") for i in (1, 2, 3)]
    auth = new_auth_pass()
    for me in peers:
        name = f"rs-vip-{uuid.uuid4().hex[:8]}"
        assert _ip("netns", "add", name).returncode == 0
        namespaces.append(name)
        res = _ip("-n", name, "link", "add", "eno1", "type", "veth", "peer", "name", "eno1-p")
        assert res.returncode == 0, res.stderr
        config = tmp_path / f"{me.name}.conf"
        config.write_text(render_keepalived(
            cluster="demo", me=me, peers=peers, vip="10.10.0.5", prefix_length=24,
            interface="eno1", router_id=51, auth_pass=auth, api_port=6443,
            ca_file="/etc/kubernetes/pki/ca.crt"))
        check = subprocess.run(["ip", "netns", "exec", name, KEEPALIVED, "--config-test",
                                "-f", str(config)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr
    assert len(namespaces) == 3
