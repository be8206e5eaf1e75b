"""The runtime's Client and shared informers against the real API server.

Covered: the one error model (NotFound as None, AlreadyExists, Conflict as a
temporary error, Invalid with its field causes, delete preconditions, an
eviction of a missing pod), reads from the shared cache once synced (and
live reads), a write read back at once (the answer offered to the cache),
label selectors and indexes (owner, label, field) answered from the store,
sources sharing one informer (one list+watch per resource), the informer
stopping and emptying its store with its last user, and the controller
requeueing a Conflict without counting it as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.runtime import Controller, Done, ObjectKey, Result
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, Conflict, Invalid, TemporaryError
from racksmith.runtime.informer import field_index, field_index_name, label_index, owner_uid_index
from racksmith.runtime.resources import SECRETS, VOLUMES
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "controllers.md"


def secret(name: str, ns: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "stringData": {"k": "v"}}


def volume(name: str) -> dict[str, Any]:
    return {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
            "metadata": {"name": name},
            "spec": {"nodeName": "node-1", "storageClassName": "local",
                     "sparseLoopDevice": {"size": "1Gi"}}}


@contextlib.asynccontextmanager
async def consuming(client: Client, *sources: Any) -> AsyncIterator[list[ObjectKey]]:
    """Run the sources' key iterators (as a controller would) until the end."""
    seen: list[ObjectKey] = []

    async def pump(source: Any) -> None:
        async for key in source.keys():
            seen.append(key)

    tasks = [asyncio.create_task(pump(s)) for s in sources]
    try:
        await eventually(lambda: all(s.has_synced for s in sources), "sources synced")
        yield seen
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_error_model(client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    assert await c.get(SECRETS, ns, "absent") is None
    made = await c.create(SECRETS, secret("s1", ns))
    with pytest.raises(AlreadyExists):
        await c.create(SECRETS, secret("s1", ns))
    fresh = await c.get(SECRETS, ns, "s1")
    assert fresh is not None
    fresh["metadata"]["labels"] = {"a": "1"}
    await c.update(SECRETS, fresh)
    made["metadata"]["labels"] = {"a": "2"}  # the resourceVersion read before
    with pytest.raises(Conflict) as lost:
        await c.update(SECRETS, made)
    assert isinstance(lost.value, TemporaryError) and lost.value.status == 409
    bad = volume("rt-client-bad")
    bad["spec"]["sparseLoopDevice"]["size"] = "a lot"
    with pytest.raises(Invalid) as refused:
        await c.create(VOLUMES, bad)
    assert refused.value.status == 422
    assert any("size" in cause.field for cause in refused.value.causes), refused.value.causes
    with pytest.raises(Conflict):
        await c.delete(SECRETS, ns, "s1", uid="not-its-uid")
    assert await c.delete(SECRETS, ns, "s1")
    assert not await c.delete(SECRETS, ns, "s1")
    assert await c.evict(ns, "no-such-pod") is None
    patched = await c.create(SECRETS, secret("s2", ns))
    out = await c.patch(SECRETS, ns, "s2", {"metadata": {"labels": {"p": "q"}}})
    assert out["metadata"]["labels"] == {"p": "q"}
    assert out["metadata"]["resourceVersion"] != patched["metadata"]["resourceVersion"]


async def test_reads_from_the_shared_cache_and_sees_its_own_writes(
        client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    first = await c.create(SECRETS, secret("c1", ns, tier="gold"))
    await c.create(SECRETS, secret("c2", ns, tier="silver"))
    a, b = c.source(SECRETS, namespace=ns), c.source(SECRETS, namespace=ns)
    assert a.informer is b.informer  # one list+watch for both
    assert not c.cached(SECRETS, ns)
    async with consuming(c, a, b) as seen:
        assert c.cached(SECRETS, ns)
        assert seen.count(ObjectKey(ns, "c1")) == 2  # each source had the snapshot
        got = await c.get(SECRETS, ns, "c1")
        assert got is not None and got["metadata"]["uid"] == first["metadata"]["uid"]
        got["metadata"]["labels"]["tier"] = "mutated"  # a copy: the store is untouched
        assert (await c.get(SECRETS, ns, "c1") or {})["metadata"]["labels"]["tier"] == "gold"
        gold = await c.list(SECRETS, ns, labels={"tier": "gold"})
        assert [o["metadata"]["name"] for o in gold] == ["c1"]
        # copy=False: the cached objects themselves (read-only callers), the same answer.
        shared = await c.list(SECRETS, ns, labels={"tier": "gold"}, copy=False)
        assert shared == gold
        assert shared[0] is (await c.list(SECRETS, ns, labels={"tier": "gold"}, copy=False))[0]
        assert gold[0] is not shared[0]
        assert [o["metadata"]["name"] for o in await c.list(SECRETS, ns, labels="tier!=gold")] \
            == ["c2"]
        current = await c.get(SECRETS, ns, "c1")
        assert current is not None
        current["metadata"]["labels"]["tier"] = "bronze"
        written = await c.update(SECRETS, current)
        # Read back at once, before (or after) the watch event: never older.
        again = await c.get(SECRETS, ns, "c1")
        assert again is not None
        assert int(again["metadata"]["resourceVersion"]) >= int(
            written["metadata"]["resourceVersion"])
        # A new object reaches the cache through the watch.
        await c.create(SECRETS, secret("c3", ns, tier="gold"))
        await eventually(lambda: a.informer.get(ObjectKey(ns, "c3")) is not None, "c3 cached")
        # Indexes, added while running.
        c.add_index(SECRETS, "tier", label_index("tier"), namespace=ns)
        c.add_index(SECRETS, field_index_name("type"), field_index("type"), namespace=ns)
        names = [o["metadata"]["name"] for o in a.informer.by_index("tier", "gold")]
        assert names == ["c3"]
        typed = await c.list(SECRETS, ns, fields={"type": "Opaque"})
        assert {o["metadata"]["name"] for o in typed} == {"c1", "c2", "c3"}
        live = await c.list(SECRETS, ns, live=True)
        assert {o["metadata"]["name"] for o in live} == {"c1", "c2", "c3"}
    # The last user gone: the informer stops and empties its store.
    await eventually(lambda: not a.informer.running, "informer stopped")
    assert len(a.informer) == 0 and not c.cached(SECRETS, ns)


async def test_owner_index(client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    owner = await c.create(SECRETS, secret("owner", ns))
    child = secret("child", ns)
    child["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "Secret", "name": "owner",
        "uid": owner["metadata"]["uid"]}]
    await c.create(SECRETS, child)
    c.add_index(SECRETS, "owner", owner_uid_index, namespace=ns)
    async with consuming(c, c.source(SECRETS, namespace=ns)):
        informer = c.informer(SECRETS, ns)
        owned = informer.by_index("owner", owner["metadata"]["uid"])
        assert [o["metadata"]["name"] for o in owned] == ["child"]


class Racer:
    """Loses one optimistic race, then wins."""

    def __init__(self, client: Client, ns: str) -> None:
        self.client, self.ns, self.calls = client, ns, 0

    async def reconcile(self, key: ObjectKey) -> Result:
        self.calls += 1
        obj = await self.client.get(SECRETS, key.namespace, key.name, live=True)
        assert obj is not None
        if self.calls == 1:
            stale = dict(obj, metadata={**obj["metadata"], "resourceVersion": "1"})
            await self.client.update(SECRETS, stale)  # raises Conflict
        return Done()


async def test_a_conflict_is_requeued_not_counted_as_an_error(
        client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    await c.create(SECRETS, secret("racer", ns))
    racer = Racer(c, ns)
    controller = Controller("racer", c.source(SECRETS, namespace=ns), racer)
    controller.start()
    try:
        await eventually(lambda: racer.calls >= 2, "the key reconciled again")
        reconciles = controller.metrics.reconciles
        assert reconciles.labels(controller="racer", result="conflict")._value.get() == 1
        assert controller.metrics.errors.labels(controller="racer")._value.get() == 0
    finally:
        await controller.stop(grace=1.0)


async def test_by_index_from_the_cache_or_live(client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    await c.create(SECRETS, secret("i1", ns, role="db"))
    await c.create(SECRETS, secret("i2", ns, role="web"))
    c.add_index(SECRETS, "role", label_index("role"), namespace=ns)
    live = await c.by_index(SECRETS, "role", "db", ns)  # nothing serves yet: a live list
    assert [o["metadata"]["name"] for o in live] == ["i1"]
    assert c.indexed(SECRETS, "role", "db", ns) == []
    async with consuming(c, c.source(SECRETS, namespace=ns)):
        cached = await c.by_index(SECRETS, "role", "web", ns)
        assert [o["metadata"]["name"] for o in cached] == ["i2"]
        assert [o["metadata"]["name"] for o in c.indexed(SECRETS, "role", "db", ns)] == ["i1"]


async def test_the_informer_with_the_index_serves_it(client: ApiClient, ns: str) -> None:
    c = Client(client, field_manager="test")
    await c.create(SECRETS, secret("p1", ns, role="db"))
    c.add_index(SECRETS, "role", label_index("role"), namespace=ns)
    # A cluster-wide informer without the index and a namespaced one with it:
    # the namespaced one answers the indexed read.
    async with consuming(c, c.source(SECRETS), c.source(SECRETS, namespace=ns)):
        assert [o["metadata"]["name"] for o in c.indexed(SECRETS, "role", "db", ns)] == ["p1"]


async def test_as_client_of_an_object_that_cannot_be_weakly_referenced() -> None:
    stand_in = object()
    assert as_client(stand_in).api_client is stand_in  # type: ignore[arg-type]
    assert as_client(as_client(stand_in)) is not None


async def test_the_guide_example_reconciles(client: ApiClient) -> None:
    """docs/controllers.md's example, as written, against the server."""
    text = GUIDE.read_text()
    block = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert block is not None
    scope: dict[str, Any] = {}
    exec(compile(block.group(1), "docs/controllers.md", "exec"), scope)
    c = Client(client, field_manager="guide")
    await c.create(VOLUMES, volume("rt-guide"))
    try:
        reconciler = scope["VolumeReconciler"](c)
        assert await reconciler.reconcile(ObjectKey("", "rt-guide")) == Done()
        got = await c.get(VOLUMES, None, "rt-guide")
        assert got is not None and got["status"]["phase"] == "Available"
        assert await reconciler.reconcile(ObjectKey("", "absent")) == Done()
    finally:
        await c.delete(VOLUMES, None, "rt-guide")
