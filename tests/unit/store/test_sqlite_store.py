"""Unit tests of the SQLite store backend (racksmith.apiserver.store.sqlite)."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    WatchEvent,
)
from racksmith.apiserver.store.sqlite import SqliteStore, StoreClosedError
from tests.harness.storemodel import NODES, PODS, collect, run_model, rv_of


def obj(name: str, ns: str = "", **spec: Any) -> Obj:
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Thing", "metadata": md, "spec": spec}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "store.db")
    await s.open()
    yield s
    await s.close()


def test_conforms_to_protocol(tmp_path: Path) -> None:
    s: Store = SqliteStore(tmp_path / "x.db")
    assert s is not None


async def test_crud(store: SqliteStore) -> None:
    k = Key(PODS, "default", "a")
    assert store.current_rv() == 0
    created = await store.create(k, obj("a", "default", x=1))
    assert rv_of(created) == 1 and store.current_rv() == 1
    assert created["spec"] == {"x": 1}
    got = await store.get(k)
    assert got == created
    got["spec"]["x"] = 99  # returned copies are the caller's
    assert (await store.get(k))["spec"] == {"x": 1}

    updated = await store.update(k, obj("a", "default", x=2))
    assert rv_of(updated) == 2
    assert (await store.get(k))["spec"] == {"x": 2}

    deleted = await store.delete(k)
    assert rv_of(deleted) == 3 and deleted["spec"] == {"x": 2}
    with pytest.raises(NotFoundError):
        await store.get(k)
    assert store.current_rv() == 3


async def test_caller_object_not_mutated(store: SqliteStore) -> None:
    o = obj("a")
    await store.create(Key(NODES, "", "a"), o)
    assert "resourceVersion" not in o["metadata"]
    await store.create(Key(NODES, "", "b"), {"kind": "NoMeta"})
    assert rv_of(await store.get(Key(NODES, "", "b"))) == 2


async def test_errors(store: SqliteStore) -> None:
    k = Key(PODS, "ns", "a")
    await store.create(k, obj("a", "ns"))
    with pytest.raises(AlreadyExistsError):
        await store.create(k, obj("a", "ns"))
    with pytest.raises(NotFoundError):
        await store.update(Key(PODS, "ns", "zz"), obj("zz", "ns"))
    with pytest.raises(NotFoundError):
        await store.delete(Key(PODS, "ns", "zz"))
    with pytest.raises(ConflictError):
        await store.update(k, obj("a", "ns"), expected_rv=7)
    with pytest.raises(ConflictError):
        await store.delete(k, expected_rv=7)
    with pytest.raises(TypeError):
        await store.create(Key(PODS, "ns", "bad"), {"metadata": {}, "x": object()})
    # failed operations consume no resourceVersion
    assert store.current_rv() == 1
    ok = await store.update(k, obj("a", "ns", v=2), expected_rv=1)
    assert rv_of(ok) == 2
    gone = await store.delete(k, expected_rv=2)
    assert rv_of(gone) == 3


async def test_rv_monotonic_under_concurrency(store: SqliteStore) -> None:
    keys = [Key(PODS, f"ns{i % 3}", f"p{i}") for i in range(200)]
    created = await asyncio.gather(*(store.create(k, obj(k.name, k.namespace)) for k in keys))
    rvs = [rv_of(c) for c in created]
    assert sorted(rvs) == list(range(1, 201))
    assert store.current_rv() == 200
    # one failing op in a group commit does not fail its neighbours
    results = await asyncio.gather(
        store.create(keys[0], obj("p0")), store.update(keys[1], obj("p1")),
        store.delete(Key(PODS, "nope", "x")), return_exceptions=True)
    assert isinstance(results[0], AlreadyExistsError)
    assert isinstance(results[2], NotFoundError)
    assert isinstance(results[1], dict) and rv_of(results[1]) == 201


async def test_list_scope_and_order(store: SqliteStore) -> None:
    for ns in ("b", "a", "c"):
        for name in ("y", "x"):
            await store.create(Key(PODS, ns, name), obj(name, ns))
    await store.create(Key(NODES, "", "n1"), obj("n1"))
    res = await store.list(Scope(PODS))
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in res.items] == [
        ("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("c", "x"), ("c", "y")]
    assert res.rv == store.current_rv() == 7
    assert res.next_name is None and res.remaining == 0
    res = await store.list(Scope(PODS, "b"))
    assert [o["metadata"]["name"] for o in res.items] == ["x", "y"]
    assert [o["metadata"]["name"] for o in (await store.list(Scope(NODES))).items] == ["n1"]
    assert (await store.list(Scope("apps/deployments"))).items == []
    assert (await store.list(Scope(PODS, "zzz"))).items == []


async def test_pagination(store: SqliteStore) -> None:
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
    # exact multiple: the last full page reports nothing remaining
    page = await store.list(Scope(PODS, "ns0"), limit=13)
    assert len(page.items) == 13 and page.next_name is None and page.remaining == 0
    page = await store.list(Scope(PODS, "ns0"), limit=5)
    assert page.remaining == 8 and page.next_name == Key(PODS, "ns0", "p016")


async def test_watch_live_and_scope(store: SqliteStore) -> None:
    w_all = store.watch(Scope(PODS), store.current_rv())
    w_ns = store.watch(Scope(PODS, "a"), store.current_rv())
    t_all = asyncio.create_task(collect(w_all, 3))
    t_ns = asyncio.create_task(collect(w_ns, 2))
    await asyncio.sleep(0.05)
    await store.create(Key(PODS, "a", "1"), obj("1", "a"))
    await store.create(Key(NODES, "", "n"), obj("n"))
    await store.create(Key(PODS, "b", "1"), obj("1", "b"))
    await store.update(Key(PODS, "a", "1"), obj("1", "a", v=2))
    evs = await t_all
    assert [(e.type, e.key, e.rv) for e in evs] == [
        (EventType.ADDED, Key(PODS, "a", "1"), 1), (EventType.ADDED, Key(PODS, "b", "1"), 3),
        (EventType.MODIFIED, Key(PODS, "a", "1"), 4)]
    assert [e.rv for e in await t_ns] == [1, 4]
    assert rv_of(evs[2].obj) == 4


async def test_watch_replay_then_live_under_concurrent_writes(store: SqliteStore) -> None:
    for i in range(100):
        await store.create(Key(PODS, "a", f"pre{i}"), obj(f"pre{i}", "a"))
    listed = await store.list(Scope(PODS))
    writers_done = asyncio.Event()
    n_more = 300

    async def writer(j: int) -> None:
        for i in range(n_more // 6):
            await store.create(Key(PODS, "a", f"w{j}-{i}"), obj("x", "a"))
            await store.create(Key(NODES, "", f"w{j}-{i}"), obj("x"))

    tasks = [asyncio.create_task(writer(j)) for j in range(3)]
    await asyncio.sleep(0.01)
    # several watchers join at different points while writes are flowing
    watches = []
    for since in (0, 50, listed.rv):
        watches.append(asyncio.create_task(
            collect(store.watch(Scope(PODS), since), 100 + n_more // 2 - (min(since, 100)))))
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks)
    writers_done.set()
    for since, t in zip((0, 50, listed.rv), watches, strict=True):
        evs = await t
        rvs = [e.rv for e in evs]
        assert rvs == sorted(set(rvs)), "rv order, no duplicates"
        assert rvs[0] > since
        assert all(e.key.resource == PODS for e in evs)
        # no gaps: every pod event in the log after `since` was delivered
    all_pods = [e.rv for e in await collect(store.watch(Scope(PODS), 0), 250)]
    assert len(all_pods) == 250
    for since, t in zip((0, 50, listed.rv), watches, strict=True):
        assert [e.rv for e in t.result()] == [r for r in all_pods if r > since]
    # list rv + watch from it: exactly the events after the list
    assert [e.rv for e in watches[2].result()] == [r for r in all_pods if r > listed.rv]


async def test_watch_future_rv_and_deleted(store: SqliteStore) -> None:
    k = Key(PODS, "a", "x")
    await store.create(k, obj("x", "a", v=1))
    t = asyncio.create_task(collect(store.watch(Scope(PODS), 0), 2))
    await asyncio.sleep(0.02)
    await store.delete(k)
    evs = await t
    assert [(e.type, e.rv) for e in evs] == [(EventType.ADDED, 1), (EventType.DELETED, 2)]
    assert evs[1].obj["spec"] == {"v": 1} and rv_of(evs[1].obj) == 2


async def test_expired_after_compaction(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "c.db", event_log_size=20)
    await s.open()
    try:
        for i in range(50):
            await s.create(Key(PODS, "", f"p{i}"), obj(f"p{i}"))
        oldest = s.oldest_rv()
        assert 30 <= oldest < 50
        with sqlite3.connect(tmp_path / "c.db") as c:
            n = c.execute("SELECT count(*), min(rv) FROM events").fetchone()
        assert n[0] <= 20 and n[1] == oldest + 1
        with pytest.raises(Expired):
            await collect(s.watch(Scope(PODS), 0), 1)
        with pytest.raises(Expired):
            await collect(s.watch(Scope(PODS), oldest - 1), 1)
        evs = await collect(s.watch(Scope(PODS), oldest), 50 - oldest)
        assert [e.rv for e in evs] == list(range(oldest + 1, 51))
    finally:
        await s.close()
    s2 = SqliteStore(tmp_path / "c.db", event_log_size=20)
    await s2.open()
    try:
        assert s2.oldest_rv() == oldest and s2.current_rv() == 50
    finally:
        await s2.close()


async def test_slow_watcher_expires_without_blocking(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "slow.db", watch_queue_size=10)
    await s.open()
    try:
        await s.create(Key(PODS, "", "p0"), obj("p0"))
        slow = s.watch(Scope(PODS), 0)
        assert (await anext(slow)).rv == 1  # subscribed; now it stops consuming
        fast_task = asyncio.create_task(collect(s.watch(Scope(PODS), s.current_rv()), 30))
        await asyncio.sleep(0.02)
        async with asyncio.timeout(5):  # one at a time: the fast watcher keeps up
            for i in range(30):
                await s.create(Key(PODS, "", f"q{i}"), obj("q"))
        assert len(await fast_task) == 30
        with pytest.raises(Expired):
            async for _ in slow:
                pass
    finally:
        await s.close()


async def test_close_ends_watches(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "w.db")
    await s.open()
    await s.create(Key(PODS, "", "a"), obj("a"))
    got: list[WatchEvent] = []
    started = asyncio.Event()

    async def consume() -> None:
        async for ev in s.watch(Scope(PODS), 0):
            got.append(ev)
            started.set()

    t = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 5)
    await s.close()
    await asyncio.wait_for(t, 2)
    assert [e.rv for e in got] == [1]
    assert [e async for e in s.watch(Scope(PODS), 0)] == []
    with pytest.raises(StoreClosedError):
        await s.create(Key(PODS, "", "b"), obj("b"))
    with pytest.raises(StoreClosedError):
        await s.get(Key(PODS, "", "a"))
    with pytest.raises(StoreClosedError):
        await s.list(Scope(PODS))
    await s.close()  # idempotent


async def test_close_flushes_pending_writes(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "f.db")
    await s.open()
    tasks = [asyncio.create_task(s.create(Key(PODS, "", f"p{i}"), obj("p"))) for i in range(50)]
    await asyncio.sleep(0)
    await s.close()
    assert len(await asyncio.gather(*tasks)) == 50


async def test_restart_keeps_data_and_rv(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    s = SqliteStore(path)
    await s.open()
    await s.create(Key(PODS, "a", "x"), obj("x", "a"))
    await s.create(Key(PODS, "a", "y"), obj("y", "a"))
    await s.delete(Key(PODS, "a", "y"))
    await s.close()

    with sqlite3.connect(path) as c:  # durability settings are persistent / per connection
        assert c.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    s = SqliteStore(path)
    await s.open()
    try:
        assert s._wconn is not None
        assert s._wconn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert s.current_rv() == 3  # includes the delete, whose object row is gone
        assert rv_of(await s.get(Key(PODS, "a", "x"))) == 1
        created = await s.create(Key(PODS, "a", "z"), obj("z", "a"))
        assert rv_of(created) == 4
        evs = await collect(s.watch(Scope(PODS), 0), 4)
        assert [e.type for e in evs] == [EventType.ADDED, EventType.ADDED, EventType.DELETED,
                                         EventType.ADDED]
    finally:
        await s.close()


async def test_large_list(store: SqliteStore) -> None:
    big = "x" * 300
    await asyncio.gather(*(store.create(Key(PODS, f"ns{i % 10}", f"p{i:05d}"),
                                        obj(f"p{i}", f"ns{i % 10}", blob=big))
                           for i in range(10_000)))
    res = await store.list(Scope(PODS))
    assert len(res.items) == 10_000 and res.rv == 10_000


# ---------------------------------------------------------------- property test

_names = st.sampled_from(["a", "b", "c", "d"])
_nss = st.sampled_from(["", "n1", "n2"])
_resources = st.sampled_from([PODS, NODES])
_keys = st.builds(Key, _resources, _nss, _names)
_ops = st.one_of(
    st.tuples(st.just("create"), _keys, st.integers(0, 9)),
    st.tuples(st.just("update"), _keys, st.integers(0, 9), st.booleans()),
    st.tuples(st.just("delete"), _keys, st.booleans()),
    st.tuples(st.just("get"), _keys),
    st.tuples(st.just("list"), _resources, st.one_of(st.none(), _nss), st.integers(0, 3)),
    st.tuples(st.just("restart")),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ops, max_size=40))
def test_property_random_ops_match_model(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.db"
        asyncio.run(run_model(lambda: SqliteStore(path, quick_check=False), ops, exact=True))
