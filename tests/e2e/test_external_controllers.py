"""The controllers as their own process bring the demo cluster up (docs/ha.md),
against a management API with kube's features only.

``racksmith up --no-controllers --no-host-restriction`` runs the API server
(authorizing with RBAC alone, as kube-apiserver does: no host restriction),
Ironic and a virtual datacenter of fake-BMC hosts with the controllers'
identities in place; the hosts' real agent processes carry tokens bound to
their user-data Secrets and reach their LCMMachines through the Roles the
Machine controller made for each; ``racksmith controllers`` reaches the
cluster through its own API (``--clusters-dir``, ``--emulated-network``), so
the Nodes register there and none in the management API;
``racksmith controllers`` runs beside it as ``controller-manager`` (a token
from ``kubectl create token``, what the manifests' Deployment gets from its
ServiceAccount), every controller as its own ServiceAccount. The cluster's
machines reach Ready and no component is refused anything. Both processes
are stopped by PID."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.demo import wait_for
from tests.e2e.rack import TIMINGS, Rack, reap
from tests.harness.audit import component_refusals
from tests.harness.process import ROOT, start_server

EXAMPLES = ROOT / "examples" / "cluster"
MACHINES = ["demo-master-1", "demo-master-2", "demo-master-3", "demo-worker-1",
            "demo-worker-2", "demo-infra-1"]
"""The demo cluster of ``make up`` (examples/cluster)."""

pytestmark = [pytest.mark.timeout(900)]


def ready(rack: Rack) -> dict[str, Any] | None:
    items = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
    if all((items.get(n, {}).get("status") or {}).get("phase") == "Ready" for n in MACHINES):
        return items
    return None


def test_racksmith_controllers_brings_the_cluster_up_with_its_own_identities(
        tmp_path: Path) -> None:
    data = tmp_path / "site"
    extra = ["--emulate-hosts", str(len(MACHINES)), "--ironic-port", "0", "--hardware",
             "fake", "--timings", str(TIMINGS), "--no-controllers", "--no-host-restriction",
             "--apply-emulated-hosts",
             "--apply", str(EXAMPLES)]
    server = start_server(data, command="up", extra=extra, timeout=240)
    home = data / "home"
    home.mkdir(exist_ok=True)
    rack = Rack(server, data, home)
    proc = None
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
        log_path = tmp_path / "controllers.log"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "racksmith.cli.main", "controllers", "--kubeconfig",
                 str(own), "--ironic-url", ironic.group(1), "--default-image-url",
                 image.group(1), "--default-image-sha256", image.group(2), "--listen",
                 "127.0.0.1:0", "--timings", str(TIMINGS),
                 "--clusters-dir", str(tmp_path / "clusters"),
                 "--emulated-network", str(data / "emulator" / "network.json")],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

        def up() -> dict[str, Any] | None:
            assert proc is not None and proc.poll() is None, log_path.read_text()[-4000:]
            return ready(rack)

        wait_for(rack, "the machines Ready under racksmith controllers", up, timeout=600)
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
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        rack.stop()
        reap(data)
    assert proc is not None and proc.returncode == 0
