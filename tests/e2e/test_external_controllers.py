"""The controllers as their own processes bring the demo cluster up (docs/ha.md),
against a management API with kube's features only, and a standby takes over
when the leader is killed -9 while hosts provision ("What is safe to kill").

``racksmith up --no-controllers --no-host-restriction`` runs the API server
(authorizing with RBAC alone, as kube-apiserver does: no host restriction),
Ironic and a virtual datacenter of fake-BMC hosts with the controllers'
identities in place; the hosts' real agent processes carry tokens bound to
their user-data Secrets and reach their LCMMachines through the Roles the
Machine controller made for each. Two ``racksmith controllers`` processes
run beside it as ``controller-manager`` (a token from ``kubectl create
token``, what the manifests' Deployment gets from its ServiceAccount), every
controller as its own ServiceAccount, each reaching the cluster through its
own API (``--clusters-dir``, ``--emulated-network``), so the Nodes register
there and none in the management API.

The first leads; once a host deploys it is killed -9. The standby takes the
Lease only once it expired (never two leaders), the cluster's machines reach
Ready under it, no host is deployed twice — counted in Ironic's own log (a
deploy starts when a node moves to ``deploying`` from ``available``) — and
no component is refused anything. Every process is stopped by PID."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.demo import wait_for
from tests.e2e.rack import TIMINGS, Rack, reap
from tests.harness.audit import component_refusals
from tests.harness.process import ROOT, start_server, stop

EXAMPLES = ROOT / "examples" / "cluster"
MACHINES = ["demo-master-1", "demo-master-2", "demo-master-3", "demo-worker-1",
            "demo-worker-2", "demo-infra-1"]
"""The demo cluster of ``make up`` (examples/cluster)."""
DEPLOY_STARTS = re.compile(r'Node (\S+) moved to provision state "deploying" from state '
                           r'"available"')

pytestmark = [pytest.mark.timeout(900)]


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def ready(rack: Rack) -> dict[str, Any] | None:
    items = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
    if all((items.get(n, {}).get("status") or {}).get("phase") == "Ready" for n in MACHINES):
        return items
    return None


def test_racksmith_controllers_bring_the_cluster_up_and_the_standby_takes_over(
        tmp_path: Path) -> None:
    data = tmp_path / "site"
    extra = ["--emulate-hosts", str(len(MACHINES)), "--ironic-port", "0", "--hardware",
             "fake", "--timings", str(TIMINGS), "--no-controllers", "--no-host-restriction",
             "--apply-emulated-hosts", "--apply", str(EXAMPLES)]
    server = start_server(data, command="up", extra=extra, timeout=240)
    home = data / "home"
    home.mkdir(exist_ok=True)
    rack = Rack(server, data, home)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        text = server.log()
        ironic = re.search(r"^ironic: (\S+)$", text, re.M)
        image = re.search(r"^default-image: (\S+) (\S+)$", text, re.M)
        assert ironic and image, text[-3000:]
        token = rack.kubectl("create", "token", "controller-manager", "-n",
                             "racksmith-system", "--duration", "2h").stdout.strip()
        config = yaml.safe_load(server.kubeconfig.read_text())
        config["users"][0]["user"] = {"token": token}
        own = tmp_path / "controller-manager.kubeconfig"
        own.write_text(yaml.safe_dump(config))

        def start(name: str) -> subprocess.Popen[bytes]:
            """A replica of the controllers' Deployment: its own client keys dir."""
            with (tmp_path / f"controllers-{name}.log").open("wb") as out:
                return subprocess.Popen(
                    [sys.executable, "-m", "racksmith.cli.main", "controllers",
                     "--kubeconfig", str(own), "--ironic-url", ironic.group(1),
                     "--default-image-url", image.group(1), "--default-image-sha256",
                     image.group(2), "--listen", "127.0.0.1:0", "--timings", str(TIMINGS),
                     "--clusters-dir", str(tmp_path / f"clusters-{name}"),
                     "--emulated-network", str(data / "emulator" / "network.json")],
                    stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

        def lease() -> dict[str, Any]:
            res = rack.kubectl("get", "lease", "racksmith-controllers", "-n",
                               "racksmith-system", "-o", "json", check=False)
            return yaml.safe_load(res.stdout)["spec"] if res.returncode == 0 else {}

        ironic_log = data / "ironic" / "ironic.log"

        def deploys() -> Counter[str]:
            text = ironic_log.read_text(errors="replace") if ironic_log.exists() else ""
            return Counter(DEPLOY_STARTS.findall(text))

        procs.append(start("a"))
        first = wait_for(rack, "the first process leading", lambda: lease().get(
            "holderIdentity"), timeout=120)
        procs.append(start("b"))  # the standby
        wait_for(rack, "a host deploying", lambda: bool(deploys()), timeout=300)
        before = lease()
        assert before["holderIdentity"] == first
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        killed_at = time.time()

        def new_holder() -> dict[str, Any] | None:
            spec = lease()
            return spec if spec.get("holderIdentity") not in (None, first) else None

        after = wait_for(rack, "the standby holding the Lease", new_holder, timeout=120)
        # Never two leaders: the standby took the Lease only once the leader's last
        # renewal had expired (it renews at or after ``before``'s renewTime; a
        # second of clock rounding). How soon it takes over is measured, not
        # asserted here (a loaded machine only makes it later).
        gap = (_time(after["acquireTime"]) - _time(before["renewTime"])).total_seconds()
        assert gap >= before["leaseDurationSeconds"] - 1, (gap, before, after)
        assert _time(after["acquireTime"]).timestamp() >= killed_at - 1
        assert after["leaseTransitions"] == before.get("leaseTransitions", 0) + 1, after

        def up() -> dict[str, Any] | None:
            assert procs[1].poll() is None, (tmp_path / "controllers-b.log").read_text()[-4000:]
            return ready(rack)

        wait_for(rack, "the machines Ready under the standby", up, timeout=600)
        counted = deploys()
        assert len(counted) == len(MACHINES), counted
        assert set(counted.values()) == {1}, f"a host deployed twice: {counted}"
        refused = component_refusals(data)
        assert refused == [], refused
        assert rack.get("nodes")["items"] == []  # the cluster's own API holds them
        writers = subprocess.run(
            [sys.executable, "-m", "racksmith.cli.main", "audit", "--user",
             "system:serviceaccount:racksmith-system:machine-controller", "--data-dir",
             str(data)], capture_output=True, text=True, timeout=60).stdout
        assert "machines" in writers
        # every host agent worked as its own ServiceAccount, by its Role alone
        agents = subprocess.run(
            [sys.executable, "-m", "racksmith.cli.main", "audit", "--user",
             "system:serviceaccount:default:racksmith-host-demo-worker-1", "--data-dir",
             str(data)], capture_output=True, text=True, timeout=60).stdout
        assert "lcmmachines/status" in agents and "racksmith:agents" not in agents
    finally:
        for proc in procs:
            stop(proc, timeout=30)
        rack.stop()
        reap(data)
    assert procs[1].returncode == 0
