"""KubeSource against a tiny scripted HTTP server speaking list+watch.

Checks the protocol handling (paths, paging, bookmarks, resume, 410 → re-list,
errors → retry, mappers); the real API server is exercised by the
integration tests. Real-time timeouts here are safety nets only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

from racksmith.election import LeaseConflict, LeaseRecord
from racksmith.runtime import FakeClock, ObjectKey, Resource, owner_keys
from racksmith.runtime.leader import KubeLeaseStore
from racksmith.runtime.source import KubeSource


def obj(name: str, rv: str, ns: str = "ns", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv, **meta}}


class Script:
    """Answers GETs in order: each entry is a list page (dict), a watch
    stream (list of events; ``None`` = hold the stream open) or a status code."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, dict(request.query)))
        answer = self.answers.pop(0) if self.answers else [None]
        if isinstance(answer, int):
            return web.json_response({"kind": "Status", "code": answer}, status=answer)
        if isinstance(answer, dict):
            return web.json_response(answer)
        response = web.StreamResponse()
        await response.prepare(request)
        for event in answer:
            if event is None:
                await asyncio.Event().wait()
            await response.write(json.dumps(event).encode() + b"\n")
        return response


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    servers: list[TestServer] = []
    clients: list[ApiClient] = []

    async def start(script: Script) -> ApiClient:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", script.handle)
        server = TestServer(app)
        await server.start_server()
        servers.append(server)
        config = Configuration(host=str(server.make_url("")).rstrip("/"))
        client = ApiClient(configuration=config)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
    for server in servers:
        await server.close()


async def take(source: KubeSource, n: int) -> list[ObjectKey]:
    keys: list[ObjectKey] = []

    async def collect() -> None:
        async for key in source.keys():
            keys.append(key)
            if len(keys) == n:
                return

    await asyncio.wait_for(collect(), timeout=10)
    return keys


def k(name: str, ns: str = "ns") -> ObjectKey:
    return ObjectKey(ns, name)


async def test_lists_in_pages_watches_resumes_and_relists_on_gone(serve: Any) -> None:
    script = Script(
        {"items": [obj("w1", "5"), obj("w2", "6")], "metadata": {"continue": "p2"}},
        {"items": [obj("w3", "7")], "metadata": {"resourceVersion": "10"}},
        [
            {"type": "ADDED", "object": obj("w4", "11")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
        ],
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}],
        {"items": [obj("w1", "20"), obj("w4", "21")], "metadata": {"resourceVersion": "21"}},
        [{"type": "DELETED", "object": obj("w1", "22")}, None],
    )
    api = await serve(script)
    source = KubeSource(
        api,
        Resource("example.com", "v1", "widgets"),
        namespace="ns",
        label_selector="tier=gold",
        page_size=2,
        clock=FakeClock(),
    )
    keys = await take(source, 9)
    assert keys == [
        k("w1"), k("w2"), k("w3"),  # list
        k("w4"),  # watch event (the bookmark emits nothing)
        k("w1"), k("w4"), k("w2"), k("w3"),  # re-list: current objects, then vanished ones
        k("w1"),  # deleted
    ]  # fmt: skip
    assert source.has_synced
    paths = {path for path, _ in script.requests}
    assert paths == {"/apis/example.com/v1/namespaces/ns/widgets"}
    queries = [q for _, q in script.requests]
    assert queries[0] == {"labelSelector": "tier=gold", "limit": "2"}
    assert queries[1]["continue"] == "p2"
    assert queries[2]["watch"] == "true"
    assert queries[2]["allowWatchBookmarks"] == "true"
    assert queries[2]["resourceVersion"] == "10"
    assert queries[2]["labelSelector"] == "tier=gold"
    assert "timeoutSeconds" in queries[2]
    assert queries[3]["resourceVersion"] == "12"  # resumed from the bookmark
    assert "resourceVersion" not in queries[4] and "watch" not in queries[4]  # re-list
    assert queries[5]["resourceVersion"] == "21"


async def test_core_resources_use_api_v1_and_http_410_relists(serve: Any) -> None:
    script = Script(
        {"items": [obj("n1", "1", ns="")], "metadata": {"resourceVersion": "3"}},
        410,
        {"items": [obj("n2", "4", ns="")], "metadata": {"resourceVersion": "4"}},
        [None],
    )
    api = await serve(script)
    source = KubeSource(api, Resource("", "v1", "nodes"), clock=FakeClock())
    keys = await take(source, 3)
    assert keys == [k("n1", ""), k("n2", ""), k("n1", "")]
    assert script.requests[0][0] == "/api/v1/nodes"


