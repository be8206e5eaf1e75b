"""Start and stop a real ``racksmith`` server process for tests.

Owns: the one way tests run the server as its own process (port 0, a
temporary data dir), learn its URL and credentials from the kubeconfig it
writes, and stop it by PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")


@dataclass
class ServerProc:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    kubeconfig: Path
    url: str
    token: str
    ca_path: Path | None
    log_path: Path

    def kill(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        return stop(self.proc, sig, timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM,
         timeout: float = 15.0) -> int:
    """Stop a process a test started: ``sig`` (a graceful stop), SIGKILL if it
    has not exited within ``timeout``; its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def start_server(data_dir: Path, *, command: str = "up", extra: list[str] | None = None,
                 timeout: float = 60.0, prefix: list[str] | None = None) -> ServerProc:
    """``racksmith COMMAND`` on ``data_dir`` (``--port 0`` unless ``extra``
    names another), ready; ``prefix`` runs it under another command (``ip
    netns exec NS``, which execs: the PID is the server's)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = data_dir / "kubeconfig"
    if kubeconfig.exists():
        kubeconfig.unlink()
    log_path = data_dir / f"server-{int(time.time() * 1000)}.log"
    args = [*(prefix or []), sys.executable, "-m", "racksmith.cli.main", command,
            "--data-dir", str(data_dir), "--port", "0", *(extra or [])]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log_path.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n"
                               f"{log_path.read_text(errors='replace')}")
        text = log_path.read_text(errors="replace")
        if "readyz:" in text and kubeconfig.exists():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"server not ready in {timeout}s:\n{log_path.read_text()}")
    cfg = yaml.safe_load(kubeconfig.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ca_path = None
    if "certificate-authority-data" in cluster:
        ca_path = data_dir / "pki" / "ca.crt"
    return ServerProc(proc, data_dir, kubeconfig, cluster["server"], user.get("token", ""),
                      ca_path, log_path)


def kubectl_path(minor: int) -> Path:
    return KUBECTL_DIR / f"kubectl.1.{minor}"
