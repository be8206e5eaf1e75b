"""``racksmith crds`` is valid apiextensions/v1 and registers every kind when
applied with kubectl to a fresh embedded server that has no CRDs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

from racksmith.kinds.registry import ALL_KINDS
from tests.harness.api import serving
from tests.harness.process import ROOT, kubectl_path


def _crds_output() -> str:
    res = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "crds"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=60)
    return res.stdout


def test_crds_output_is_valid_apiextensions_v1() -> None:
    docs = [d for d in yaml.safe_load_all(_crds_output()) if d]
    assert len(docs) == len(ALL_KINDS)
    for doc in docs:
        assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
        assert doc["kind"] == "CustomResourceDefinition"
        kubernetes_validate.validate(doc, "1.33", strict=True)


async def _kubectl(kubeconfig: Path, home: Path, *args: str,
                   stdin: str | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(kubectl_path(33)), *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"KUBECONFIG": str(kubeconfig), "HOME": str(home), "PATH": "/usr/bin:/bin"})
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_crds_register_kinds_on_a_fresh_server(tmp_path: Path) -> None:
    manifest = _crds_output()
    # no bootstrap: a fresh server knows only built-ins
    async with serving(tmp_path / "data", with_crds=False) as server:
        home = tmp_path / "home"
        home.mkdir()
        rc, out, _ = await _kubectl(server.kubeconfig_path, home, "api-resources")
        assert rc == 0 and "baremetalhosts" not in out
        rc, out, err = await _kubectl(server.kubeconfig_path, home, "apply", "-f", "-",
                                      stdin=manifest)
        assert rc == 0, err
        assert out.count("created") == len(ALL_KINDS)
        rc, out, err = await _kubectl(server.kubeconfig_path, home, "wait", "--for",
                                      "condition=Established", "crd", "--all",
                                      "--timeout=60s")
        assert rc == 0, err
        rc, out, _ = await _kubectl(server.kubeconfig_path, home, "api-resources")
        for kind in ALL_KINDS:
            assert f" {kind.info.kind}\n" in out or out.rstrip().endswith(kind.info.kind), (
                kind.info.kind)
        rc, out, err = await _kubectl(server.kubeconfig_path, home, "get", "volumes")
        assert rc == 0, err