async def test_errors_back_off_on_the_clock_and_keep_the_resource_version(serve: Any) -> None:
    clock = FakeClock()
    script = Script(
        500,
        {"items": [obj("w1", "1")], "metadata": {"resourceVersion": "2"}},
        503,
        [{"type": "MODIFIED", "object": obj("w1", "3")}, None],
    )
    api = await serve(script)
    source = KubeSource(api, Resource("example.com", "v1", "widgets"), clock=clock)
    collected: list[ObjectKey] = []

    async def collect() -> None:
        async for key in source.keys():
            collected.append(key)

    task = asyncio.create_task(collect())
    try:
        for _ in range(500):  # wait (real time, bounded) until the source sleeps
            await asyncio.sleep(0.01)
            if clock.sleepers:
                break
        # The 500 made it back off on the clock: nothing more happens until it moves.
        assert len(script.requests) == 1 and collected == [] and not source.has_synced
        for _ in range(500):
            await clock.advance(1)
            await asyncio.sleep(0.01)
            if len(collected) == 2:
                break
        assert collected == [k("w1"), k("w1")] and source.has_synced
        queries = [q for _, q in script.requests]
        assert len(queries) == 4 and "watch" not in queries[1]
        # The watch that failed is retried from the same resourceVersion, no re-list.
        assert queries[2]["resourceVersion"] == queries[3]["resourceVersion"] == "2"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_secondary_watch_maps_events_to_owners(serve: Any) -> None:
    owned = obj(
        "pod-1",
        "1",
        ownerReferences=[
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w1", "controller": True},
            {"apiVersion": "v1", "kind": "Node", "name": "n1"},
        ],
    )
    moved = obj(
        "pod-1",
        "2",
        ownerReferences=[{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w2"}],
    )
    script = Script(
        {"items": [owned], "metadata": {"resourceVersion": "1"}},
        [{"type": "MODIFIED", "object": moved}, None],
    )
    api = await serve(script)
    source = KubeSource(
        api,
        Resource("", "v1", "pods"),
        mapper=owner_keys("Widget", "example.com"),
        clock=FakeClock(),
    )
    # The new owner and the previous one both hear of the change.
    assert await take(source, 3) == [k("w1"), k("w2"), k("w1")]


async def test_kube_lease_store_round_trip(serve: Any) -> None:
    leases: dict[str, dict[str, Any]] = {}
    bodies: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        name = request.match_info.get("name", "")
        if request.method == "GET":
            if name not in leases:
                return web.json_response({"kind": "Status", "code": 404}, status=404)
            return web.json_response(leases[name])
        body = await request.json()
        bodies.append(body)
        name = body["metadata"]["name"]
        current = leases.get(name)
        if request.method == "POST" and current is not None:
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        if request.method == "PUT" and (
            current is None
            or current["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]
        ):
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        version = int(current["metadata"]["resourceVersion"]) + 1 if current else 1
        body["metadata"]["resourceVersion"] = str(version)
        leases[name] = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)

    app = web.Application()
    base = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
    app.router.add_route("*", base, handle)
    app.router.add_route("*", base + "/{name}", handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Configuration(host=str(server.make_url("")).rstrip("/")))
    try:
        store = KubeLeaseStore(api, "ns", "ctl")
        assert await store.get() is None
        clock = FakeClock()
        created = await store.create(LeaseRecord("a", 15, clock.wall(), clock.wall(), 0))
        assert created.holder_identity == "a" and created.resource_version == "1"
        assert created.renew_time == clock.wall()
        assert bodies[0]["spec"]["renewTime"] == "2025-01-01T00:00:00.000000Z"
        with pytest.raises(LeaseConflict):
            await store.create(created)
        updated = await store.update(LeaseRecord("b", 15, None, clock.wall(), 1, "1"))
        assert updated.holder_identity == "b" and updated.lease_transitions == 1
        with pytest.raises(LeaseConflict):
            await store.update(LeaseRecord("c", 15, None, None, 2, "1"))  # stale
        got = await store.get()
        assert got is not None and got.resource_version == "2"
    finally:
        await api.close()
        await server.close()
