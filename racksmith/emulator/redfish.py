"""The Redfish BMCs of the emulated hosts: one sushy-tools process for all.

Owns the emulator process: its JSON config, its credentials file, its own
state dir and TMPDIR, start (in its own process group), readiness and stop
(SIGTERM to the group, SIGKILL after a timeout). The process runs
``racksmith.emulator.sushy_launcher`` with Ironic's virtualenv interpreter,
where sushy-tools is installed. Called by ``datacenter.VirtualDatacenter``.

Layout under ``data_dir``: ``config.json``, ``credentials.json`` (0600),
``state/`` (power and boot state; kept across restarts), ``tmp/`` (virtual
media downloads; wiped at start), ``redfish.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import structlog

from racksmith.emulator import bmc_credentials
from racksmith.emulator.inventory import EmulatedHost, to_dict
from racksmith.emulator.listeners import bind_listener, port_of
from racksmith.filemodes import PRIVATE_UMASK, open_private, private_dir

log = structlog.get_logger("racksmith.emulator.redfish")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = REPO_ROOT / ".ironic-venv" / "bin" / "python"


class EmulatorError(RuntimeError):
    """The Redfish emulator could not be started."""


class RedfishEmulator:
    """One sushy-tools process serving a BMC per host on ``127.0.0.1:port``.

    ``start`` and ``stop`` may be called repeatedly; ``stop`` is safe after a
    failed ``start``.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        hosts: Sequence[EmulatedHost],
        notify_url: str | None,
        *,
        power_delay: float = 0.0,
        python: Path | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self._sock = sock
        self.port = port_of(sock) if sock is not None else port
        self.hosts = list(hosts)
        self.notify_url = notify_url
        self.power_delay = power_delay
        self.python = python or DEFAULT_PYTHON
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        """Base URL of the emulator (service root at ``/redfish/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    def system_url(self, host: EmulatedHost) -> str:
        """The Redfish URL of the host's system resource."""
        return f"{self.url}/redfish/v1/Systems/{host.uuid}"

    @property
    def credentials_file(self) -> Path:
        """Where the BMC credential hashes live."""
        return self.data_dir / "credentials.json"

    def _write_files(self, fd: int) -> Path:
        private_dir(self.data_dir)
        private_dir(self.data_dir / "state")
        tmp = self.data_dir / "tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        existing = bmc_credentials.read_credentials(self.credentials_file)
        entries = {
            h.uuid: existing.get(h.uuid)
            or bmc_credentials.credential_entry(h.bmc_username, h.bmc_password)
            for h in self.hosts
        }
        bmc_credentials.write_credentials(self.credentials_file, entries)
        config = {
            "listen_ip": "127.0.0.1",
            "port": self.port,
            "fd": fd,
            "state_dir": str(self.data_dir / "state"),
            "notify_url": self.notify_url,
            "power_delay": self.power_delay,
            "credentials_file": str(self.credentials_file),
            "systems": [
                {"uuid": h.uuid, "name": h.name, "inventory": to_dict(h)["inventory"]}
                for h in self.hosts
            ],
        }
        path = self.data_dir / "config.json"
        path.write_text(json.dumps(config, indent=1))
        return path

    def set_password(self, host: EmulatedHost, password: str) -> None:
        """Change the host's BMC password; the running emulator picks it up."""
        entries = bmc_credentials.read_credentials(self.credentials_file)
        entries[host.uuid] = bmc_credentials.credential_entry(host.bmc_username, password)
        bmc_credentials.write_credentials(self.credentials_file, entries)

    async def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait until the service root answers."""
        if self._proc is not None and self._proc.returncode is None:
            return
        if not self.python.exists():
            raise EmulatorError(f"{self.python} not found: run `make install`")
        # The listener is bound here and inherited by sushy-tools (it serves
        # the fd it is given): the port is never free in between.
        sock, self._sock = self._sock or bind_listener(self.port, what="Redfish emulator"), None
        self.port = port_of(sock)
        sock.setblocking(True)  # werkzeug's accept loop expects a blocking socket
        config = self._write_files(sock.fileno())
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["TMPDIR"] = str(self.data_dir / "tmp")
        env.pop("SUSHY_EMULATOR_CONFIG", None)
        logfile = open_private(self.data_dir / "redfish.log", "ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                str(self.python),
                "-m",
                "racksmith.emulator.sushy_launcher",
                "--config",
                str(config),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=logfile,
                stderr=logfile,
                env=env,
                cwd=str(self.data_dir),
                start_new_session=True,
                pass_fds=(sock.fileno(),),
                umask=PRIVATE_UMASK,
            )
        finally:
            logfile.close()
            sock.close()
        log.info("redfish emulator starting", port=self.port, pid=self._proc.pid)
        await self._wait_ready(timeout)

    async def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.returncode is not None:
                    raise EmulatorError(
                        f"redfish emulator exited; see {self.data_dir / 'redfish.log'}"
                    )
                with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError):
                    async with session.get(
                        f"{self.url}/redfish/v1/", timeout=aiohttp.ClientTimeout(total=2)
                    ) as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.1)
        await self.stop()
        raise EmulatorError(f"redfish emulator not ready after {timeout} s")

    async def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``timeout`` seconds."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        log.info("redfish emulator stopped", port=self.port)
