"""The virtual datacenter driven by a real Ironic through its REST API.

Real processes on loopback: standalone Ironic, the sushy-tools Redfish
emulator (extended with per-host inventories and auth) and our emulated
ramdisk agent. Two hosts go through the whole life cycle in parallel:
enroll → manage (wrong password refused, then fixed) → inspect (the
inventory Ironic stores matches the declared one) → provide (cleaning runs
on the agent) → deploy (the image lands in the disk file) → undeploy
(cleaning zeroes the metadata) → available.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from racksmith.emulator.datacenter import VirtualDatacenter
from racksmith.emulator.disks import METADATA_BYTES
from racksmith.emulator.inventory import EmulatedHost, root_disk
from racksmith.ironic.config import IronicSettings
from racksmith.ironic.process import IronicProcess, default_bin_dir

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        not (default_bin_dir() / "ironic").exists(), reason="Ironic venv missing: make install"
    ),
]

HEADERS = {"X-OpenStack-Ironic-API-Version": "latest"}


class Ironic:
    """A minimal Ironic REST client for the test."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self.session = session

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with self.session.request(
            method, f"{self.url}/v1{path}", json=body, headers=HEADERS
        ) as resp:
            text = await resp.text()
            try:
                return resp.status, await resp.json(content_type=None) if text else None
            except ValueError:
                return resp.status, text

    async def node(self, ident: str) -> dict[str, Any]:
        status, body = await self.call("GET", f"/nodes/{ident}")
        assert status == 200, body
        return dict(body)

    async def patch(self, ident: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        status, body = await self.call("PATCH", f"/nodes/{ident}", ops)
        assert status == 200, body
        return dict(body)

    async def provision(self, ident: str, target: str) -> None:
        status, body = await self.call(
            "PUT", f"/nodes/{ident}/states/provision", {"target": target}
        )
        assert status == 202, body

    async def wait(
        self, ident: str, want: str, timeout: float = 90, fail: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            node = await self.node(ident)
            state = node["provision_state"]
            if state == want and node.get("target_provision_state") is None:
                return node
            if state in fail or state.endswith("failed"):
                raise AssertionError(f"{ident}: {state}: {node.get('last_error')}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{ident}: still {state} (want {want}): {node.get('last_error')}"
                )
            await asyncio.sleep(0.5)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[VirtualDatacenter, Ironic]]:
    data = tmp_path / "data"
    # The datacenter binds its listeners now (URLs known); Ironic picks its
    # port at start; the ramdisks learn Ironic's URL before any host boots.
    dc = VirtualDatacenter(data, 2, "", seed=7)
    ironic = IronicProcess(
        IronicSettings(
            data_dir=data,
            port=0,
            http_url=dc.http_url,
            http_root=dc.http_root,
            deploy_iso=dc.deploy_iso_url,
            heartbeat_timeout=5,
            automated_clean=True,
            ipmi=False,
            # Each power sync is a Redfish call per node (~0.4 s of Ironic's
            # CPU); the test changes power only through Ironic.
            sync_power_state_interval=600,
        ),
        supervise=False,
    )
    try:
        await dc.start()
        await ironic.start()
        dc.set_ironic_url(ironic.url)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield dc, Ironic(ironic.url, session)
    except BaseException:
        for log in (data / "ironic" / "ironic.log", data / "emulator" / "redfish" / "redfish.log"):
            if log.exists():
                print(f"--- {log}\n{log.read_text()[-6000:]}")
        raise
    finally:
        await ironic.stop()
        await dc.stop()
        shutil.rmtree(data / "emulator" / "hosts", ignore_errors=True)


async def _life_cycle(
    dc: VirtualDatacenter, ironic: Ironic, host: EmulatedHost, inspect: str
) -> dict[str, float]:
    timings: dict[str, float] = {}
    t0 = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t0
        timings[name] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()

    redfish = dc.redfish
    assert redfish is not None
    status, node = await ironic.call(
        "POST",
        "/nodes",
        {
            "name": host.name,
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "direct",
            "inspect_interface": inspect,
            "management_interface": "redfish",
            "power_interface": "redfish",
            "driver_info": {
                "redfish_address": redfish.url,
                "redfish_system_id": f"/redfish/v1/Systems/{host.uuid}",
                "redfish_username": host.bmc_username,
                "redfish_password": "wrong-password",
                "redfish_verify_ca": False,
                "deploy_iso": dc.deploy_iso_url,
            },
        },
    )
    assert status == 201, node
    uuid = node["uuid"]

    # manage: the BMC refuses the wrong password; the right one works.
    await ironic.provision(uuid, "manage")
    node = await ironic.wait(uuid, "enroll", timeout=60)
    assert node["last_error"], node
    await ironic.patch(
        uuid,
        [{"op": "replace", "path": "/driver_info/redfish_password", "value": dc.password(host)}],
    )
    await ironic.provision(uuid, "manage")
    await ironic.wait(uuid, "manageable", timeout=60)
    lap("manage")

    # inspect: the stored inventory is the declared one.
    await ironic.provision(uuid, "inspect")
    node = await ironic.wait(uuid, "manageable", timeout=90)
    status, data = await ironic.call("GET", f"/nodes/{uuid}/inventory")
    assert status == 200, data
    inv = data["inventory"]
    declared = host.inventory
    assert inv["cpu"]["count"] == declared.cpu.count
    assert inv["memory"]["physical_mb"] == declared.memory_mib
    assert sorted(d["size"] for d in inv["disks"]) == sorted(d.size_bytes for d in declared.disks)
    assert [i["mac_address"] for i in inv["interfaces"]] == [n.mac for n in declared.nics]
    assert node["properties"]["cpu_arch"] == "x86_64"
    status, ports = await ironic.call("GET", f"/ports?node={uuid}")
    assert {p["address"] for p in ports["ports"]} >= {declared.nics[0].mac}
    lap("inspect")

    # provide: automated cleaning runs through the agent.
    await ironic.provision(uuid, "provide")
    await ironic.wait(uuid, "available", timeout=90)
    lap("provide")

    # deploy the sample image: it lands byte for byte on the root disk.
    image = dc.sample_image()
    await ironic.patch(
        uuid,
        [
            {"op": "add", "path": "/instance_info", "value": {
                "image_source": image.url,
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": image.sha256,
                "image_disk_format": "raw",
            }},
        ],
    )
    await ironic.provision(uuid, "active")
    node = await ironic.wait(uuid, "active", timeout=120)
    disk = root_disk(declared)
    path = dc.disk_path(host, disk)
    expected = (dc.images.images_dir / image.name).read_bytes()
    with path.open("rb") as f:
        assert f.read(len(expected)) == expected
    assert node["power_state"] == "power on"
    lap("deploy")

    # undeploy: cleaning zeroes the disks' metadata.
    await ironic.provision(uuid, "deleted")
    await ironic.wait(uuid, "available", timeout=120)
    with path.open("rb") as f:
        assert f.read(METADATA_BYTES) == bytes(METADATA_BYTES)
    lap("undeploy")
    return timings


async def test_two_hosts_full_life_cycle(
    world: tuple[VirtualDatacenter, Ironic],
) -> None:
    dc, ironic = world
    manifest = list(yaml.safe_load_all(dc.manifest_path.read_text()))
    assert [o["kind"] for o in manifest] == ["Secret", "BareMetalHost"] * 2
    assert manifest[1]["spec"]["bmc"]["address"] == dc.bmc_address(dc.hosts[0])

    # One host is inspected in-band by the agent, the other out of band by
    # Redfish: both must report the declared hardware.
    results = await asyncio.gather(
        _life_cycle(dc, ironic, dc.hosts[0], "agent"),
        _life_cycle(dc, ironic, dc.hosts[1], "redfish"),
    )
    print("timings per host (s):", results)
