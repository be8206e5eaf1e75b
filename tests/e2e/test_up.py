"""``racksmith up`` as a user runs it: one process, TLS, kubeconfig, readyz,
metrics, ``--apply``, and a clean stop on SIGTERM and SIGINT."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.harness.process import ServerProc, kubectl_path, start_server

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: rack-a
---
apiVersion: storage.racksmith.io/v1alpha1
kind: Volume
metadata:
  name: vol-a
spec:
  nodeName: node-1
  storageClassName: local
  sparseLoopDevice:
    size: 1Gi
"""


def _get(server: ServerProc, path: str, token: bool = True) -> tuple[int, bytes]:
    assert server.ca_path is not None
    ctx = ssl.create_default_context(cafile=str(server.ca_path))
    req = urllib.request.Request(server.url + path)
    if token:
        req.add_header("Authorization", f"Bearer {server.token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_up_serves_applies_and_stops_cleanly(tmp_path: Path, stop_signal: int) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "demo.yaml").write_text(MANIFEST)
    server = start_server(tmp_path / "data", command="up",
                          extra=["--apply", str(manifests), "--no-ironic"])
    try:
        assert server.url.startswith("https://127.0.0.1:")
        assert _get(server, "/readyz")[0] == 200
        assert _get(server, "/api/v1/namespaces", token=False)[0] == 401
        code, body = _get(server, "/metrics")
        assert code == 200 and b"racksmith_leader_is_leader" in body
        out = subprocess.run(
            [str(kubectl_path(33)), "get", "volumes", "-o", "json"], capture_output=True,
            text=True, timeout=60, check=True,
            env={"KUBECONFIG": str(server.kubeconfig), "HOME": str(tmp_path),
                 "PATH": "/usr/bin:/bin"})
        names = [i["metadata"]["name"] for i in json.loads(out.stdout)["items"]]
        assert names == ["vol-a"]
        lease = subprocess.run(
            [str(kubectl_path(33)), "get", "lease", "-n", "kube-system", "-o", "json"],
            capture_output=True, text=True, timeout=60, check=True,
            env={"KUBECONFIG": str(server.kubeconfig), "HOME": str(tmp_path),
                 "PATH": "/usr/bin:/bin"})
        holders = [i["spec"].get("holderIdentity") for i in json.loads(lease.stdout)["items"]]
        assert any(holders)
    finally:
        rc = server.kill(stop_signal)
    assert rc == 0, server.log()[-3000:]
    assert "stopping" in server.log()
