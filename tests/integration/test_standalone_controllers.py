"""``racksmith controllers``: the controllers as their own process against
``racksmith apiserver``, with the identities ``racksmith rbac`` declares —
the process as ``controller-manager`` (a token from ``kubectl create
token``), each controller as its own ServiceAccount through TokenRequest,
leader election in ``racksmith-system``, ``/readyz`` on its own port — and
stopped by SIGTERM (its PID). A ControlPlaneBackup is answered there too:
Failed, with the way to back the cluster's etcd up."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.harness.audit import component_refusals
from tests.harness.process import ROOT, ServerProc, kubectl_path, stop

pytestmark = [pytest.mark.timeout(180)]

SUBNET = """apiVersion: ipam.racksmith.io/v1alpha1
kind: Subnet
metadata: {name: standalone-net, namespace: default}
spec: {cidr: 10.77.0.0/24, includeRanges: ["10.77.0.10-10.77.0.19"]}
"""
BACKUP = """apiVersion: lcm.racksmith.io/v1alpha1
kind: ControlPlaneBackup
metadata: {name: standalone-backup}
"""


def kubectl(server: ServerProc, *args: str, input_text: str | None = None,
            kubeconfig: Path | None = None) -> str:
    res = subprocess.run([str(kubectl_path(33)), *args], input=input_text, capture_output=True,
                         text=True, timeout=60,
                         env={"KUBECONFIG": str(kubeconfig or server.kubeconfig),
                              "HOME": str(server.data_dir), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, f"kubectl {' '.join(args)}: {res.stderr}"
    return res.stdout


def test_the_controllers_run_as_their_own_process_with_their_own_identities(
        server_process: ServerProc, tmp_path: Path) -> None:
    rbac = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "rbac"],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    kubectl(server_process, "apply", "-f", "-", input_text=rbac)
    token = kubectl(server_process, "create", "token", "controller-manager", "-n",
                    "racksmith-system", "--duration", "2h").strip()
    config = yaml.safe_load(server_process.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    own = tmp_path / "controller-manager.kubeconfig"
    own.write_text(yaml.safe_dump(config))
    own.chmod(0o600)
    log_path = tmp_path / "controllers.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "racksmith.cli.main", "controllers", "--kubeconfig",
             str(own), "--listen", "127.0.0.1:0"], stdout=out, stderr=subprocess.STDOUT,
            cwd=ROOT)
    try:
        port = 0
        deadline = time.monotonic() + 60
        while not port:
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            found = re.search(r"metrics=127\.0\.0\.1:(\d+)", log_path.read_text())
            port = int(found.group(1)) if found else 0
            time.sleep(0.2)
        ready = ""
        while ready != "ok":
            assert time.monotonic() < deadline + 60, log_path.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    ready = r.read().decode()
            except OSError:
                time.sleep(0.3)
        # the subnet controller acts, as itself
        kubectl(server_process, "apply", "-f", "-", input_text=SUBNET)
        status: dict[str, object] = {}
        while not status.get("allocatable"):
            assert time.monotonic() < deadline + 120, log_path.read_text()[-3000:]
            time.sleep(0.3)
            status = json.loads(kubectl(server_process, "get", "subnet", "standalone-net",
                                        "-o", "json")).get("status") or {}
        audit = subprocess.run(
            [sys.executable, "-m", "racksmith.cli.main", "audit", "--user",
             "system:serviceaccount:racksmith-system:subnet-controller", "--data-dir",
             str(server_process.data_dir)], capture_output=True, text=True, timeout=60)
        assert "subnets/status" in audit.stdout, audit.stdout
        # a ControlPlaneBackup is answered, as the backup controller: the
        # API's objects are etcd's on a real cluster, so it fails saying how
        kubectl(server_process, "create", "-f", "-", input_text=BACKUP)
        backup: dict[str, object] = {}
        while backup.get("phase") != "Failed":
            assert time.monotonic() < deadline + 120, log_path.read_text()[-3000:]
            time.sleep(0.3)
            backup = json.loads(kubectl(server_process, "get", "controlplanebackup",
                                        "standalone-backup", "-o", "json")).get("status") or {}
        assert "etcdctl snapshot save" in str(backup.get("message")), backup
        audit = subprocess.run(
            [sys.executable, "-m", "racksmith.cli.main", "audit", "--user",
             "system:serviceaccount:racksmith-system:backup-controller", "--data-dir",
             str(server_process.data_dir)], capture_output=True, text=True, timeout=60)
        assert "controlplanebackups/status" in audit.stdout, audit.stdout
        # its finalizer goes with the controller's help (nothing to remove)
        kubectl(server_process, "delete", "controlplanebackup", "standalone-backup")
        refused = component_refusals(server_process.data_dir)
        assert refused == [], refused
        lease = json.loads(kubectl(server_process, "get", "lease", "racksmith-controllers",
                                   "-n", "racksmith-system", "-o", "json"))
        assert lease["spec"]["holderIdentity"]
    finally:
        stop(proc, timeout=30)
    assert proc.returncode == 0, log_path.read_text()[-3000:]
    kubectl(server_process, "delete", "subnet", "standalone-net")
