"""Instant BMCs for ``--hardware fake``: power, boot device and virtual media
of every emulated host behind one small JSON API on 127.0.0.1.

Owns the BMC state of fake-hardware hosts (power, boot device once or
persistent, virtual media inserted) and the API that Ironic's
``racksmith-fake`` hardware type calls (``ironic_plugin/``):

====================================  ==========================================
``GET  /systems/{uuid}``              ``{power_state, boot_device, boot_persistent,
                                      media_inserted, macs}``
``POST /systems/{uuid}/power``        ``{"action": On | ForceOff | GracefulShutdown |
                                      ForceRestart | GracefulRestart}`` → 204
``PUT  /systems/{uuid}/boot``         ``{"device": Hdd | Cd | Pxe, "persistent": bool}``
``PUT  /systems/{uuid}/media``        ``{"inserted": bool}``
====================================  ==========================================

HTTP basic auth with the host's current BMC password (401 otherwise, as a
real BMC; the reply never echoes what was sent). Every change applies at
once and is handed to ``on_change`` as the same system record sushy-tools'
external notifier PUTs for Redfish hosts (``uuid``, ``power_state``,
``boot_device``, ``boot_image``), so the emulated ramdisk agent and the OS
boot react identically to both kinds of BMC. A restart is an Off then an On
record. A boot device set "once" is used by the next power-on and then
falls back to the persistent one, as on real BMCs.

The state is kept in ``<data_dir>/state.json`` (0600, replaced atomically)
so a restarted emulator resumes powered-on hosts. Used by
``datacenter.VirtualDatacenter`` when ``hardware="fake"``.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from racksmith.emulator.inventory import EmulatedHost
from racksmith.emulator.listeners import bind_listener, port_of, serve

log = structlog.get_logger("racksmith.emulator.fakebmc")

BOOT_DEVICES = ("Hdd", "Cd", "Pxe")


class PowerAction(StrEnum):
    """The reset types the BMC accepts (Redfish's names)."""

    ON = "On"
    """Power on (no-op when on)."""
    FORCE_OFF = "ForceOff"
    """Cut the power at once."""
    GRACEFUL_SHUTDOWN = "GracefulShutdown"
    """An OS shutdown: the emulated OS stops at once, like ForceOff."""
    FORCE_RESTART = "ForceRestart"
    """Off, then on (on when off)."""
    GRACEFUL_RESTART = "GracefulRestart"
    """Like ForceRestart for an emulated OS."""


@dataclass
class SystemState:
    """What one BMC remembers."""

    power_on: bool = False
    boot_device: str = "Hdd"
    """The device the next power-on boots."""
    persistent_device: str = "Hdd"
    """What ``boot_device`` falls back to after a one-time boot."""
    boot_once: bool = False
    media_inserted: bool = False


SystemChange = Callable[[dict[str, Any]], None]
Password = Callable[[EmulatedHost], str]


class FakeBMC:
    """The fake BMCs of ``hosts`` on ``127.0.0.1:port`` (0: any free port,
    known after :meth:`start`; ``sock``: an already bound listener).
    ``password(host)`` gives the password a host accepts now.
    ``start``/``stop`` are idempotent."""

    def __init__(self, data_dir: Path, port: int, hosts: Sequence[EmulatedHost],
                 password: Password, on_change: SystemChange,
                 sock: socket.socket | None = None) -> None:
        self.data_dir = Path(data_dir)
        self._sock = sock
        self._port = port_of(sock) if sock is not None else port
        self._hosts = {h.uuid: h for h in hosts}
        self._password = password
        self._on_change = on_change
        self._state_file = self.data_dir / "state.json"
        self.systems: dict[str, SystemState] = {h.uuid: SystemState() for h in hosts}
        self._load()
        self._runner: web.AppRunner | None = None

    # --- lifecycle --------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def system_url(self, host: EmulatedHost) -> str:
        """The ``fake_bmc_address`` of ``host``."""
        return f"{self.url}/systems/{host.uuid}"

    async def start(self) -> None:
        if self._runner is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        app = web.Application(client_max_size=64 * 1024)
        app.router.add_get("/systems/{uuid}", self._handle_get)
        app.router.add_post("/systems/{uuid}/power", self._handle_power)
        app.router.add_put("/systems/{uuid}/boot", self._handle_boot)
        app.router.add_put("/systems/{uuid}/media", self._handle_media)
        sock, self._sock = self._sock or bind_listener(self._port, what="fake BMCs"), None
        self._port = port_of(sock)
        self._runner = await serve(app, sock)
        log.info("fake BMCs listening", url=self.url, hosts=len(self._hosts))

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # --- what the datacenter asks -----------------------------------------

    def record(self, host: EmulatedHost) -> dict[str, Any]:
        """The host's system record, in sushy-tools' notification shape."""
        s = self.systems[host.uuid]
        return {
            "uuid": host.uuid,
            "name": host.name,
            "power_state": "On" if s.power_on else "Off",
            "boot_device": s.boot_device,
            "boot_image": {"Cd": ["ramdisk" if s.media_inserted else "", True,
                                  s.media_inserted]},
        }

    def powered_on(self) -> list[EmulatedHost]:
        """Hosts whose BMC says On (a restarted emulator boots them again)."""
        return [self._hosts[u] for u, s in self.systems.items() if s.power_on]

    def power(self, host: EmulatedHost, action: PowerAction) -> None:
        """Apply a reset type now and tell ``on_change``."""
        s = self.systems[host.uuid]
        if action in (PowerAction.FORCE_OFF, PowerAction.GRACEFUL_SHUTDOWN):
            if s.power_on:
                s.power_on = False
                self._changed(host)
            return
        if action in (PowerAction.FORCE_RESTART, PowerAction.GRACEFUL_RESTART) and s.power_on:
            s.power_on = False
            self._changed(host, save=False)
        if s.power_on:
            return
        s.power_on = True
        self._changed(host)
        if s.boot_once:
            # The one-time device was used by this boot.
            s.boot_device, s.boot_once = s.persistent_device, False
            self._save()

    # --- HTTP -------------------------------------------------------------

    def _host(self, request: web.Request) -> EmulatedHost:
        host = self._hosts.get(request.match_info["uuid"])
        if host is None:
            raise web.HTTPNotFound(text="no such system")
        login, password = _basic_auth(request.headers.get("Authorization", ""))
        expected = self._password(host)
        if not (hmac.compare_digest(login.encode(), host.bmc_username.encode())
                and hmac.compare_digest(password.encode(), expected.encode())):
            raise web.HTTPUnauthorized(text="authentication required",
                                       headers={"WWW-Authenticate": 'Basic realm="bmc"'})
        return host

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="the body must be a JSON object")
        return body

    async def _handle_get(self, request: web.Request) -> web.Response:
        host = self._host(request)
        s = self.systems[host.uuid]
        return web.json_response({
            "power_state": "On" if s.power_on else "Off",
            "boot_device": s.boot_device,
            "boot_persistent": not s.boot_once,
            "media_inserted": s.media_inserted,
            "macs": [n.mac for n in host.inventory.nics],
        })

    async def _handle_power(self, request: web.Request) -> web.Response:
        host = self._host(request)
        body = await self._body(request)
        try:
            action = PowerAction(str(body.get("action")))
        except ValueError:
            raise web.HTTPBadRequest(
                text=f"action must be one of {', '.join(a.value for a in PowerAction)}"
            ) from None
        log.info("fake BMC power", host=host.name, action=action.value)
        self.power(host, action)
        return web.Response(status=204)

    async def _handle_boot(self, request: web.Request) -> web.Response:
        host = self._host(request)
        body = await self._body(request)
        device = body.get("device")
        if device not in BOOT_DEVICES:
            raise web.HTTPBadRequest(text=f"device must be one of {', '.join(BOOT_DEVICES)}")
        s = self.systems[host.uuid]
        s.boot_device = str(device)
        s.boot_once = not bool(body.get("persistent"))
        if not s.boot_once:
            s.persistent_device = str(device)
        self._changed(host)
        return web.Response(status=204)

    async def _handle_media(self, request: web.Request) -> web.Response:
        host = self._host(request)
        body = await self._body(request)
        inserted = body.get("inserted")
        if not isinstance(inserted, bool):
            raise web.HTTPBadRequest(text="inserted must be true or false")
        s = self.systems[host.uuid]
        if s.media_inserted != inserted:
            s.media_inserted = inserted
            self._changed(host)
        return web.Response(status=204)

    # --- state ------------------------------------------------------------

    def _changed(self, host: EmulatedHost, *, save: bool = True) -> None:
        if save:
            self._save()
        self._on_change(self.record(host))

    def _load(self) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError, TypeError):
            data = json.loads(self._state_file.read_text())
            for uuid, entry in dict(data).items():
                if uuid in self.systems and isinstance(entry, dict):
                    self.systems[uuid] = SystemState(**{
                        k: v for k, v in entry.items() if k in SystemState.__annotations__})

    def _save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self._state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({u: asdict(s) for u, s in self.systems.items()}, f)
        os.replace(tmp, self._state_file)


def _basic_auth(header: str) -> tuple[str, str]:
    """``(login, password)`` of an HTTP basic Authorization header, or two
    empty strings when there is none or it is malformed."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    try:
        login, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return "", ""
    return (login, password) if sep else ("", "")
