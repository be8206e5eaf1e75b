"""The emulated ramdisk agent against a stand-in Ironic (lookup, heartbeat,
inspection endpoints only): boot on notification, command API semantics,
real image writes and disk erasure, power off through the injected BMC."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from racksmith.emulator.agent import AgentServer, AgentSettings, AgentState
from racksmith.emulator.disks import METADATA_BYTES, DiskStore
from racksmith.emulator.images import SAMPLE_IMAGE, ImageServer
from racksmith.emulator.inventory import EmulatedHost, generate_host, root_disk

NODE = "0b5c8a2e-1111-4222-8333-944455556666"
TOKEN = "t" * 40


@dataclass
class FakeIronic:
    inspect_status: int = 404
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    inspections: list[dict[str, Any]] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    lookup_delay: float = 0.0
    one_token: bool = False  # as Ironic: the token is given once a boot, then "******"
    lookups: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/lookup", self.lookup)
        app.router.add_post("/v1/heartbeat/{node}", self.heartbeat)
        app.router.add_post("/v1/continue_inspection", self.inspect)
        return app

    async def lookup(self, request: web.Request) -> web.Response:
        self.versions.append(request.headers.get("X-OpenStack-Ironic-API-Version", ""))
        self.lookups += 1
        token = "******" if self.one_token and self.lookups > 1 else TOKEN
        await asyncio.sleep(self.lookup_delay)
        return web.json_response(
            {"node": {"uuid": NODE, "properties": {}}, "config": {"agent_token": token}}
        )

    async def heartbeat(self, request: web.Request) -> web.Response:
        self.heartbeats.append(await request.json())
        return web.Response(status=202)

    async def inspect(self, request: web.Request) -> web.Response:
        self.inspections.append(await request.json())
        return web.json_response({}, status=self.inspect_status)


@dataclass
class Rig:
    agent: AgentServer
    ironic: FakeIronic
    images: ImageServer
    host: EmulatedHost
    session: aiohttp.ClientSession
    powered_off: list[str]

    def url(self, path: str = "", token: str = TOKEN, wait: bool = False) -> str:
        return (
            f"{self.agent.callback_url(self.host)}/v1/commands/{path}"
            f"?agent_token={token}&wait={'true' if wait else 'false'}"
        )

    async def command(
        self, name: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[int, Any]:
        async with self.session.post(
            self.url(**kw), json={"name": name, "params": params or {}}
        ) as resp:
            return resp.status, await resp.json()

    async def last(self) -> dict[str, Any]:
        for _ in range(100):
            async with self.session.get(self.url()) as resp:
                commands = (await resp.json())["commands"]
            if commands[-1]["command_status"] != "RUNNING":
                return dict(commands[-1])
            await asyncio.sleep(0.05)
        raise AssertionError("command still running")

    def power(self, state: str, device: str = "Cd", media: bool = True) -> None:
        self.agent.on_system_change(
            {
                "uuid": self.host.uuid,
                "power_state": state,
                "boot_device": device,
                "boot_image": {"Cd": ["/tmp/boot.iso", True, True]} if media else {},
            }
        )

    async def wait_state(self, state: AgentState) -> None:
        for _ in range(100):
            if self.agent.agents[self.host.name].state is state:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"agent is {self.agent.agents[self.host.name].state}")


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, int(port)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    ironic = FakeIronic()
    runner, port = await _serve(ironic.app())
    host = next(
        h for h in (generate_host(i, seed=5) for i in range(50)) if len(h.inventory.disks) >= 2
    )
    powered_off: list[str] = []
    images = ImageServer(tmp_path / "http")
    agent: AgentServer

    async def power_off(h: EmulatedHost) -> None:
        powered_off.append(h.name)
        agent.on_system_change({"uuid": h.uuid, "power_state": "Off"})

    agent = AgentServer(
        [host],
        DiskStore(tmp_path / "hosts"),
        AgentSettings(
            ironic_url=f"http://127.0.0.1:{port}",
            heartbeat_interval=0.2,
            boot_delay=0.0,
            step_time=0.3,
        ),
        power_off=power_off,
    )
    await images.start()
    await agent.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Rig(agent, ironic, images, host, session, powered_off)
    finally:
        await agent.stop()
        await images.stop()
        await runner.cleanup()


async def test_boots_on_power_on_from_cd_and_heartbeats(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    for _ in range(50):
        if rig.ironic.heartbeats:
            break
        await asyncio.sleep(0.05)
    beat = rig.ironic.heartbeats[0]
    assert beat["agent_token"] == TOKEN
    assert beat["callback_url"] == rig.agent.callback_url(rig.host)
    assert beat["agent_version"]
    assert rig.ironic.versions[0] == "1.68"
    assert rig.ironic.inspections  # tried, Ironic said 404: not inspecting
    rig.power("Off")
    assert rig.agent.agents[rig.host.name].state is AgentState.OFF
    rig.power("On", "Hdd")
    assert rig.agent.agents[rig.host.name].state is AgentState.OS
    rig.power("Off")
    rig.power("On", "Cd", media=False)
    assert rig.agent.agents[rig.host.name].state is AgentState.NO_BOOT_DEVICE


async def test_inspection_when_ironic_waits_for_it(rig: Rig) -> None:
    rig.ironic.inspect_status = 202
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.INSPECTED)
    data = rig.ironic.inspections[0]
    assert data["inventory"]["cpu"]["count"] == rig.host.inventory.cpu.count
    assert not rig.ironic.heartbeats


async def test_command_errors(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    status, body = await rig.command("deploy.get_deploy_steps", token="bad")
    assert status == 401 and body["faultstring"]
    status, body = await rig.command("nope.frobnicate")
    assert status == 400 and "Unknown command" in body["faultstring"]
    status, body = await rig.command("clean.execute_clean_step",
                                     {"step": {"step": "erase_devices_metadata"}})
    assert status == 200 and body["command_status"] == "RUNNING"
    assert body["command_name"] == "execute_clean_step"
    status, body = await rig.command("clean.get_clean_steps")
    assert status == 409 and "busy" in body["faultstring"]
    await rig.last()
    status, body = await rig.command("deploy.execute_deploy_step",
                                     {"step": {"step": "frobnicate"}})
    failed = await rig.last()
    assert failed["command_status"] == "FAILED"
    assert isinstance(failed["command_error"], dict) and failed["command_error"]["message"]


async def test_write_image_then_erase_metadata(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    image = rig.images.describe(SAMPLE_IMAGE)
    data = (rig.images.images_dir / SAMPLE_IMAGE).read_bytes()
    step = {
        "interface": "deploy",
        "step": "write_image",
        "args": {
            "image_info": {
                "urls": [image.url],
                "os_hash_algo": "sha256",
                "os_hash_value": image.sha256,
                "disk_format": "raw",
            },
            "configdrive": "aGVsbG8=",
        },
    }
    status, _body = await rig.command("deploy.execute_deploy_step", {"step": step, "node": {}})
    assert status == 200
    done = await rig.last()
    assert done["command_status"] == "SUCCEEDED", done
    assert done["command_result"]["deploy_step"] == step
    disk = root_disk(rig.host.inventory)
    path = rig.agent.disks.disk_path(rig.host, disk)
    with path.open("rb") as f:
        assert f.read(len(data)) == data
    assert rig.agent.disks.configdrive_path(rig.host, disk).read_bytes() == b"hello"

    # A wrong checksum fails the step with a dict error.
    bad = {**step, "args": {"image_info": {**step["args"]["image_info"],  # type: ignore[dict-item]
                                           "os_hash_value": hashlib.sha256(b"x").hexdigest()}}}
    await rig.command("deploy.execute_deploy_step", {"step": bad, "node": {}})
    failed = await rig.last()
    assert failed["command_status"] == "FAILED"
    assert "checksum" in failed["command_error"]["message"]

    # Root device hints pick another disk.
    other = max(rig.host.inventory.disks, key=lambda d: d.size_bytes)
    node = {"properties": {"root_device": {"serial": other.serial}}}
    await rig.command("deploy.execute_deploy_step", {"step": step, "node": node})
    assert (await rig.last())["command_status"] == "SUCCEEDED"
    with rig.agent.disks.disk_path(rig.host, other).open("rb") as f:
        assert f.read(len(data)) == data

    await rig.command("clean.execute_clean_step", {"step": {"step": "erase_devices_metadata"}})
    assert (await rig.last())["command_status"] == "SUCCEEDED"
    with path.open("rb") as f:
        head = f.read(len(data))
    assert head[:METADATA_BYTES] == bytes(METADATA_BYTES)
    assert head[METADATA_BYTES:] == data[METADATA_BYTES:]


async def test_downloads_only_from_loopback(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    step = {"step": "write_image",
            "args": {"image_info": {"urls": ["http://192.0.2.1/os.img"]}}}
    await rig.command("deploy.execute_deploy_step", {"step": step, "node": {}})
    failed = await rig.last()
    assert failed["command_status"] == "FAILED"
    assert "127.0.0.1" in failed["command_error"]["message"]


async def test_power_off_command_powers_off_through_the_bmc(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    status, _body = await rig.command("standby.power_off")
    assert status == 200
    await rig.wait_state(AgentState.OFF)
    assert rig.powered_off == [rig.host.name]
    async with rig.session.get(rig.url()) as resp:
        assert resp.status == 503


async def test_logs_and_sync_commands(rig: Rig) -> None:
    rig.power("On", "Cd")
    await rig.wait_state(AgentState.RUNNING)
    status, body = await rig.command("standby.sync", wait=True)
    assert status == 200 and body["command_status"] == "SUCCEEDED"
    status, body = await rig.command("log.collect_system_logs", wait=True)
    assert body["command_result"]["system_logs"]
    status, body = await rig.command("standby.get_partition_uuids", wait=True)
    assert body["command_result"] == {}


async def _no_power_off(_host: EmulatedHost) -> None:
    return None


async def test_a_slow_lookup_is_waited_for_not_given_up(tmp_path: Path) -> None:
    """Ironic issues the agent token once a boot: a lookup given up before its
    answer would lose it for good. The lookup waits longer than any other call."""
    ironic = FakeIronic(lookup_delay=0.5, one_token=True)
    runner, port = await _serve(ironic.app())
    host = generate_host(0, seed=5)
    agent = AgentServer(
        [host], DiskStore(tmp_path / "hosts"),
        AgentSettings(ironic_url=f"http://127.0.0.1:{port}", heartbeat_interval=0.2,
                      boot_delay=0.0, lookup_retry=0.05, request_timeout=0.1,
                      lookup_timeout=30.0),
        power_off=_no_power_off)
    await agent.start()
    try:
        agent.on_system_change({"uuid": host.uuid, "power_state": "On", "boot_device": "Cd",
                                "boot_image": {"Cd": ["/tmp/boot.iso", True, True]}})
        for _ in range(200):
            if ironic.heartbeats:
                break
            await asyncio.sleep(0.05)
        assert ironic.lookups == 1
        assert ironic.heartbeats and ironic.heartbeats[0]["agent_token"] == TOKEN
    finally:
        await agent.stop()
        await runner.cleanup()
