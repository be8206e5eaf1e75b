"""``racksmith up --detach`` returns once the site is ready and leaves it
running in the background; ``racksmith down`` stops everything of the data
dir and says what — also after ``racksmith up`` itself was killed -9 and left
Ironic, the virtual datacenter and the host agents behind (docs/operations.md),
while a cluster's own control plane, on its hosts, kept serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from racksmith import datalock
from tests.e2e.rack import TIMINGS, reap
from tests.harness.process import ROOT, kubectl_path

pytestmark = [pytest.mark.timeout(600)]


def racksmith(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def ours(data: Path) -> list[int]:
    """Live processes whose command line names the data dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if str(data) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _kubectl(kubeconfig: Path, *args: str) -> str:
    res = subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(kubeconfig), *args],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _cluster_kubeconfig(data: Path, tmp_path: Path) -> Path:
    """Cluster alpha's kubeconfig, once the management plane reaches its API."""
    site = data / "kubeconfig"
    deadline = time.monotonic() + 300
    condition = ""
    while time.monotonic() < deadline:
        res = subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(site), "get",
                              "cluster", "alpha", "-o", "jsonpath={.status.conditions[?(@.type"
                              "==\"ControlPlaneReachable\")].status}"],
                             capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        condition = res.stdout.strip()
        if condition == "True":
            break
        time.sleep(2)
    assert condition == "True", f"cluster alpha never reachable ({condition!r})"
    out = racksmith("kubeconfig", "--cluster", "default/alpha", "--data-dir", str(data))
    assert out.returncode == 0, out.stderr
    path = tmp_path / "alpha.kubeconfig"
    path.write_text(out.stdout)
    return path


def _node_ready(kubeconfig: Path, node: str) -> bool:
    res = subprocess.run([str(kubectl_path(33)), "--kubeconfig", str(kubeconfig), "get", "node",
                          node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")]"
                          ".status}"], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)})
    return res.returncode == 0 and res.stdout.strip() == "True"


def _renewed(kubeconfig: Path, node: str) -> str:
    return _kubectl(kubeconfig, "-n", "kube-node-lease", "get", "lease", node, "-o",
                    "jsonpath={.spec.renewTime}")


def _eventually(what: str, check: Callable[[], bool], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout}s")


def test_up_detach_then_down_leaves_nothing_running(tmp_path: Path) -> None:
    data = tmp_path / "site"
    up = ["up", "--detach", "--data-dir", str(data), "--port", "0", "--ironic-port", "0",
          "--emulate-hosts", "2", "--hardware", "fake", "--apply-emulated-hosts",
          "--timings", str(TIMINGS), "--no-console"]
    try:
        started = racksmith(*up)
        assert started.returncode == 0, started.stderr + started.stdout
        assert "readyz: https://127.0.0.1:" in started.stdout, started.stdout
        assert "racksmith down" in started.stdout
        pid = datalock.holder(data)
        assert pid and pid in ours(data)
        assert (data / "logs" / "racksmith-up.log").stat().st_mode & 0o777 == 0o600
        # a second one on the same data dir is refused, naming the first
        again = racksmith(*up)
        assert again.returncode == 1 and f"pid {pid}" in again.stderr, again.stderr
        assert len(ours(data)) > 2  # Ironic, the virtual datacenter, the host agents
        stopped = racksmith("down", "--data-dir", str(data))
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped racksmith (the holder of the data dir's lock) (pid {pid}, SIGTERM)" \
            in stopped.stdout, stopped.stdout
        assert ours(data) == [], stopped.stdout
        assert racksmith("down", "--data-dir", str(data)).stdout.startswith("nothing runs")

        # killed -9, racksmith up leaves its children behind: down finds them.
        # A one-master cluster runs its own control plane on its hosts: it
        # keeps serving without the management process. (A fresh data dir:
        # the hosts above were stopped in the middle of Ironic's cleaning.)
        reap(data)
        data = tmp_path / "site2"
        up[up.index("--data-dir") + 1] = str(data)
        started = racksmith(*up, "--apply", str(ROOT / "examples/cluster/00-release.yaml"),
                            "--apply", str(ROOT / "examples/two-clusters/10-alpha.yaml"))
        assert started.returncode == 0, started.stderr + started.stdout
        pid = datalock.holder(data)
        assert pid
        kubeconfig = _cluster_kubeconfig(data, tmp_path)
        assert _kubectl(kubeconfig, "get", "--raw", "/readyz") == "ok"
        # its Node registers in its own API (the kubelet's node certificate)
        _eventually("Node alpha-master-1 Ready in the cluster's API",
                    lambda: _node_ready(kubeconfig, "alpha-master-1"))
        renewed = _renewed(kubeconfig, "alpha-master-1")
        os.kill(pid, signal.SIGKILL)
        left = [p for p in ours(data) if p != pid]
        assert left, "children of racksmith up outlive it"
        assert _kubectl(kubeconfig, "get", "--raw", "/readyz") == "ok"
        # the kubelet goes on renewing its Lease there: the Node stays Ready
        _eventually("the Lease renewed without the management process",
                    lambda: _renewed(kubeconfig, "alpha-master-1") != renewed)
        assert _node_ready(kubeconfig, "alpha-master-1")
        assert "alpha-master-1" in _kubectl(
            kubeconfig, "-n", "kube-system", "get", "configmap", "kubeadm-config",
            "-o", "jsonpath={.data.ClusterStatus}")
        stopped = racksmith("down", "--data-dir", str(data))
        assert stopped.returncode == 0, stopped.stderr
        assert "Ironic" in stopped.stdout and "virtual datacenter" in stopped.stdout, \
            stopped.stdout
        assert ours(data) == [], stopped.stdout
    finally:
        reap(data)
