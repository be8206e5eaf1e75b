"""``racksmith support-dump`` against a real server: every object, Secret
values redacted (the last-applied annotation too), no token anywhere; and a
dump of a data dir whose server is down still succeeds, saying what it
could not collect."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from tests.harness.process import ServerProc, kubectl_path

SECRET = """apiVersion: v1
kind: Secret
metadata: {name: dumped, namespace: default}
stringData: {password: DumpedSecretValue-4711, other: AnotherValue-0815}
"""


def racksmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=120)


def contents(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name.removeprefix("racksmith-support/"):
                tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def test_the_dump_holds_every_object_and_no_secret(server_process: ServerProc,
                                                    tmp_path: Path) -> None:
    subprocess.run([str(kubectl_path(33)), "apply", "-f", "-"], input=SECRET, text=True,
                   check=True, capture_output=True,
                   env={"KUBECONFIG": str(server_process.kubeconfig), "HOME": str(tmp_path),
                        "PATH": "/usr/bin:/bin"})
    out = tmp_path / "dump.tar.gz"
    res = racksmith("support-dump", "--data-dir", str(server_process.data_dir), "--output",
                    str(out))
    assert res.returncode == 0, res.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    files = contents(out)
    assert "objects/core/secrets.yaml" in files and "objects/core/namespaces.yaml" in files
    assert "objects/rbac.authorization.k8s.io/clusterroles.yaml" in files
    assert {"versions.json", "settings.json", "metrics.txt", "data-dir.txt",
            "errors.txt"} <= set(files)
    assert files["errors.txt"] == ""
    secrets = files["objects/core/secrets.yaml"]
    assert "name: dumped" in secrets and "password: " in secrets and "[REDACTED]" in secrets
    tokens = [line.split(",", 1)[0] for line in
              (server_process.data_dir / "tokens.csv").read_text().splitlines() if line]
    everything = "\n".join(files.values())
    for value in ("DumpedSecretValue-4711", "AnotherValue-0815", *tokens):
        assert value not in everything


def test_a_dump_without_a_server_records_what_it_could_not_collect(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "emulator").mkdir(parents=True)
    (data / "emulator" / "emulator.log").write_text("an emulator line\n")
    (data / "tokens.csv").write_text("offline-token-value-123,racksmith-admin,u,\"g\"\n")
    (data / "emulator" / "other.log").write_text("leaked offline-token-value-123 here\n")
    out = tmp_path / "dump.tar.gz"
    res = racksmith("support-dump", "--data-dir", str(data), "--output", str(out),
                    "--kubeconfig", str(tmp_path / "missing.kubeconfig"))
    assert res.returncode == 0, res.stderr
    files = contents(out)
    assert files["errors.txt"].startswith("API:") or "objects" in files["errors.txt"]
    assert "an emulator line" in files["logs/emulator/emulator.log"]
    assert "offline-token-value-123" not in "\n".join(files.values())
