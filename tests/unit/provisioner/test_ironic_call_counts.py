"""Ironic API calls per host: the node cache of :class:`IronicClient` and the
calls :class:`IronicProvisioner` makes per reconcile, against a small
in-process fake of Ironic's REST API (the real one is in the integration
tests). The counts are the ``IronicClient`` counters the benchmark reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from racksmith.ironic.client import NODE_FIELDS, IronicClient
from racksmith.ironic.config import IronicSettings
from racksmith.provisioner.base import BMCAccess, HostIdentity
from racksmith.provisioner.ironic import IronicProvisioner
from racksmith.provisioner.ironic_states import IronicTimings

TTL = 0.5


class FakeIronic:
    """Nodes, ports and the provision/power verbs fake-hardware answers
    instantly; every request is recorded as (method, path)."""

    def __init__(self, page_size: int = 1000) -> None:
        self.page_size = page_size
        self.fail_lists = False
        self.nodes: dict[str, dict[str, Any]] = {}
        self.ports: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        app = web.Application(middlewares=[self._record])
        r = app.router
        r.add_get("/v1/nodes", self.list_nodes)
        r.add_post("/v1/nodes", self.create_node)
        r.add_get("/v1/nodes/{node}", self.get_node)
        r.add_patch("/v1/nodes/{node}", self.patch_node)
        r.add_delete("/v1/nodes/{node}", self.delete_node)
        r.add_put("/v1/nodes/{node}/states/provision", self.provision)
        r.add_put("/v1/nodes/{node}/states/power", self.power)
        r.add_get("/v1/nodes/{node}/inventory", self.inventory)
        r.add_get("/v1/ports", self.list_ports)
        r.add_post("/v1/ports", self.create_port)
        self.app = app
        self._runner: web.AppRunner | None = None
        self.url = ""

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        return await handler(request)  # type: ignore[no-any-return]

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def count(self, method: str, prefix: str) -> int:
        return sum(1 for m, p in self.requests if m == method and p.startswith(prefix))

    def _find(self, ident: str) -> dict[str, Any]:
        for node in self.nodes.values():
            if ident in (node["uuid"], node["name"]):
                return node
        raise web.HTTPNotFound(text='{"error_message": "{\\"faultstring\\": \\"not found\\"}"}',
                               content_type="application/json")

    @staticmethod
    def _fields(node: dict[str, Any], request: web.Request) -> dict[str, Any]:
        fields = request.query.get("fields")
        if not fields:
            return dict(node)
        return {k: node.get(k) for k in fields.split(",")}

    async def list_nodes(self, request: web.Request) -> web.Response:
        if self.fail_lists:
            raise web.HTTPInternalServerError(
                text='{"error_message": "{\\"faultstring\\": \\"boom\\"}"}',
                content_type="application/json")
        nodes = sorted(self.nodes.values(), key=lambda n: n["id"])
        marker = request.query.get("marker")
        if marker:
            after = self._find(marker)["id"]
            nodes = [n for n in nodes if n["id"] > after]
        page = nodes[:self.page_size]
        body: dict[str, Any] = {"nodes": [self._fields(n, request) for n in page]}
        if len(nodes) > self.page_size:
            body["next"] = (f"{self.url}/v1/nodes?limit={self.page_size}"
                            f"&marker={page[-1]['uuid']}")
        return web.json_response(body)

    async def create_node(self, request: web.Request) -> web.Response:
        body = await request.json()
        node = {"id": len(self.nodes) + 1, "uuid": body.get("uuid") or str(uuid.uuid4()),
                "name": body["name"], "driver": body["driver"],
                "driver_info": body.get("driver_info", {}),
                "properties": body.get("properties", {}), "instance_info": {},
                "provision_state": "enroll", "target_provision_state": None,
                "power_state": None, "target_power_state": None, "last_error": None,
                "maintenance": False, "fault": None, "automated_clean": None,
                "inspection_finished_at": None}
        self.nodes[node["uuid"]] = node
        return web.json_response(node, status=201)

    async def get_node(self, request: web.Request) -> web.Response:
        return web.json_response(self._fields(self._find(request.match_info["node"]), request))

    async def patch_node(self, request: web.Request) -> web.Response:
        node = self._find(request.match_info["node"])
        for op in await request.json():
            parts = op["path"].strip("/").split("/")
            target = node
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            if op["op"] == "remove":
                target.pop(parts[-1], None)
            else:
                target[parts[-1]] = op["value"]
        return web.json_response(node)

    async def delete_node(self, request: web.Request) -> web.Response:
        node = self._find(request.match_info["node"])
        del self.nodes[node["uuid"]]
        return web.Response(status=204)

    async def provision(self, request: web.Request) -> web.Response:
        node = self._find(request.match_info["node"])
        target = (await request.json())["target"]
        if target == "inspect":
            node["inspection_finished_at"] = "2026-01-01T00:00:00+00:00"
        node["provision_state"] = {"manage": "manageable", "inspect": "manageable",
                                   "provide": "available", "active": "active",
                                   "deleted": "available"}[target]
        return web.Response(status=202)

    async def power(self, request: web.Request) -> web.Response:
        node = self._find(request.match_info["node"])
        node["power_state"] = (await request.json())["target"]
        return web.Response(status=202)

    async def inventory(self, request: web.Request) -> web.Response:
        self._find(request.match_info["node"])
        raise web.HTTPNotFound(text='{"error_message": "{\\"faultstring\\": \\"none\\"}"}',
                               content_type="application/json")

    async def list_ports(self, request: web.Request) -> web.Response:
        node = self._find(request.query["node"])
        return web.json_response(
            {"ports": [p for p in self.ports if p["node_uuid"] == node["uuid"]]})

    async def create_port(self, request: web.Request) -> web.Response:
        body = await request.json()
        port = {"uuid": str(uuid.uuid4()), "node_uuid": body["node_uuid"],
                "address": body["address"], "pxe_enabled": True}
        self.ports.append(port)
        return web.json_response(port, status=201)


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeIronic]:
    ironic = FakeIronic()
    await ironic.start()
    try:
        yield ironic
    finally:
        await ironic.stop()


@pytest_asyncio.fixture
async def cached(fake: FakeIronic) -> AsyncIterator[IronicClient]:
    async with IronicClient(fake.url, node_cache_ttl=TTL) as client:
        yield client


def provisioner_for(client: IronicClient,
                    timings: IronicTimings | None = None) -> IronicProvisioner:
    settings = IronicSettings(data_dir=Path("/nonexistent"), port=1,
                              http_url="http://127.0.0.1:9",
                              http_root=Path("/nonexistent/http"), ipmi=False)
    return IronicProvisioner(client, settings, timings=timings)


HOST = HostIdentity(namespace="metal", name="h1", uid="uid-h1")
BMC = BMCAccess(address="fake://rack/h1", username="admin", password="pw",
                boot_mac_address="52:54:00:00:00:01")


async def new_node(client: IronicClient, name: str = "metal~h0") -> str:
    node = await client.create_node({"name": name, "driver": "fake-hardware"}, host=name)
    return str(node["uuid"])


async def test_reads_between_two_writes_cost_one_call(fake: FakeIronic,
                                                      cached: IronicClient) -> None:
    name = "metal~h0"
    node_id = await new_node(cached, name)
    await cached.set_provision_state(name, "manage")
    before = cached.calls[name]
    for _ in range(5):  # register, inspect, power_state, power… of one reconcile
        node = await cached.get_node(name)
        assert node is not None and node["provision_state"] == "manageable"
    # The listing fetched for the first read may already follow the write:
    # then no per-host read at all; never more than one.
    assert cached.calls[name] - before <= 1
    assert fake.count("GET", f"/v1/nodes/{name}") + fake.count("GET", "/v1/nodes") <= 2
    # The uuid names the same node, written too: it is not served stale.
    fake.nodes[node_id]["power_state"] = "power off"
    await cached.set_power_state(node_id, "power on")
    node = await cached.get_node(name)
    assert node is not None and node["power_state"] == "power on"


async def test_a_write_is_never_hidden_by_older_data(fake: FakeIronic,
                                                     cached: IronicClient) -> None:
    name = "metal~h0"
    await new_node(cached, name)
    first = await cached.get_node(name)
    assert first is not None and first["provision_state"] == "enroll"
    await cached.set_provision_state(name, "manage")
    node = await cached.get_node(name)  # data older than the write: read again
    assert node is not None and node["provision_state"] == "manageable"
    fake.nodes[node["uuid"]]["provision_state"] = "verifying"  # changed by Ironic
    node = await cached.get_node(name)  # within the TTL: served from the last read
    assert node is not None and node["provision_state"] == "manageable"
    await asyncio.sleep(TTL * 1.2)
    node = await cached.get_node(name)  # older than the TTL: fetched again
    assert node is not None and node["provision_state"] == "verifying"


async def test_absent_from_a_fresh_listing_means_absent(fake: FakeIronic,
                                                        cached: IronicClient) -> None:
    await new_node(cached, "metal~other")
    for _ in range(3):
        assert await cached.get_node("metal~missing") is None
    assert fake.count("GET", "/v1/nodes/") == 0
    assert fake.count("GET", "/v1/nodes") == 1
    assert cached.calls["metal~missing"] == 0
    # A node we just deleted is looked up, not taken from the listing.
    await cached.delete_node("metal~other")
    assert await cached.get_node("metal~other") is None
    assert fake.count("GET", "/v1/nodes/metal~other") == 1


async def test_the_listing_follows_pages_and_asks_only_for_needed_fields(
        fake: FakeIronic) -> None:
    fake.page_size = 2
    async with IronicClient(fake.url, node_cache_ttl=TTL) as client:
        for i in range(5):
            await new_node(client, f"metal~p{i}")
        await asyncio.sleep(0.01)
        for i in range(5):
            node = await client.get_node(f"metal~p{i}")
            assert node is not None and set(node) == set(NODE_FIELDS)
        assert await client.get_node("metal~none") is None
    # Created nodes are read directly once (written after any listing);
    # the absent one comes from the three pages of one listing.
    assert fake.count("GET", "/v1/nodes/metal~none") == 0
    assert fake.count("GET", "/v1/nodes") - fake.count("GET", "/v1/nodes/") == 3


async def test_without_a_cache_every_read_is_a_call(fake: FakeIronic) -> None:
    async with IronicClient(fake.url) as client:
        await new_node(client, "metal~h0")
        for _ in range(3):
            node = await client.get_node("metal~h0")
            assert node is not None and "id" in node  # the whole node
        assert client.calls["metal~h0"] == 1 + 3


@pytest.mark.parametrize(("ttl", "expected"), [
    (60.0, [3, 1, 1, 1, 1, 1, 0, 0]),
    (0.0, [4, 1, 3, 2, 3, 2, 2, 2]),  # no cache: every provisioner call reads
])
async def test_provisioner_calls_per_reconcile(fake: FakeIronic, ttl: float,
                                               expected: list[int]) -> None:
    """The per-host calls of each reconcile on the way to ``available`` (the
    controller calls register, then the state's calls). A long TTL keeps the
    one listing fresh, so every read after a write is a per-host read."""
    async with IronicClient(fake.url, node_cache_ttl=ttl) as client:
        p = provisioner_for(client)
        name = HOST.node_name
        reads: list[int] = []

        async def reconcile(*calls: str) -> int:
            before = client.calls[name]
            gets = fake.count("GET", f"/v1/nodes/{name}")
            await p.register(HOST, BMC, credentials_changed=False)
            for call in calls:
                if call == "inspect":
                    await p.inspect(HOST)
                elif call == "prepare":
                    await p.prepare(HOST)
                elif call == "power":  # manage_power, spec.online false, never seen on
                    if await p.power_state(HOST) is True:
                        await p.power(HOST, False)
            reads.append(fake.count("GET", f"/v1/nodes/{name}") - gets)
            return client.calls[name] - before

        # With the cache, per reconcile:
        spent = [
            # registering, node absent (known from the shared listing): POST
            # node, POST port, PUT manage.
            await reconcile(),
            await reconcile(),  # registering, verified: GET
            await reconcile("inspect"),  # the same data: PUT inspect
            # inspecting, done: GET node (fake hardware stores no inventory:
            # not asked for; its one NIC is the boot MAC registration gave a port).
            await reconcile("inspect"),
            await reconcile("prepare"),  # PUT provide
            await reconcile("prepare"),  # GET: available
            # available, spec.online false, power state unknown (fake hardware)
            # and never seen on: nothing to do, as Metal3 (no blind power-off).
            await reconcile("power"),
            await reconcile("power"),
        ]
        assert spent == expected
        if ttl:
            assert reads == [0, 1, 0, 1, 0, 1, 0, 0]  # node reads
            assert fake.count("GET", "/v1/nodes") - fake.count("GET", "/v1/nodes/") == 1
        assert client.power_actions[(name, "power off")] == 0
        assert {t: n for (h, t), n in client.provision_actions.items() if h == name} == {
            "manage": 1, "inspect": 1, "provide": 1}
        out = await p.inspect(HOST)
        assert out.hardware is not None
        assert [(n.mac, n.pxe) for n in out.hardware.nics] == [("52:54:00:00:00:01", True)]
        assert fake.count("GET", "/v1/ports") == 0

        # A restarted process knows no boot MAC of its own: it reads the ports.
        again = await provisioner_for(client).inspect(HOST)
        assert again.hardware == out.hardware
        assert fake.count("GET", "/v1/ports") == 1


@pytest.mark.parametrize("ttl", [0.0, TTL])
async def test_provisioner_acts_once_per_step_with_or_without_cache(
        fake: FakeIronic, ttl: float) -> None:
    async with IronicClient(fake.url, node_cache_ttl=ttl) as client:
        p = provisioner_for(client)
        for _ in range(3):
            await p.register(HOST, BMC, credentials_changed=False)
        for _ in range(3):
            await p.inspect(HOST)
        for _ in range(3):
            await p.prepare(HOST)
        assert (await p.prepare(HOST)).done
        assert {t: n for (h, t), n in client.provision_actions.items()
                if h == HOST.node_name} == {"manage": 1, "inspect": 1, "provide": 1}
        assert len(fake.ports) == 1


async def test_provisioner_asks_to_wait_its_timings(fake: FakeIronic) -> None:
    """The waits after the provisioner's own requests are its ``IronicTimings``."""
    async with IronicClient(fake.url) as client:
        p = provisioner_for(client, IronicTimings(action_poll=0.05, power_poll=0.07))
        registered = await p.register(HOST, BMC, credentials_changed=False)
        assert registered.result.requeue_after == 0.05  # manage requested
        powered = await p.power(HOST, False)
        assert powered.requeue_after == 0.07 and powered.dirty  # power off requested


# --- the background listing (``node_poll_interval``) -----------------------

POLL = 0.02


async def next_listings(client: IronicClient, count: int = 2) -> None:
    """Until ``count`` more background listings have completed."""
    target = client.listings + count
    while client.listings < target:
        await asyncio.sleep(POLL / 4)


async def test_the_poller_serves_reads_without_waiting_for_a_listing(fake: FakeIronic) -> None:
    async with IronicClient(fake.url, node_poll_interval=POLL) as client:
        assert client.polls_nodes
        name = "metal~h0"
        await new_node(client, name)
        first = await client.get_node(name)  # written, not yet listed: read directly
        assert first is not None and first["provision_state"] == "enroll"
        assert fake.count("GET", f"/v1/nodes/{name}") == 1
        await next_listings(client)
        for _ in range(5):
            node = await client.get_node(name)
            assert node is not None and set(node) == set(NODE_FIELDS)
        assert await client.get_node("metal~none") is None  # absent from a complete listing
        assert fake.count("GET", f"/v1/nodes/{name}") == 1
        assert fake.count("GET", "/v1/nodes/metal~none") == 0


async def test_changes_between_two_listings_are_reported_by_name(fake: FakeIronic) -> None:
    async with IronicClient(fake.url, node_poll_interval=POLL) as client:
        await new_node(client, "metal~a")
        await new_node(client, "metal~b")
        await next_listings(client)  # both listed before anyone listens
        seen: list[str] = []

        async def collect() -> None:
            async for name in client.node_changes():
                seen.append(name)

        task = asyncio.create_task(collect())
        try:
            await next_listings(client, 3)
            assert seen == []  # nothing changed since
            await client.set_provision_state("metal~b", "manage")
            await next_listings(client, 2)
            assert seen == ["metal~b"]
            await new_node(client, "metal~c")
            await client.delete_node("metal~a")
            await next_listings(client, 2)
            assert sorted(seen[1:]) == ["metal~a", "metal~c"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert client._subscribers == []


async def test_the_provisioner_reports_changed_hosts(fake: FakeIronic) -> None:
    async with IronicClient(fake.url, node_poll_interval=POLL) as client:
        p = provisioner_for(client)
        changes = p.host_changes()
        first = asyncio.ensure_future(anext(changes))
        await next_listings(client, 2)
        await p.register(HOST, BMC, credentials_changed=False)
        assert await asyncio.wait_for(first, 5) == ("metal", "h1")
        await changes.aclose()


async def test_a_failing_listing_falls_back_to_direct_reads(fake: FakeIronic) -> None:
    async with IronicClient(fake.url, node_poll_interval=POLL,
                            node_stale_after=2 * POLL) as client:
        name = "metal~h0"
        await new_node(client, name)
        await next_listings(client)
        assert await client.get_node(name) is not None
        direct = fake.count("GET", f"/v1/nodes/{name}")
        fake.fail_lists = True
        failed = fake.count("GET", "/v1/nodes") - fake.count("GET", "/v1/nodes/")
        while fake.count("GET", "/v1/nodes") - fake.count("GET", "/v1/nodes/") < failed + 3:
            await asyncio.sleep(POLL / 4)
        node = await client.get_node(name)  # the listing is stale: read directly
        assert node is not None and node["name"] == name
        assert fake.count("GET", f"/v1/nodes/{name}") == direct + 1
        fake.fail_lists = False
        await next_listings(client)  # the poller outlived the failures
        assert await client.get_node(name) is not None
        assert fake.count("GET", f"/v1/nodes/{name}") == direct + 1


async def test_the_listing_stops_when_idle_and_starts_again_on_use(fake: FakeIronic) -> None:
    """A controllers process that lost its leadership makes no more calls and
    listens to no changes: its listing stops; the next call starts it again."""
    async with IronicClient(fake.url, node_poll_interval=POLL,
                            node_poll_idle=POLL * 3) as client:
        await new_node(client, "metal~a")
        assert client.polling
        seen: list[str] = []

        async def collect() -> None:
            async for name in client.node_changes():
                seen.append(name)

        task = asyncio.create_task(collect())
        await next_listings(client, 6)  # a listener keeps it going past the idle time
        assert client.polling
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        async with asyncio.timeout(30):
            while client.polling:
                await asyncio.sleep(POLL / 4)
        stopped_at = client.listings
        await asyncio.sleep(POLL * 3)
        assert client.listings == stopped_at, "no listing while idle"
        assert await client.get_node("metal~a") is not None
        assert client.polling
        await next_listings(client, 1)


def test_slow_listings_are_spaced_out_fast_ones_keep_the_cadence() -> None:
    client = IronicClient("http://127.0.0.1:9", node_poll_interval=1.0, node_stale_after=30.0,
                          node_poll_share=0.2)
    assert client.next_listing_after(0.01) == 1.0  # a few nodes: every second
    assert client.next_listing_after(0.2) == 1.0
    assert client.next_listing_after(0.5) == pytest.approx(2.5)  # listing ≤ 20% of the time
    assert client.next_listing_after(1.2) == pytest.approx(6.0)
    assert client.next_listing_after(10.0) == 15.0  # never past half the staleness bound
    with pytest.raises(ValueError):
        IronicClient("http://127.0.0.1:9", node_poll_interval=1.0, node_poll_share=0.0)
