"""The emulated ironic-python-agent: one aiohttp server, a ramdisk per host.

Owns what runs on an emulated host between "powered on from virtual media"
and "powered off": inspection (``/v1/continue_inspection``), lookup,
heartbeats with the agent token, and IPA's command API at
``http://127.0.0.1:<port>/<host>/v1/commands/``. Commands act on the host
for real: ``write_image`` downloads the image (127.0.0.1 only) into the
root disk's file (``image_writer``), ``erase_devices_metadata`` zeroes disk starts,
``standby.power_off`` powers the host off through its Redfish BMC.

The Redfish emulator tells the agent about power and boot changes by PUTting
each system's JSON to ``/notify`` (sushy-tools' external notifier): power On
with boot device Cd/Pxe boots the ramdisk after ``boot_delay``; boot device
Hdd boots the installed OS (``osboot``, when one is given: it starts the
racksmith agent the config drive asks for); power Off stops everything.

Protocol facts (tokens per boot, microversions, short command names, error
shapes) follow /work/shared/IPA-PROTOCOL-NOTES.md. Started by
``datacenter.VirtualDatacenter``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import socket
import tarfile
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from racksmith.emulator import ipa_inventory
from racksmith.emulator.disks import DiskStore
from racksmith.emulator.image_writer import CommandFailed, ImageWriter
from racksmith.emulator.inventory import EmulatedHost
from racksmith.emulator.listeners import bind_listener, port_of, serve
from racksmith.emulator.osboot import OSBoot

log = structlog.get_logger("racksmith.emulator.agent")

API_VERSION_HEADER = "X-OpenStack-Ironic-API-Version"
LOOKUP_VERSION = "1.68"
INSPECTION_VERSION = "1.84"
RAMDISK_BOOT_DEVICES = frozenset({"Cd", "Pxe", "UefiHttp"})
INSPECTION_ATTEMPTS = 5

PowerOff = Callable[[EmulatedHost], Awaitable[None]]


@dataclass(frozen=True)
class AgentSettings:
    """Timing and behaviour of the emulated ramdisks.

    ``heartbeat_interval``: seconds between heartbeats (in-band steps advance
    only on heartbeats). ``boot_delay``: power-on to first call. ``step_time``:
    how long asynchronous commands stay RUNNING. ``inspect_on_boot``: after
    lookup, POST the inventory to ``/v1/continue_inspection`` when the boot
    looks like an inspection (see ``_expects_inspection``).
    ``request_timeout``: how long any other call to Ironic waits for its answer.
    ``lookup_timeout``: how long one lookup waits for Ironic's answer. IPA
    sets no timeout on it; a lookup whose answer is given up loses the agent
    token Ironic issued with it (every later lookup of that boot gets
    ``******``, and the deploy times out waiting for the callback), so it is
    generous: an Ironic worker busy with many Redfish hosts answers late.
    """

    ironic_url: str
    heartbeat_interval: float = 1.0
    boot_delay: float = 0.3
    step_time: float = 0.1
    lookup_retry: float = 0.5
    lookup_timeout: float = 300.0
    request_timeout: float = 30.0
    inspect_on_boot: bool = True


class AgentState(StrEnum):
    """What an emulated host is doing."""

    OFF = "off"
    """Powered off."""
    BOOTING = "booting"
    """Powered on into the ramdisk, not yet talking to Ironic."""
    INSPECTED = "inspected"
    """Sent its inventory; waits to be powered off."""
    LOOKUP = "lookup"
    """Looking up its node and agent token."""
    RUNNING = "running"
    """Heartbeating and answering commands."""
    OS = "os"
    """Booted from its disk (the deployed image); no agent."""
    NO_BOOT_DEVICE = "no boot device"
    """Powered on with nothing bootable."""


@dataclass
class CommandRecord:
    """One command result as IPA reports it (``command_name`` is short)."""

    name: str
    status: str = "RUNNING"
    result: Any = None
    error: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "command_name": self.name,
            "command_status": self.status,
            "command_result": self.result,
            "command_error": self.error,
        }

    def fail(self, exc: BaseException) -> None:
        self.status = "FAILED"
        error_type = exc.error_type if isinstance(exc, CommandFailed) else type(exc).__name__
        self.error = {"type": error_type, "code": 500, "message": str(exc), "details": str(exc)}


@dataclass
class HostAgent:
    """Run-time state of one emulated host."""

    host: EmulatedHost
    state: AgentState = AgentState.OFF
    boot_device: str = "Hdd"
    boots: int = 0
    node_uuid: str | None = None
    token: str | None = field(default=None, repr=False)
    heartbeats: int = 0
    images_written: int = 0
    """How many times write_image ran: one per deploy."""
    expects_inspection: bool = True
    commands: list[CommandRecord] = field(default_factory=list)
    last_image: dict[str, Any] | None = None
    journal: deque[str] = field(default_factory=lambda: deque(maxlen=500))
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def is_on(self) -> bool:
        return self.state is not AgentState.OFF

    def is_busy(self) -> bool:
        return bool(self.commands) and self.commands[-1].status == "RUNNING"

    def note(self, message: str) -> None:
        self.journal.append(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}")


Handler = Callable[[HostAgent, dict[str, Any]], Awaitable[Any]]


class AgentServer:
    """Ramdisk agents of all hosts behind one HTTP server on 127.0.0.1.

    ``power_off(host)`` must power the host off through its BMC (the
    datacenter passes a Redfish client). ``os_boot`` boots the installed OS
    on disk boots (None: a disk boot only sets the state). ``start``/``stop``
    are idempotent; ``stop`` also stops every OS process.
    """

    def __init__(
        self,
        hosts: Sequence[EmulatedHost],
        disks: DiskStore,
        settings: AgentSettings,
        power_off: PowerOff,
        port: int = 0,
        os_boot: OSBoot | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.settings = settings
        self.ironic_url = settings.ironic_url
        """Where the ramdisks call Ironic (settable until hosts boot)."""
        self.os_boot = os_boot
        self.disks = disks
        self._power_off = power_off
        self._sock = sock
        self._port = port_of(sock) if sock is not None else port
        self.agents = {h.name: HostAgent(h) for h in hosts}
        self._by_uuid = {h.uuid: self.agents[h.name] for h in hosts}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._detached: set[asyncio.Task[Any]] = set()
        self._writer = ImageWriter(disks, self._client)
        # name → (runs in the background, implementation)
        self._commands: dict[str, tuple[bool, Handler]] = {
            "deploy.get_deploy_steps": (False, self._get_deploy_steps),
            "deploy.execute_deploy_step": (True, self._execute_deploy_step),
            "clean.get_clean_steps": (False, self._get_clean_steps),
            "clean.execute_clean_step": (True, self._execute_clean_step),
            "standby.get_partition_uuids": (False, self._get_partition_uuids),
            "standby.power_off": (True, self._cmd_power_off),
            "standby.sync": (False, self._noop),
            "system.lockdown": (True, self._cmd_power_off),
            "image.install_bootloader": (False, self._install_bootloader),
            "log.collect_system_logs": (False, self._collect_logs),
        }

    # --- lifecycle --------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def notify_url(self) -> str:
        """Where the Redfish emulator PUTs system changes."""
        return f"{self.url}/notify"

    def callback_url(self, host: EmulatedHost | str) -> str:
        """The agent URL of ``host`` as sent in heartbeats."""
        name = host if isinstance(host, str) else host.name
        return f"{self.url}/{name}"

    async def start(self) -> None:
        """Listen on 127.0.0.1 (``port=0`` picks a free port)."""
        if self._runner is not None:
            return
        if self.os_boot is not None:
            self.os_boot.reopen()
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.settings.request_timeout))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_put("/notify", self._handle_notify)
        for suffix in ("/{host}/v1/commands", "/{host}/v1/commands/"):
            app.router.add_post(suffix, self._handle_post)
            app.router.add_get(suffix, self._handle_list)
        app.router.add_get("/status", self._handle_status)
        sock, self._sock = self._sock or bind_listener(self._port, what="emulated agent"), None
        self._port = port_of(sock)
        self._runner = await serve(app, sock)
        log.info("emulated agent listening", url=self.url, hosts=len(self.agents))

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise CommandFailed("the agent is stopping")
        return self._session

    async def stop(self) -> None:
        """Shut every ramdisk down and stop listening."""
        pending: list[asyncio.Task[Any]] = [*self._detached]
        for agent in self.agents.values():
            pending.extend(agent.tasks)
            self._halt(agent)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        if self.os_boot is not None:
            await self.os_boot.stop_all()

    # --- power and boot (from the BMC's notifications) --------------------

    def on_system_change(self, system: dict[str, Any]) -> None:
        """React to a Redfish system's new state (power, boot device)."""
        agent = self._by_uuid.get(str(system.get("uuid")))
        if agent is None:
            return
        pending = system.get("pending_power") or {}
        target = pending.get("power_state") or system.get("power_state")
        agent.boot_device = str(system.get("boot_device") or "Hdd")
        if target != "On":
            if agent.is_on:
                agent.note("powered off")
                log.info("host powered off", host=agent.host.name)
                self._halt(agent)
            self._want_os(agent, False)
            return
        if agent.is_on:
            return  # already running; a boot device change takes effect next boot
        delay = max(0.0, float(pending.get("apply_time", 0)) - time.time()) if pending else 0.0
        if agent.boot_device == "Cd" and not _has_media(system):
            agent.state = AgentState.NO_BOOT_DEVICE
            agent.note("powered on, boot from Cd but no virtual media inserted")
            log.warning("host has no virtual media to boot", host=agent.host.name)
        elif agent.boot_device in RAMDISK_BOOT_DEVICES:
            agent.state = AgentState.BOOTING
            agent.note(f"powered on, booting the ramdisk from {agent.boot_device}")
            log.info("host booting ramdisk", host=agent.host.name, device=agent.boot_device)
            self._want_os(agent, False)
            self._spawn(agent, self._ramdisk(agent, delay))
        elif agent.boot_device == "Hdd":
            agent.state = AgentState.OS
            agent.note("powered on, booting from disk")
            log.info("host booting from disk", host=agent.host.name)
            if self.os_boot is not None:
                self._spawn(agent, self._boot_os(agent, delay))
        else:
            agent.state = AgentState.NO_BOOT_DEVICE

    def _want_os(self, agent: HostAgent, running: bool) -> None:
        if self.os_boot is not None:
            self.os_boot.want(agent.host, running)

    async def _boot_os(self, agent: HostAgent, power_delay: float) -> None:
        # Cancelled with the host's other tasks if it powers off first.
        await asyncio.sleep(power_delay + self.settings.boot_delay)
        self._want_os(agent, True)

    def _spawn(self, agent: HostAgent, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        agent.tasks.add(task)
        task.add_done_callback(agent.tasks.discard)

    def _halt(self, agent: HostAgent) -> None:
        """Power loss: everything running on the host stops now."""
        for task in list(agent.tasks):
            task.cancel()
        agent.state = AgentState.OFF
        agent.token = None
        agent.node_uuid = None

    # --- the ramdisk's life -----------------------------------------------

    async def _ramdisk(self, agent: HostAgent, power_delay: float) -> None:
        await asyncio.sleep(power_delay + self.settings.boot_delay)
        agent.boots += 1
        agent.commands = []
        agent.token = None
        agent.state = AgentState.LOOKUP
        await self._lookup(agent)
        # Inspect only after a lookup succeeded: lookup takes the node lock,
        # so the task that powered us on has finished and the node sits in
        # its wait state (inspect wait, or it is not an inspection at all).
        if (
            self.settings.inspect_on_boot
            and agent.expects_inspection
            and await self._inspect(agent)
        ):
            agent.state = AgentState.INSPECTED
            return
        agent.state = AgentState.RUNNING
        interval = self.settings.heartbeat_interval
        while True:
            agent.wake.clear()
            await self._heartbeat(agent)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(agent.wake.wait(), interval)

    def _ironic(self, path: str) -> str:
        return f"{self.ironic_url.rstrip('/')}{path}"

    async def _inspect(self, agent: HostAgent) -> bool:
        """POST the inventory; a connection that fails is tried again
        (``INSPECTION_ATTEMPTS``, ``lookup_retry`` apart), as IPA's
        ``call_inspector`` retries connection errors: one refused connect must
        not leave the host inspecting until Ironic's inspection timeout."""
        assert self._session is not None
        for attempt in range(1, INSPECTION_ATTEMPTS + 1):
            try:
                async with self._session.post(
                    self._ironic("/v1/continue_inspection"),
                    json=ipa_inventory.inspection_data(agent.host),
                    headers={API_VERSION_HEADER: INSPECTION_VERSION},
                ) as resp:
                    if resp.status in (200, 202):
                        agent.note("inspection data sent")
                        log.info("inspection data sent", host=agent.host.name)
                        return True
                    return False
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("inspection callback failed", host=agent.host.name,
                            error=str(exc), attempt=attempt)
                await asyncio.sleep(self.settings.lookup_retry)
        return False

    async def _lookup(self, agent: HostAgent) -> None:
        assert self._session is not None
        macs = ",".join(n.mac for n in agent.host.inventory.nics)
        warned = False
        while True:
            try:
                async with self._session.get(
                    self._ironic(f"/v1/lookup?addresses={macs}"),
                    headers={API_VERSION_HEADER: LOOKUP_VERSION},
                    timeout=aiohttp.ClientTimeout(total=self.settings.lookup_timeout),
                ) as resp:
                    if resp.status == 200:
                        body = await resp.json()
                        token = body.get("config", {}).get("agent_token")
                        if token and token != "******":
                            agent.node_uuid = body["node"]["uuid"]
                            agent.expects_inspection = _expects_inspection(body["node"])
                            agent.token = token
                            agent.note(f"lookup: node {agent.node_uuid}")
                            log.info("agent looked up", host=agent.host.name, node=agent.node_uuid)
                            return
                        if not warned:
                            log.warning("lookup gave no usable agent token", host=agent.host.name)
                            warned = True
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
                pass
            await asyncio.sleep(self.settings.lookup_retry)

    async def _heartbeat(self, agent: HostAgent) -> None:
        assert self._session is not None
        body = {
            "callback_url": self.callback_url(agent.host),
            "agent_token": agent.token,
            "agent_version": ipa_inventory.AGENT_VERSION,
        }
        try:
            async with self._session.post(
                self._ironic(f"/v1/heartbeat/{agent.node_uuid}"),
                json=body,
                headers={API_VERSION_HEADER: LOOKUP_VERSION},
            ) as resp:
                agent.heartbeats += 1
                if resp.status != 202:
                    log.debug("heartbeat refused", host=agent.host.name, status=resp.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.debug("heartbeat failed", host=agent.host.name, error=str(exc))

    # --- HTTP handlers ----------------------------------------------------

    async def _handle_notify(self, request: web.Request) -> web.Response:
        try:
            system = await request.json()
        except ValueError:
            return web.json_response({"error": "invalid JSON"}, status=400)
        if isinstance(system, dict):
            self.on_system_change(system)
        return web.Response(status=204)

    async def _handle_status(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                name: {"state": a.state.value, "boots": a.boots, "node": a.node_uuid,
                       "heartbeats": a.heartbeats, "images_written": a.images_written}
                for name, a in self.agents.items()
            }
        )

    def _agent_for(self, request: web.Request) -> HostAgent | web.Response:
        agent = self.agents.get(request.match_info["host"])
        if agent is None:
            return _fault(404, f"no such host {request.match_info['host']}")
        if agent.state is not AgentState.RUNNING:
            return _fault(503, "the agent is not running on this host")
        token = request.query.get("agent_token")
        if not token or token != agent.token:
            return _fault(401, "invalid or missing agent token")
        return agent

    async def _handle_list(self, request: web.Request) -> web.Response:
        agent = self._agent_for(request)
        if isinstance(agent, web.Response):
            return agent
        return web.json_response({"commands": [c.to_json() for c in agent.commands]})

    async def _handle_post(self, request: web.Request) -> web.Response:
        agent = self._agent_for(request)
        if isinstance(agent, web.Response):
            return agent
        try:
            body = await request.json()
            name = str(body["name"])
            params = body.get("params") or {}
        except (ValueError, KeyError, TypeError):
            return _fault(400, "invalid command body")
        entry = self._commands.get(name)
        if entry is None:
            return _fault(400, f"Unknown command: {name}")
        if agent.is_busy():
            return _fault(409, f"agent is busy: {agent.commands[-1].name} is running")
        background, handler = entry
        record = CommandRecord(name.partition(".")[2])
        agent.commands.append(record)
        agent.note(f"command {name}")
        log.info("agent command", host=agent.host.name, command=name)
        if not background:
            await self._run(agent, record, handler, params)
            return web.json_response(record.to_json())
        task = asyncio.ensure_future(self._run_async(agent, record, handler, params))
        agent.tasks.add(task)
        task.add_done_callback(agent.tasks.discard)
        if request.query.get("wait") == "true":
            await asyncio.shield(task)
        return web.json_response(record.to_json())

    async def _run(
        self, agent: HostAgent, record: CommandRecord, handler: Handler, params: dict[str, Any]
    ) -> None:
        try:
            record.result = await handler(agent, params)
            record.status = "SUCCEEDED"
        except Exception as exc:
            record.fail(exc)
            agent.note(f"command {record.name} failed: {exc}")
            log.warning("agent command failed", host=agent.host.name, command=record.name,
                        error=str(exc))

    async def _run_async(
        self, agent: HostAgent, record: CommandRecord, handler: Handler, params: dict[str, Any]
    ) -> None:
        await asyncio.sleep(self.settings.step_time)
        await self._run(agent, record, handler, params)
        agent.wake.set()  # IPA heartbeats at once when an async command ends

    # --- commands -----------------------------------------------------------

    async def _noop(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        return None

    async def _get_deploy_steps(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        return ipa_inventory.deploy_steps_result()

    async def _get_clean_steps(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        return ipa_inventory.clean_steps_result()

    async def _execute_deploy_step(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        step = params.get("step") or {}
        if step.get("step") != "write_image":
            raise CommandFailed(f"unknown deploy step {step.get('step')!r}")
        agent.last_image = await self._writer.write(
            agent.host, step.get("args") or {}, params.get("node") or {}
        )
        agent.images_written += 1
        agent.note(f"image {agent.last_image['url']} written to {agent.last_image['disk']}")
        return {"deploy_result": None, "deploy_step": step}

    async def _execute_clean_step(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        step = params.get("step") or {}
        name = step.get("step")
        if name == "erase_devices_metadata":
            await asyncio.to_thread(self.disks.erase_metadata, agent.host)
        elif name == "erase_devices":
            await asyncio.to_thread(self.disks.erase_all, agent.host)
        else:
            raise CommandFailed(f"unknown clean step {name!r}")
        agent.note(f"clean step {name} done")
        return {"clean_result": None, "clean_step": step}

    async def _get_partition_uuids(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        image = agent.last_image or {}
        if image.get("image_type") == "partition":
            return {"root uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{agent.host.uuid}/root"))}
        return {}

    async def _install_bootloader(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        agent.note("bootloader installed")
        return None

    async def _cmd_power_off(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        # Answer first (the result is read by a later GET, if ever), then go.
        self._spawn_detached(self._power_off_later(agent))
        return None

    def _spawn_detached(self, coro: Awaitable[Any]) -> None:
        # Not in agent.tasks: powering off cancels those, this must survive.
        task = asyncio.ensure_future(coro)
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)

    async def _power_off_later(self, agent: HostAgent) -> None:
        await asyncio.sleep(self.settings.step_time)
        try:
            await self._power_off(agent.host)
        except Exception as exc:
            log.warning("agent could not power the host off", host=agent.host.name,
                        error=str(exc))

    async def _collect_logs(self, agent: HostAgent, params: dict[str, Any]) -> Any:
        text = "\n".join(agent.journal).encode() + b"\n"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo("journal")
            info.size = len(text)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(text))
        return {"system_logs": base64.b64encode(buf.getvalue()).decode()}

def _has_media(system: dict[str, Any]) -> bool:
    """Whether the notification shows an inserted virtual CD/DVD image.

    sushy-tools' fake driver records ``boot_image: {device: [path,
    write_protected, inserted]}``.
    """
    media = system.get("boot_image") or {}
    return any(isinstance(v, list | tuple) and v and v[0] for v in media.values())


def _expects_inspection(node: dict[str, Any]) -> bool:
    """Whether this boot is (probably) an inspection, from the lookup reply.

    Real IPA learns it from a kernel parameter, which a pre-built ISO cannot
    carry. Ironic marks managed inspection with ``inspector_manage_boot``;
    cleaning and deploying leave ``clean_steps``/``deploy_steps`` keys. When
    unsure, try: Ironic answers 404 (and logs an error) if it is not waiting.
    """
    info = node.get("driver_internal_info") or {}
    if info.get("inspector_manage_boot"):
        return True
    return not ({"clean_steps", "deploy_steps", "service_steps"} & info.keys())


def _fault(status: int, message: str) -> web.Response:
    """IPA's error shape: Ironic needs ``faultstring``."""
    faultcode = "Client" if status < 500 else "Server"
    return web.json_response({"faultcode": faultcode, "faultstring": message}, status=status)
