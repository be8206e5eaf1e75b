"""Network namespaces a test makes, and the processes it runs in them.

Owns :class:`Segment`: one L2 segment (a bridge in a namespace of its own)
and hosts on it (a namespace each, its ``eno1`` one end of a veth pair
whose other end is on the bridge), with IPv4 addresses the test chooses.
Traffic stays inside these namespaces. :meth:`Segment.run` starts a
process inside a host (``ip netns exec``, which execs: the PID is the
process's own). :meth:`Segment.close` kills every process started here by
PID (and whatever else runs in its namespaces, by ``ip netns pids``)
and deletes every namespace, also when the test failed (use it as a
context manager). Needs root (CAP_NET_ADMIN): :func:`require_root` says so
loudly instead of letting a test pass without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path
from types import TracebackType


def require_root() -> None:
    assert os.geteuid() == 0, "network namespaces need root (CAP_NET_ADMIN), as CI has"


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")


class Segment:
    """A bridge and the hosts on it (see the module docstring)."""

    def __init__(self, prefix_length: int = 24) -> None:
        require_root()
        self.tag = uuid.uuid4().hex[:6]
        self.prefix_length = prefix_length
        self.switch = f"rs{self.tag}-sw"
        self.hosts: dict[str, str] = {}
        """host name → its namespace."""
        self.procs: list[subprocess.Popen[bytes]] = []
        self._namespaces: list[str] = []
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def add_host(self, name: str, address: str) -> str:
        """Host ``name`` with ``address`` on its ``eno1``; its namespace."""
        ns = f"rs{self.tag}-{name}"[:15]
        self._add_namespace(ns)
        port = f"p{self.tag}{len(self.hosts)}"
        _ip("-n", ns, "link", "add", "eno1", "type", "veth", "peer", "name", port,
            "netns", self.switch)
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{address}/{self.prefix_length}", "dev", "eno1")
        _ip("-n", ns, "link", "set", "eno1", "up")
        self.hosts[name] = ns
        return ns

    def add_interface(self, name: str, interface: str) -> str:
        """A namespace off the bridge with ``interface`` (one end of a veth
        pair whose other end stays there too), for a program that checks the
        interface it is configured for exists; its namespace."""
        ns = f"rs{self.tag}-{name}"[:15]
        self._add_namespace(ns)
        _ip("-n", ns, "link", "add", interface, "type", "veth", "peer", "name", "peer0")
        return ns

    def prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.hosts[host]]

    def run(self, host: str, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen([*self.prefix(host), *argv], stdout=out,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def addresses(self, host: str) -> list[str]:
        res = subprocess.run(["ip", "-n", self.hosts[host], "-4", "-o", "addr", "show", "eno1"],
                             capture_output=True, text=True, timeout=30)
        return [line.split()[3].split("/")[0] for line in res.stdout.splitlines()]

    def pids(self, host: str) -> list[int]:
        """Every process inside host ``host``'s namespace (children included)."""
        res = subprocess.run(["ip", "netns", "pids", self.hosts[host]], capture_output=True,
                             text=True, timeout=30)
        return [int(p) for p in res.stdout.split()]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        # What those started (keepalived's children), by their PIDs in each namespace.
        for host in self.hosts:
            for pid in self.pids(host):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
