"""A whole emulated rack for end-to-end tests: ``racksmith up --emulate-hosts N``
as a real process (with real Ironic, sushy-tools and the emulated agent), and
kubectl/Ironic helpers to drive and observe it. Every process the rack
starts carries its data dir on its command line, so teardown can reap them
all by that, whatever state they were left in."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.harness.process import ServerProc, kubectl_path, start_server


def reap(data_dir: Path) -> None:
    """Kill every process whose command line names ``data_dir``."""
    needle = str(data_dir)
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Rack:
    server: ServerProc
    data_dir: Path
    home: Path
    kubeconfig: Path | None = None
    """The kubeconfig kubectl uses (None: the management API's)."""

    def cluster(self, ref: str = "default/demo") -> Rack:
        """This rack seen through cluster ``ref``'s own API (its kubeconfig from
        ``racksmith kubeconfig --cluster``): where its Nodes, pods, PDBs,
        PersistentVolumes, Volumes, maintenance requests and locks live."""
        path = self.home / f"{ref.rsplit('/', 1)[-1]}.kubeconfig"
        if not path.exists():
            out = subprocess.run(
                [sys.executable, "-m", "racksmith.cli.main", "kubeconfig", "--cluster", ref,
                 "--data-dir", str(self.data_dir)], capture_output=True, text=True, timeout=60,
                check=True)
            path.write_text(out.stdout)
            path.chmod(0o600)
        return replace(self, kubeconfig=path)

    def management(self) -> Rack:
        """This rack seen through the management API (Machines, hosts, Clusters)."""
        return replace(self, kubeconfig=None)

    @property
    def ports(self) -> dict[str, int]:
        return {k: int(v) for k, v in json.loads((self.data_dir / "ports.json").read_text())
                .items()}

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([str(kubectl_path(33)), *args], input=input_text,
                             capture_output=True, text=True, timeout=timeout,
                             env={"KUBECONFIG": str(self.kubeconfig or self.server.kubeconfig),
                                  "HOME": str(self.home), "PATH": "/usr/bin:/bin"})
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {res.stderr}\n"
                                 f"{self.server.log()[-4000:]}")
        return res

    def racksmith(self, *args: str, timeout: float = 120) -> str:
        """``racksmith ARGS`` against this rack (its kubeconfig); stdout."""
        res = subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args,
                              "--kubeconfig", str(self.kubeconfig or self.server.kubeconfig)],
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise AssertionError(f"racksmith {' '.join(args)}: {res.stderr}")
        return res.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def hosts(self) -> dict[str, dict[str, Any]]:
        return {h["metadata"]["name"]: h for h in self.get("baremetalhosts")["items"]}

    def wait_hosts(self, names: list[str], pred: Callable[[dict[str, Any]], bool],
                   timeout: float = 300, what: str = "") -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        hosts: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            hosts = self.hosts()
            if all(n in hosts and pred(hosts[n]) for n in names):
                return hosts
            time.sleep(1.0)
        summary = {n: (hosts.get(n, {}).get("status", {}).get("provisioning", {}).get("state"),
                       hosts.get(n, {}).get("status", {}).get("errorMessage"))
                   for n in names}
        raise AssertionError(f"hosts not {what} in {timeout}s: {summary}\n"
                             f"{self.server.log()[-4000:]}")

    def ironic(self, path: str) -> tuple[int, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.ports['ironic']}{path}",
                                     headers={"X-OpenStack-Ironic-API-Version": "1.95"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, None

    def agent_status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['agent']}/status",
                                    timeout=10) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def events_for(self, name: str) -> list[dict[str, Any]]:
        items = self.get("events", "--field-selector", f"involvedObject.name={name}")["items"]
        return list(items)

    def stop(self) -> None:
        try:
            self.server.kill(signal.SIGTERM, timeout=60)
        finally:
            reap(self.data_dir)


def state(host: dict[str, Any]) -> str | None:
    return host.get("status", {}).get("provisioning", {}).get("state")


TIMINGS = Path(__file__).resolve().parent / "timings.yaml"
"""The racks' short controller waits (``racksmith up --timings``)."""


def start_rack(data_dir: Path, hosts: int, extra: list[str] | None = None, *,
               hardware: str = "redfish") -> Rack:
    """``racksmith up --emulate-hosts N --hardware H --timings tests/e2e/timings.yaml``
    (redfish: sushy-tools BMCs and virtual media; fake: the instant fake BMCs)."""
    server = start_server(data_dir, command="up",
                          extra=["--emulate-hosts", str(hosts), "--ironic-port", "0",
                                 "--hardware", hardware, "--timings", str(TIMINGS),
                                 *(extra or [])], timeout=240)
    home = data_dir / "home"
    home.mkdir(exist_ok=True)
    return Rack(server, data_dir, home)
