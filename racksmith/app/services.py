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
callback URLs in Ironic) are chosen once and kept in ``DIR/ports.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from racksmith.emulator.datacenter import VirtualDatacenter, free_port
from racksmith.ironic.config import IronicSettings
from racksmith.ironic.process import IronicProcess, process_group_alive

log = structlog.get_logger("racksmith.services")

ROOT = Path(__file__).resolve().parents[2]


def stable_ports(data_dir: Path, wanted: dict[str, int]) -> dict[str, int]:
    """Ports by name: those already recorded in ``DIR/ports.json`` win; a
    wanted 0 picks a free port once and records it."""
    path = data_dir / "ports.json"
    recorded: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        recorded = {k: int(v) for k, v in json.loads(path.read_text()).items()}
    out = dict(recorded)
    for name, port in wanted.items():
        if name not in out or (port and port != out[name]):
            out[name] = port or free_port()
    if out != recorded:
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, sort_keys=True))
    return out


class StaticHTTP:
    """Serves Ironic's ``http_root`` when no emulator does (a real site)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        app = web.Application()
        app.router.add_static("/", self.root, show_index=False)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class EmulatorService:
    """The virtual datacenter as its own (adoptable) process."""

    def __init__(self, data_dir: Path, count: int, ironic_url: str,
                 hardware: str = "redfish") -> None:
        self.data_dir = data_dir
        self.count = count
        self.ironic_url = ironic_url
        self.hardware = hardware
        ports = stable_ports(data_dir, {"redfish": 0, "agent": 0, "http": 0})
        self.ports = ports
        # Built for its URLs and manifest only; the child process runs it.
        self.dc = VirtualDatacenter(data_dir, count, ironic_url,
                                    redfish_port=ports["redfish"], agent_port=ports["agent"],
                                    http_port=ports["http"], hardware=hardware)
        self.pid_file = data_dir / "emulator" / "emulator.pid"
        self.log_file = data_dir / "emulator" / "emulator.log"
        self._proc: asyncio.subprocess.Process | None = None
        self.pid: int | None = None
        self.adopted = False

    @property
    def manifest_path(self) -> Path:
        return self.dc.manifest_path

    async def _healthy(self) -> bool:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as s, \
                    s.get(f"http://127.0.0.1:{self.ports['agent']}/status") as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def start(self, timeout: float = 120.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pid_file.read_text().strip())
            if process_group_alive(pid) and await self._healthy() and self.manifest_path.exists():
                self.pid, self.adopted = pid, True
                log.info("adopted the running virtual datacenter", pid=pid)
                return
            if process_group_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "racksmith.cli.main", "emulator",
                "--data-dir", str(self.data_dir), "--count", str(self.count),
                "--ironic-url", self.ironic_url,
                "--redfish-port", str(self.ports["redfish"]),
                "--agent-port", str(self.ports["agent"]),
                "--http-port", str(self.ports["http"]),
                "--hardware", self.hardware,
                stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True, cwd=str(ROOT))
        self.pid = self._proc.pid
        self.pid_file.write_text(f"{self.pid}\n")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self._proc.returncode is not None:
                raise RuntimeError(f"the virtual datacenter exited ({self._proc.returncode}); "
                                   f"see {self.log_file}")
            if await self._healthy() and self.manifest_path.exists():
                log.info("virtual datacenter started", pid=self.pid, hosts=self.count)
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"the virtual datacenter was not ready in {timeout:.0f}s; "
                           f"see {self.log_file}")

    async def stop(self, grace: float = 20.0) -> None:
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


__all__ = ["EmulatorService", "IronicProcess", "StaticHTTP", "ironic_settings",
           "stable_ports"]
