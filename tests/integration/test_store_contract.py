"""The Store contract, run against both backends: SQLite and a real etcd.

Every test gets a fresh store (a new SQLite file; a new key prefix on the
module's one-member etcd with TLS), so resourceVersions are contiguous within
a test on both: the assertions count from the rv the store started at. What
only one backend does (SQLite's group commit and file recovery, etcd's
replicas) is tested in tests/unit/store/test_sqlite_store.py and
tests/integration/test_etcd_store.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from racksmith.apiserver.store.base import (
    AlreadyExistsError,
    ConflictError,
    EventType,
    Expired,
    Key,
    NotFoundError,
    Obj,
    Scope,
    Store,
    StoreUnavailableError,
    TooLargeError,
    WatchEvent,
)
from racksmith.apiserver.store.etcd import EtcdStore
from racksmith.apiserver.store.sqlite import SqliteStore
from tests.harness.etcd import etcd_config
from tests.harness.storemodel import NODES, PODS, collect, obj, rv_of, settled

pytestmark = pytest.mark.asyncio(loop_scope="module")

BACKENDS = ["sqlite", "etcd"]

Factory = Callable[..., Awaitable[Store]]


@pytest_asyncio.fixture(params=BACKENDS, loop_scope="module")
async def make_store(request: pytest.FixtureRequest, tmp_path: Path
                     ) -> AsyncIterator[Factory]:
    """``await make_store(**options)``: a new open store of the backend; the
    same options again reopen the same data (a restart)."""
    opened: list[Store] = []
    prefix = f"/contract-{uuid.uuid4().hex}"

    async def make(**options: Any) -> Store:
        store: Store
        if request.param == "sqlite":
            store = SqliteStore(tmp_path / "store.db", **options)
        else:
            cluster = request.getfixturevalue("etcd")
            store = EtcdStore(etcd_config(cluster, prefix), **options)
        await store.open()
        opened.append(store)
        return store

    make.backend = request.param  # type: ignore[attr-defined]
    yield make
    for store in opened:
        await store.close()


@pytest_asyncio.fixture(loop_scope="module")
async def store(make_store: Factory) -> Store:
    return await make_store()


async def test_crud(store: Store) -> None:
    base = store.current_rv()
    k = Key(PODS, "default", "a")
    created = await store.create(k, obj("a", "default", x=1))
    assert rv_of(created) == base + 1 and created["spec"] == {"x": 1}
    await settled(store, base + 1)
    got = await store.get(k)
    assert got == created
    got["spec"]["x"] = 99  # returned copies are the caller's
    assert (await store.get(k))["spec"] == {"x": 1}
    updated = await store.update(k, obj("a", "default", x=2))
    assert rv_of(updated) == base + 2
    assert (await store.get(k))["spec"] == {"x": 2}
    deleted = await store.delete(k)
    assert rv_of(deleted) == base + 3 and deleted["spec"] == {"x": 2}
    with pytest.raises(NotFoundError):
        await store.get(k)
    await settled(store, base + 3)


async def test_caller_object_not_mutated(store: Store) -> None:
    o = obj("a")
    await store.create(Key(NODES, "", "a"), o)
    assert "resourceVersion" not in o["metadata"]
    made = await store.create(Key(NODES, "", "b"), {"kind": "NoMeta"})
    assert rv_of(await store.get(Key(NODES, "", "b"))) == rv_of(made)


async def test_errors(store: Store) -> None:
    k = Key(PODS, "ns", "a")
    first = rv_of(await store.create(k, obj("a", "ns")))
    with pytest.raises(AlreadyExistsError):
        await store.create(k, obj("a", "ns"))
    with pytest.raises(NotFoundError):
        await store.update(Key(PODS, "ns", "zz"), obj("zz", "ns"))
    with pytest.raises(NotFoundError):
        await store.delete(Key(PODS, "ns", "zz"))
    with pytest.raises(NotFoundError):
        await store.delete(Key(PODS, "ns", "zz"), expected_rv=first)
    with pytest.raises(ConflictError):
        await store.update(k, obj("a", "ns"), expected_rv=first + 7)
    with pytest.raises(ConflictError):
        await store.delete(k, expected_rv=first + 7)
    with pytest.raises(TypeError):
        await store.create(Key(PODS, "ns", "bad"), {"metadata": {}, "x": object()})
    # failed operations consume no resourceVersion
    ok = await store.update(k, obj("a", "ns", v=2), expected_rv=first)
    assert rv_of(ok) == first + 1
    gone = await store.delete(k, expected_rv=first + 1)
    assert rv_of(gone) == first + 2


async def test_rv_unique_and_increasing_under_concurrency(store: Store) -> None:
    base = store.current_rv()
    keys = [Key(PODS, f"ns{i % 3}", f"p{i}") for i in range(200)]
    created = await asyncio.gather(*(store.create(k, obj(k.name, k.namespace)) for k in keys))
    assert sorted(rv_of(c) for c in created) == list(range(base + 1, base + 201))
    await settled(store, base + 200)
    results = await asyncio.gather(
        store.create(keys[0], obj("p0")), store.update(keys[1], obj("p1")),
        store.delete(Key(PODS, "nope", "x")), return_exceptions=True)
    assert isinstance(results[0], AlreadyExistsError)
    assert isinstance(results[2], NotFoundError)
    assert isinstance(results[1], dict) and rv_of(results[1]) == base + 201


async def test_list_scope_and_order(store: Store) -> None:
    # "a-b" sorts after "a" as a namespace though '-' sorts before '/' in bytes
    for ns in ("b", "a-b", "a", "c"):
        for name in ("y", "x", "x-1"):
            await store.create(Key(PODS, ns, name), obj(name, ns))
    last = rv_of(await store.create(Key(NODES, "", "n1"), obj("n1")))
    await settled(store, last)
    res = await store.list(Scope(PODS))
    got = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in res.items]
    assert got == sorted(got) and len(got) == 12
    assert res.rv >= last and res.next_name is None and res.remaining == 0
    res = await store.list(Scope(PODS, "a"))
    assert [o["metadata"]["name"] for o in res.items] == ["x", "x-1", "y"]
    assert [o["metadata"]["name"] for o in (await store.list(Scope(NODES))).items] == ["n1"]
    assert (await store.list(Scope("apps/deployments"))).items == []
    assert (await store.list(Scope(PODS, "zzz"))).items == []
    for o in (await store.list(Scope(PODS))).items:
        assert o == await store.get(Key(PODS, o["metadata"]["namespace"],
                                        o["metadata"]["name"]))


async def test_pagination(store: Store) -> None:
    keys = sorted(Key(PODS, f"ns{i % 4}", f"p{i:03d}") for i in range(50))
    for k in keys:
        await store.create(k, obj(k.name, k.namespace))
    seen: list[Key] = []
    after: Key | None = None
    while True:
        page = await store.list(Scope(PODS), after=after, limit=7)
        seen += [Key(PODS, o["metadata"]["namespace"], o["metadata"]["name"])
                 for o in page.items]
        assert page.remaining == len(keys) - len(seen)
        if page.next_name is None:
            break
        assert page.next_name == seen[-1]
        after = page.next_name
    assert seen == keys
    page = await store.list(Scope(PODS, "ns0"), limit=13)
    assert len(page.items) == 13 and page.next_name is None and page.remaining == 0
    page = await store.list(Scope(PODS, "ns0"), limit=5)
    assert page.remaining == 8 and page.next_name == Key(PODS, "ns0", "p016")


async def test_list_contains_prefilters_and_pages(store: Store) -> None:
    """``contains`` keeps only objects whose stored JSON holds every needle
    (a selector's prefilter); paging over it loses and repeats nothing."""
    keys = sorted(Key(PODS, f"ns{i % 3}", f"p{i:03d}") for i in range(40))
    for i, k in enumerate(sorted(keys, key=lambda k: k.name)):
        o = obj(k.name, k.namespace)
        o["metadata"]["labels"] = {"tier": "web" if i % 4 == 0 else "db", "app": "x"}
        await store.create(k, o)
    want = [k for i, k in enumerate(sorted(keys, key=lambda k: k.name)) if i % 4 == 0]
    needles = (b'"tier":"web"', b'"app":"x"')
    res = await store.list(Scope(PODS), contains=needles)
    assert [key_of(o) for o in res.items] == sorted(want) and res.next_name is None
    seen: list[Key] = []
    after: Key | None = None
    for _ in range(50):
        page = await store.list(Scope(PODS), after=after, limit=3, contains=needles)
        assert len(page.items) <= 3 and page.remaining == 0
        seen += [key_of(o) for o in page.items]
        if page.next_name is None:
            break
        after = page.next_name
    assert seen == sorted(want)
    assert (await store.list(Scope(PODS), contains=(b'"tier":"none"',))).items == []
    assert len((await store.list(Scope(PODS, "ns1"), contains=(b'"app":"x"',))).items) == 13


def key_of(o: Obj) -> Key:
    return Key(PODS, o["metadata"]["namespace"], o["metadata"]["name"])


async def test_watch_live_and_scope(store: Store) -> None:
    base = store.current_rv()
    w_all = store.watch(Scope(PODS), base)
    w_ns = store.watch(Scope(PODS, "a"), base)
    t_all = asyncio.create_task(collect(w_all, 3))
    t_ns = asyncio.create_task(collect(w_ns, 2))
    await asyncio.sleep(0.05)
    await store.create(Key(PODS, "a", "1"), obj("1", "a"))
    await store.create(Key(NODES, "", "n"), obj("n"))
    await store.create(Key(PODS, "b", "1"), obj("1", "b"))
    await store.update(Key(PODS, "a", "1"), obj("1", "a", v=2))
    evs = await t_all
    assert [(e.type, e.key, e.rv) for e in evs] == [
        (EventType.ADDED, Key(PODS, "a", "1"), base + 1),
        (EventType.ADDED, Key(PODS, "b", "1"), base + 3),
        (EventType.MODIFIED, Key(PODS, "a", "1"), base + 4)]
    assert [e.rv for e in await t_ns] == [base + 1, base + 4]
    assert rv_of(evs[2].obj) == base + 4 and evs[2].obj["spec"] == {"v": 2}


async def test_watch_replay_then_live_under_concurrent_writes(store: Store) -> None:
    base = store.current_rv()
    for i in range(100):
        await store.create(Key(PODS, "a", f"pre{i}"), obj(f"pre{i}", "a"))
    await settled(store, base + 100)
    listed = await store.list(Scope(PODS))
    n_more = 300

    async def writer(j: int) -> None:
        for i in range(n_more // 6):
            await store.create(Key(PODS, "a", f"w{j}-{i}"), obj("x", "a"))
            await store.create(Key(NODES, "", f"w{j}-{i}"), obj("x"))

    tasks = [asyncio.create_task(writer(j)) for j in range(3)]
    await asyncio.sleep(0.01)
    starts = (base, base + 50, listed.rv)
    watches = []
    for since in starts:
        watches.append(asyncio.create_task(collect(
            store.watch(Scope(PODS), since), 100 + n_more // 2 - min(since - base, 100))))
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks)
    all_pods = [e.rv for e in await collect(store.watch(Scope(PODS), base), 250)]
    assert len(all_pods) == 250 and all_pods == sorted(set(all_pods))
    for since, t in zip(starts, watches, strict=True):
        evs = await t
        assert all(e.key.resource == PODS for e in evs)
        assert [e.rv for e in evs] == [r for r in all_pods if r > since], \
            "rv order, no gap, no duplicate"


async def test_watch_deleted_carries_last_state(store: Store) -> None:
    base = store.current_rv()
    k = Key(PODS, "a", "x")
    await store.create(k, obj("x", "a", v=1))
    t = asyncio.create_task(collect(store.watch(Scope(PODS), base), 2))
    await asyncio.sleep(0.02)
    await store.delete(k)
    evs = await t
    assert [(e.type, e.rv) for e in evs] == [(EventType.ADDED, base + 1),
                                             (EventType.DELETED, base + 2)]
    assert evs[1].obj["spec"] == {"v": 1} and rv_of(evs[1].obj) == base + 2


async def test_state_before(store: Store) -> None:
    k = Key(PODS, "a", "x")
    one = rv_of(await store.create(k, obj("x", "a", v=1)))
    two = rv_of(await store.update(k, obj("x", "a", v=2)))
    three = rv_of(await store.delete(k))
    await settled(store, three)
    known, before = await store.state_before(k, one)
    assert known and before is None
    known, before = await store.state_before(k, two)
    assert known and before is not None and before["spec"] == {"v": 1}
    known, before = await store.state_before(k, three)
    assert known and before is not None and before["spec"] == {"v": 2}


async def test_expired_after_compaction(make_store: Factory) -> None:
    backend = make_store.backend  # type: ignore[attr-defined]
    if backend == "sqlite":
        store = await make_store(event_log_size=20)
    else:
        store = await make_store(watch_cache_size=20)
    base = store.current_rv()
    for i in range(50):
        await store.create(Key(PODS, "", f"p{i}"), obj(f"p{i}"))
    await settled(store, base + 50)
    if isinstance(store, EtcdStore):
        await store.compact(base + 30)
    oldest = store.oldest_rv()
    assert base + 29 <= oldest < base + 50
    with pytest.raises(Expired):
        await collect(store.watch(Scope(PODS), base), 1)
    with pytest.raises(Expired):
        await collect(store.watch(Scope(PODS), oldest - 1), 1)
    evs = await collect(store.watch(Scope(PODS), oldest), base + 50 - oldest)
    assert [e.rv for e in evs] == list(range(oldest + 1, base + 51))


async def test_slow_watcher_expires_without_blocking(make_store: Factory) -> None:
    store = await make_store(watch_queue_size=10)
    base = store.current_rv()
    await store.create(Key(PODS, "", "p0"), obj("p0"))
    slow = store.watch(Scope(PODS), base)
    assert (await anext(slow)).rv == base + 1  # subscribed; now it stops consuming
    await settled(store, base + 1)
    fast_task = asyncio.create_task(collect(store.watch(Scope(PODS), base + 1), 30))
    await asyncio.sleep(0.02)
    for i in range(30):
        await store.create(Key(PODS, "", f"q{i}"), obj("q"))
        await asyncio.sleep(0)
    assert len(await fast_task) == 30
    with pytest.raises(Expired):
        async for _ in slow:
            pass


async def test_close_ends_watches(make_store: Factory) -> None:
    store = await make_store()
    base = store.current_rv()
    await store.create(Key(PODS, "", "a"), obj("a"))
    got: list[WatchEvent] = []
    started = asyncio.Event()

    async def consume() -> None:
        async for ev in store.watch(Scope(PODS), base):
            got.append(ev)
            started.set()

    t = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 5)
    await store.close()
    await asyncio.wait_for(t, 5)
    assert [e.rv for e in got] == [base + 1]
    assert [e async for e in store.watch(Scope(PODS), base)] == []
    with pytest.raises(StoreUnavailableError):
        await store.create(Key(PODS, "", "b"), obj("b"))
    with pytest.raises(StoreUnavailableError):
        await store.get(Key(PODS, "", "a"))
    with pytest.raises(StoreUnavailableError):
        await store.list(Scope(PODS))
    await store.close()  # idempotent


async def test_the_rv_never_runs_ahead_of_the_events(make_store: Factory) -> None:
    """A store's resourceVersion names only writes its watches can give: a
    write made right after open (before etcd's watch of the store has sent
    anything), once the store's rv has reached it, is in a watch from just
    before it. Each open is a race of its own, hence several."""
    for i in range(8):
        store = await make_store()
        base = store.current_rv()
        created = await store.create(Key(PODS, "", f"early-{i}"), obj(f"early-{i}"))
        await settled(store, rv_of(created))
        events = await collect(store.watch(Scope(PODS), base), 1, within=5)
        assert [(e.key.name, e.rv) for e in events] == [(f"early-{i}", rv_of(created))]
        await store.close()


async def test_restart_keeps_data_and_rv(make_store: Factory) -> None:
    store = await make_store()
    base = store.current_rv()
    await store.create(Key(PODS, "a", "x"), obj("x", "a"))
    await store.create(Key(PODS, "a", "y"), obj("y", "a"))
    await store.delete(Key(PODS, "a", "y"))
    await store.close()
    store = await make_store()
    assert store.current_rv() >= base + 3  # includes the delete, whose object is gone
    assert rv_of(await store.get(Key(PODS, "a", "x"))) == base + 1
    created = await store.create(Key(PODS, "a", "z"), obj("z", "a"))
    assert rv_of(created) == base + 4
    evs = await collect(store.watch(Scope(PODS), base), 4)
    assert [e.type for e in evs] == [EventType.ADDED, EventType.ADDED, EventType.DELETED,
                                     EventType.ADDED]


async def test_large_list(store: Store) -> None:
    big = "x" * 300
    base = store.current_rv()
    for chunk in range(0, 10_000, 500):
        await asyncio.gather(*(store.create(Key(PODS, f"ns{i % 10}", f"p{i:05d}"),
                                            obj(f"p{i}", f"ns{i % 10}", blob=big))
                               for i in range(chunk, chunk + 500)))
    res = await store.list(Scope(PODS))
    assert len(res.items) == 10_000 and res.rv >= base + 10_000


async def test_continue_reads_at_the_first_pages_revision(store: Store) -> None:
    """etcd keeps history: every page of a paged list is at the first page's
    revision. SQLite keeps none: later pages show the latest state."""
    for i in range(6):
        await store.create(Key(PODS, "a", f"p{i}"), obj(f"p{i}", "a", v=0))
    first = await store.list(Scope(PODS), limit=3)
    await store.update(Key(PODS, "a", "p4"), obj("p4", "a", v=1))
    gone = await store.delete(Key(PODS, "a", "p5"))
    rest = await store.list(Scope(PODS), after=first.next_name, rv=first.rv)
    if isinstance(store, EtcdStore):
        assert rest.rv == first.rv
        assert [(o["metadata"]["name"], o["spec"]["v"]) for o in rest.items] == [
            ("p3", 0), ("p4", 0), ("p5", 0)]
        await store.compact(rv_of(gone))
        with pytest.raises(Expired):
            await store.list(Scope(PODS), after=first.next_name, rv=first.rv)
    else:
        assert [(o["metadata"]["name"], o["spec"]["v"]) for o in rest.items] == [
            ("p3", 0), ("p4", 1)]


async def test_a_live_watch_tells_how_far_it_has_yielded(store: Store) -> None:
    """A bookmark may name the probe's rv: never beyond an event not yet yielded."""
    base = store.current_rv()
    probes: list[Any] = []
    watch = store.watch(Scope(PODS), base, on_live=probes.append)
    first = asyncio.create_task(anext(watch))
    await store.create(Key(NODES, "", "n"), obj("n"))  # out of scope: the probe follows it
    made = rv_of(await store.create(Key(PODS, "a", "x"), obj("x", "a")))
    assert (await first).rv == made
    assert len(probes) == 1
    await settled(store, made)
    assert probes[0]() == store.current_rv() >= made  # nothing buffered: the store's rv
    later = [rv_of(await store.create(Key(PODS, "a", f"y{i}"), obj("y", "a")))
             for i in range(3)]
    await settled(store, later[-1])
    assert probes[0]() == later[0] - 1, "buffered, not yielded: the probe stays below them"
    assert (await anext(watch)).rv == later[0]
    assert probes[0]() == later[1] - 1
    await watch.aclose()


async def test_objects_as_large_as_the_api_accepts_are_stored(store: Store) -> None:
    """The API accepts a 3 MiB body; the store keeps what it accepted (etcd's
    members run with --max-request-bytes above that), and refuses beyond its
    own limit with TooLargeError (HTTP 413), never as an outage."""
    big = obj("big", "a", blob="x" * (3 * 1024 * 1024))
    made = await store.create(Key(PODS, "a", "big"), big)
    assert len(made["spec"]["blob"]) == 3 * 1024 * 1024
    if isinstance(store, EtcdStore):
        with pytest.raises(TooLargeError):
            await store.create(Key(PODS, "a", "huge"),
                               obj("huge", "a", blob="x" * (9 * 1024 * 1024)))
