"""``racksmith up --store etcd --etcd-members 3 --apiserver-replicas 2``
brings the demo cluster to Ready (docs/ha.md): a local 3-member etcd with
TLS, two API server replicas on it (one in ``racksmith up``, one process of
its own), the controllers with leader election. The kubeconfig names a
context per replica and both serve the same objects; a ControlPlaneBackup
fails saying to use ``etcdctl snapshot save``; once ``racksmith up``
is stopped, no process of the data dir is left running."""

from __future__ import annotations

import json
import os
import signal
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

pytestmark = [pytest.mark.timeout(900)]


def ready(rack: Rack, *context: str) -> dict[str, Any] | None:
    items = {m["metadata"]["name"]: m for m in rack.get("machines", *context)["items"]}
    if all((items.get(n, {}).get("status") or {}).get("phase") == "Ready" for n in MACHINES):
        return items
    return None


BACKUP = """\
apiVersion: lcm.racksmith.io/v1alpha1
kind: ControlPlaneBackup
metadata:
  name: before-upgrade
spec: {}
"""


def failed(rack: Rack, name: str) -> dict[str, Any] | None:
    backup: dict[str, Any] = rack.get("controlplanebackup", name)
    return backup if (backup.get("status") or {}).get("phase") == "Failed" else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_on_etcd_with_two_replicas_brings_the_cluster_up(tmp_path: Path) -> None:
    data = tmp_path / "site"
    extra = ["--store", "etcd", "--etcd-members", "3", "--apiserver-replicas", "2",
             "--emulate-hosts", str(len(MACHINES)), "--ironic-port", "0", "--hardware", "fake",
             "--timings", str(TIMINGS), "--apply-emulated-hosts", "--apply", str(EXAMPLES)]
    server = start_server(data, command="up", extra=extra, timeout=300)
    home = data / "home"
    home.mkdir(exist_ok=True)
    rack = Rack(server, data, home)
    pids: list[int] = []
    try:
        config = yaml.safe_load(server.kubeconfig.read_text())
        contexts = [c["name"] for c in config["contexts"]]
        assert contexts == ["racksmith", "racksmith-r1"], contexts
        members = json.loads((data / "etcd" / "cluster.json").read_text())
        assert len(members["members"]) == 3
        pids = [int(p.read_text()) for p in sorted((data / "etcd").glob("member-*.pid"))]
        pids += [int(p.read_text()) for p in (data / "replicas").glob("r*.pid")]
        assert len(pids) == 4 and all(_alive(p) for p in pids)
        wait_for(rack, "the demo machines Ready on etcd", lambda: ready(rack), timeout=600)
        # the other replica serves the same objects
        assert ready(rack, "--context", "racksmith-r1") is not None
        # a ControlPlaneBackup cannot copy etcd: it fails saying how to back up
        rack.kubectl("create", "-f", "-", input_text=BACKUP)
        backup = wait_for(rack, "the ControlPlaneBackup on etcd Failed",
                          lambda: failed(rack, "before-upgrade"), timeout=120)
        assert "etcdctl snapshot save" in backup["status"]["message"]
        assert "file" not in backup["status"]
        assert component_refusals(data) == []
    finally:
        server.kill(signal.SIGTERM, timeout=60)
        left = [p for p in pids if _alive(p)]
        reap(data)
    assert left == [], f"processes of the data dir still running: {left}"
