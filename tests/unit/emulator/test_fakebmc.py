"""The fake BMCs of ``--hardware fake``: power and boot-device semantics,
credentials, bad input and state kept across restarts, over real HTTP on
127.0.0.1 (the API Ironic's ``racksmith-fake`` hardware type calls)."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from racksmith.emulator.fakebmc import FakeBMC
from racksmith.emulator.inventory import EmulatedHost, generate_hosts

HOSTS = generate_hosts(2, seed=3)


class Recorder:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def powers(self) -> list[tuple[str, str, str]]:
        return [(r["name"], r["power_state"], r["boot_device"]) for r in self.records]


@pytest.fixture
async def bmc(tmp_path: Path) -> AsyncIterator[tuple[FakeBMC, Recorder]]:
    rec = Recorder()
    b = FakeBMC(tmp_path / "bmc", 0, HOSTS, lambda h: h.bmc_password, rec)
    await b.start()
    try:
        yield b, rec
    finally:
        await b.stop()


async def call(b: FakeBMC, host: EmulatedHost, method: str, path: str = "",
               body: Any = None, password: str | None = None) -> tuple[int, Any]:
    auth = aiohttp.encode_basic_auth(host.bmc_username, host.bmc_password if password is None
                                     else password)
    async with aiohttp.ClientSession() as s, s.request(
            method, b.system_url(host) + path, json=body,
            headers={"Authorization": auth}) as resp:
        text = await resp.text()
        return resp.status, (await resp.json() if resp.content_type == "application/json"
                             else text)


async def test_power_and_one_time_boot_device(bmc: tuple[FakeBMC, Recorder]) -> None:
    b, rec = bmc
    host = HOSTS[0]
    code, system = await call(b, host, "GET")
    assert code == 200
    assert system["power_state"] == "Off" and system["boot_device"] == "Hdd"
    assert system["macs"] == [n.mac for n in host.inventory.nics]
    assert (await call(b, host, "PUT", "/media", {"inserted": True}))[0] == 204
    assert (await call(b, host, "PUT", "/boot", {"device": "Cd", "persistent": False}))[0] == 204
    assert (await call(b, host, "POST", "/power", {"action": "On"}))[0] == 204
    # The power-on booted the one-time device, which then falls back to disk.
    on = [r for r in rec.records if r["power_state"] == "On"]
    assert on[-1]["boot_device"] == "Cd" and on[-1]["boot_image"]["Cd"][2] is True
    code, system = await call(b, host, "GET")
    assert system["power_state"] == "On" and system["boot_device"] == "Hdd"
    rec.records.clear()
    # A restart is an Off then an On record; an On when on changes nothing.
    assert (await call(b, host, "POST", "/power", {"action": "ForceRestart"}))[0] == 204
    assert (await call(b, host, "POST", "/power", {"action": "On"}))[0] == 204
    assert rec.powers() == [(host.name, "Off", "Hdd"), (host.name, "On", "Hdd")]
    assert (await call(b, host, "POST", "/power", {"action": "GracefulShutdown"}))[0] == 204
    assert (await call(b, host, "GET"))[1]["power_state"] == "Off"
    # A restart of a powered-off host powers it on.
    assert (await call(b, host, "POST", "/power", {"action": "ForceRestart"}))[0] == 204
    assert (await call(b, host, "GET"))[1]["power_state"] == "On"
    # The other host was never touched.
    assert (await call(b, HOSTS[1], "GET"))[1]["power_state"] == "Off"


async def test_wrong_credentials_and_bad_input(bmc: tuple[FakeBMC, Recorder]) -> None:
    b, rec = bmc
    host = HOSTS[0]
    code, text = await call(b, host, "POST", "/power", {"action": "On"},
                            password="not-the-password")
    assert code == 401
    assert "not-the-password" not in text
    async with aiohttp.ClientSession() as s, s.get(b.system_url(host)) as resp:
        assert resp.status == 401
    assert (await call(b, host, "POST", "/power", {"action": "Explode"}))[0] == 400
    assert (await call(b, host, "POST", "/power", ["On"]))[0] == 400
    assert (await call(b, host, "PUT", "/boot", {"device": "Floppy"}))[0] == 400
    assert (await call(b, host, "PUT", "/media", {"inserted": "yes"}))[0] == 400
    async with aiohttp.ClientSession() as s, s.post(
            b.system_url(host) + "/power", data=b"{not json",
            headers={"Authorization": aiohttp.encode_basic_auth(
                host.bmc_username, host.bmc_password)}) as resp:
        assert resp.status == 400
    async with aiohttp.ClientSession() as s, s.get(
            f"{b.url}/systems/no-such-uuid",
            headers={"Authorization": aiohttp.encode_basic_auth(
                host.bmc_username, host.bmc_password)}) as resp:
        assert resp.status == 404
    assert rec.records == []
    assert (await call(b, host, "GET"))[1]["power_state"] == "Off"


async def test_state_survives_a_restart_in_a_private_file(tmp_path: Path) -> None:
    rec = Recorder()
    first = FakeBMC(tmp_path / "bmc", 0, HOSTS, lambda h: h.bmc_password, rec)
    await first.start()
    try:
        assert (await call(first, HOSTS[1], "PUT", "/boot",
                           {"device": "Pxe", "persistent": True}))[0] == 204
        assert (await call(first, HOSTS[1], "POST", "/power", {"action": "On"}))[0] == 204
    finally:
        await first.stop()
    state = tmp_path / "bmc" / "state.json"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    second = FakeBMC(tmp_path / "bmc", 0, HOSTS, lambda h: h.bmc_password, rec)
    assert [h.name for h in second.powered_on()] == [HOSTS[1].name]
    assert second.record(HOSTS[1])["boot_device"] == "Pxe"
