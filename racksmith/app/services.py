"""The external services ``racksmith up`` runs beside the control plane.

Owns: Ironic (through :class:`racksmith.ironic.process.IronicProcess`), the
HTTP server for Ironic's ``http_root`` (virtual-media ISOs, images), and the
virtual datacenter (``--emulate-hosts N``) as a separate process
(``racksmith emulator``). Both Ironic and the emulator run in their own
process groups and **outlive a crashed** ``racksmith up``: servers keep
deploying while the control plane restarts, and the next start adopts them
through their pid files instead of starting second copies (so no deploy is
interrupted or repeated). A clean stop (SIGINT/SIGTERM) stops them.

Ports that end up in stored state (BMC addresses in BareMetalHosts, agent
callback URLs in Ironic) are bound once by the service that uses them and
kept in ``DIR/ports.json`` (:class:`PortBook`) for the next start.

Files: every directory these services make is 0700 and every file (pid
files, ``ports.json``, the emulator's log) 0600; the emulator is started
with umask 0077 (:mod:`racksmith.filemodes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from racksmith.emulator.datacenter import VirtualDatacenter
from racksmith.emulator.listeners import Listeners, bind_listener, port_of, serve
from racksmith.filemodes import PRIVATE_UMASK, open_private, private_dir, write_private
from racksmith.ironic.config import IronicSettings
from racksmith.ironic.process import IronicProcess, process_group_alive

log = structlog.get_logger("racksmith.services")

ROOT = Path(__file__).resolve().parents[2]


class StartupError(RuntimeError):
    """A service cannot start as configured (the message says what to change)."""


class PortBook:
    """``DIR/ports.json``: the ports that end up in stored state (BMC
    addresses in BareMetalHosts, image URLs, agent callback URLs in Ironic),
    by service name. A port is recorded once its service has bound it (never
    chosen ahead and handed on: see ``racksmith.emulator.listeners``), and
    the next start binds the same port again. File mode 0600."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "ports.json"

    def all(self) -> dict[str, int]:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            return {str(k): int(v) for k, v in json.loads(self.path.read_text()).items()}
        return {}

    def get(self, name: str) -> int:
        """The recorded port of ``name``, else 0 (bind any free port)."""
        return self.all().get(name, 0)

    def record(self, ports: dict[str, int]) -> None:
        current = self.all()
        merged = {**current, **ports}
        if merged == current:
            return
        private_dir(self.path.parent)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(merged, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


class StaticHTTP:
    """Serves Ironic's ``http_root`` when no emulator does (a real site).
    ``port`` 0: any free port, known from ``port`` once constructed (the
    listener is bound at construction)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self._sock: socket.socket | None = bind_listener(port, what="Ironic's http_root server")
        self.port = port_of(self._sock)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        private_dir(self.root)
        app = web.Application()
        app.router.add_static("/", self.root, show_index=False)
        sock, self._sock = self._sock or bind_listener(self.port, what="http_root"), None
        self._runner = await serve(app, sock)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class EmulatorService:
    """The virtual datacenter as its own (adoptable) process.

    :meth:`prepare` adopts a running one (its ports from ``DIR/ports.json``)
    or binds its listeners here — on the recorded ports, else any free ones,
    which are recorded — so its URLs are known before Ironic starts;
    :meth:`start` then spawns ``racksmith emulator``, which inherits and
    serves those sockets. The hardware kind of a data dir is fixed at its
    first start (``DIR/emulator/hardware``): the BareMetalHosts name its BMCs.
    """

    def __init__(self, data_dir: Path, count: int, hardware: str = "redfish") -> None:
        self.data_dir = data_dir
        self.count = count
        self.hardware = hardware
        self.book = PortBook(data_dir)
        self.pid_file = data_dir / "emulator" / "emulator.pid"
        self.log_file = data_dir / "emulator" / "emulator.log"
        self.hardware_file = data_dir / "emulator" / "hardware"
        self._listeners: Listeners | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._dc: VirtualDatacenter | None = None
        self.ports: dict[str, int] = {}
        self.pid: int | None = None
        self.adopted = False

    @property
    def bmc_key(self) -> str:
        """The BMC port's name in ports.json."""
        return "redfish" if self.hardware == "redfish" else "fakebmc"

    @property
    def dc(self) -> VirtualDatacenter:
        """The datacenter's description (URLs, manifest); after :meth:`prepare`."""
        if self._dc is None:
            raise RuntimeError("EmulatorService.prepare() first")
        return self._dc

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "emulated-hosts.yaml"

    async def _healthy(self, agent_port: int) -> bool:
        if not agent_port:
            return False
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as s, \
                    s.get(f"http://127.0.0.1:{agent_port}/status") as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    def _check_hardware(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            first = self.hardware_file.read_text().strip()
            if first and first != self.hardware:
                raise StartupError(
                    f"the emulated hosts of {self.data_dir} have {first} BMCs (their "
                    f"BareMetalHosts name them); start with --hardware {first}, or use "
                    "another data dir")
        private_dir(self.hardware_file.parent)
        write_private(self.hardware_file, f"{self.hardware}\n")

    async def prepare(self) -> None:
        """Adopt the running datacenter, or bind its listeners (idempotent)."""
        if self._dc is not None:
            return
        self._check_hardware()
        recorded = self.book.all()
        wanted = {"agent": recorded.get("agent", 0), "http": recorded.get("http", 0),
                  "bmc": recorded.get(self.bmc_key, 0)}
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pid_file.read_text().strip())
            if process_group_alive(pid) and await self._healthy(wanted["agent"]) \
                    and self.manifest_path.exists():
                self.pid, self.adopted = pid, True
                self.ports = wanted
                log.info("adopted the running virtual datacenter", pid=pid)
            elif process_group_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        if not self.adopted:
            self._listeners = Listeners.bind(wanted)
            self.ports = self._listeners.ports
            self.book.record({"agent": self.ports["agent"], "http": self.ports["http"],
                              self.bmc_key: self.ports["bmc"]})
        # Built for its URLs and manifest only; the child process runs it.
        self._dc = VirtualDatacenter(self.data_dir, self.count, "", ports=self.ports,
                                     hardware=self.hardware)

    async def start(self, ironic_url: str, timeout: float = 120.0) -> None:
        """Spawn ``racksmith emulator`` on the prepared listeners (nothing to
        do when adopted) and wait until it answers."""
        await self.prepare()
        if self.adopted:
            return
        listeners = self._listeners
        assert listeners is not None
        fds = listeners.fds()
        private_dir(self.pid_file.parent)
        try:
            with open_private(self.log_file, "ab") as out:
                self._proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "racksmith.cli.main", "emulator",
                    "--data-dir", str(self.data_dir), "--count", str(self.count),
                    "--ironic-url", ironic_url, "--hardware", self.hardware,
                    "--listen-fds", ",".join(f"{k}={v}" for k, v in fds.items()),
                    stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                    start_new_session=True, cwd=str(ROOT), pass_fds=tuple(fds.values()),
                    umask=PRIVATE_UMASK)
        finally:
            # The child holds its own copies; ours would keep the ports bound
            # after the child is gone.
            listeners.close()
            self._listeners = None
        self.pid = self._proc.pid
        write_private(self.pid_file, f"{self.pid}\n")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self._proc.returncode is not None:
                raise RuntimeError(f"the virtual datacenter exited ({self._proc.returncode}); "
                                   f"see {self.log_file}")
            if await self._healthy(self.ports["agent"]) and self.manifest_path.exists():
                log.info("virtual datacenter started", pid=self.pid, hosts=self.count)
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"the virtual datacenter was not ready in {timeout:.0f}s; "
                           f"see {self.log_file}")

    async def stop(self, grace: float = 20.0) -> None:
        if self._listeners is not None:
            self._listeners.close()
            self._listeners = None
        pid, self.pid = self.pid, None
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        for _ in range(int(grace * 10)):
            if not process_group_alive(pid):
                break
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)
        with contextlib.suppress(OSError):
            self.pid_file.unlink()


def ironic_settings(data_dir: Path, port: int, http_url: str, http_root: Path,
                    deploy_iso: str | None, **extra: Any) -> IronicSettings:
    """Ironic for racksmith up: metadata-only cleaning as Metal3's default
    ``automatedCleaningMode: metadata`` means."""
    return IronicSettings(
        data_dir=data_dir, port=port, http_url=http_url, http_root=http_root,
        deploy_iso=deploy_iso, heartbeat_timeout=5,
        extra={"deploy": {"erase_devices_priority": "0",
                          "erase_devices_metadata_priority": "10"}}, **extra)


__all__ = ["EmulatorService", "IronicProcess", "PortBook", "StartupError", "StaticHTTP",
           "ironic_settings"]
