"""The Store contract as a model: random operation sequences against a real
etcd (hypothesis), and the same runner against SQLite; the SQLite property
test with random sequences is tests/unit/store/test_sqlite_store.py's."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racksmith.apiserver.store.base import (
    AlreadyExistsError,
    ConflictError,
    EventType,
    Key,
    NotFoundError,
    Obj,
    Scope,
    Store,
    WatchEvent,
)
from racksmith.apiserver.store.etcd import EtcdStore
from racksmith.apiserver.store.sqlite import SqliteStore
from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.etcd import etcd_config

PODS = "core/pods"
NODES = "core/nodes"


def rv_of(o: Obj) -> int:
    return int(o["metadata"]["resourceVersion"])


async def collect(it: AsyncIterator[WatchEvent], n: int, within: float = 10.0
                  ) -> list[WatchEvent]:
    out: list[WatchEvent] = []

    async def run() -> None:
        async for ev in it:
            out.append(ev)
            if len(out) >= n:
                return

    await asyncio.wait_for(run(), within)
    return out


async def settled(store: Store, rv: int) -> None:
    async with asyncio.timeout(10):
        while store.current_rv() < rv:
            await asyncio.sleep(0.005)


# ---------------------------------------------------------------- property test

_names = st.sampled_from(["a", "b", "c"])
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


def _mobj(k: Key, v: int) -> Obj:
    return {"metadata": {"name": k.name, "namespace": k.namespace}, "v": v}


async def _run_model(make: Callable[[], Store], ops: list[tuple[Any, ...]]) -> None:
    model: dict[Key, tuple[int, int]] = {}  # key -> (rv, value)
    log: list[tuple[EventType, Key, int]] = []
    s = make()
    await s.open()
    rv = base = s.current_rv()
    try:
        for op in ops:
            kind = op[0]
            if kind == "create":
                _, k, v = op
                if k in model:
                    with pytest.raises(AlreadyExistsError):
                        await s.create(k, _mobj(k, v))
                else:
                    out = await s.create(k, _mobj(k, v))
                    rv += 1
                    assert rv_of(out) == rv
                    model[k] = (rv, v)
                    log.append((EventType.ADDED, k, rv))
            elif kind == "update":
                _, k, v, use_stale = op
                if k not in model:
                    with pytest.raises(NotFoundError):
                        await s.update(k, _mobj(k, v))
                elif use_stale:
                    with pytest.raises(ConflictError):
                        await s.update(k, _mobj(k, v), expected_rv=model[k][0] - 1)
                else:
                    out = await s.update(k, _mobj(k, v), expected_rv=model[k][0])
                    rv += 1
                    assert rv_of(out) == rv and out["v"] == v
                    model[k] = (rv, v)
                    log.append((EventType.MODIFIED, k, rv))
            elif kind == "delete":
                _, k, precond = op
                if k not in model:
                    with pytest.raises(NotFoundError):
                        await s.delete(k)
                else:
                    out = await s.delete(k, expected_rv=model[k][0] if precond else None)
                    rv += 1
                    assert rv_of(out) == rv and out["v"] == model[k][1]
                    del model[k]
                    log.append((EventType.DELETED, k, rv))
            elif kind == "get":
                _, k = op
                if k in model:
                    got = await s.get(k)
                    assert (rv_of(got), got["v"]) == model[k]
                else:
                    with pytest.raises(NotFoundError):
                        await s.get(k)
            elif kind == "list":
                _, res, ns, limit = op
                scope = Scope(res, ns)
                want = sorted(k for k in model if scope.contains(k))
                got_keys: list[Key] = []
                after = None
                while True:
                    page = await s.list(scope, after=after, limit=limit or None)
                    assert page.rv >= rv
                    for o in page.items:
                        mk = Key(res, o["metadata"]["namespace"], o["metadata"]["name"])
                        got_keys.append(mk)
                        assert (rv_of(o), o["v"]) == model[mk]
                    if page.next_name is None:
                        break
                    after = page.next_name
                assert got_keys == want
            else:
                await s.close()
                s = make()
                await s.open()
        await settled(s, rv)
        evs: list[WatchEvent] = []
        for res in (PODS, NODES):
            n = sum(1 for _, k, _ in log if k.resource == res)
            if n:
                evs += await collect(s.watch(Scope(res), base), n)
        assert sorted((e.rv, e.type, e.key) for e in evs) == sorted(
            (r, t, k) for t, k, r in log)
    finally:
        await s.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(_ops, max_size=30))
def test_property_random_ops_match_model_on_etcd(etcd: LocalEtcdCluster,
                                                  ops: list[tuple[Any, ...]]) -> None:
    config = etcd_config(etcd, f"/model-{uuid.uuid4().hex}")
    _in_new_loop(_run_model(lambda: EtcdStore(config), ops))


def _in_new_loop(coro: Any) -> None:
    """Hypothesis examples are sync: each runs its own event loop (in a
    thread, so no other loop is disturbed)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:  # re-raised below
            failure.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if failure:
        raise failure[0]


def test_model_runner_on_sqlite_too() -> None:
    """The same model runner against SQLite, one fixed sequence (the SQLite
    property test with random ones is in tests/unit/store)."""
    ops: list[tuple[Any, ...]] = [
        ("create", Key(PODS, "n1", "a"), 1), ("update", Key(PODS, "n1", "a"), 2, False),
        ("update", Key(PODS, "n1", "a"), 3, True), ("restart",),
        ("list", PODS, None, 1), ("delete", Key(PODS, "n1", "a"), True),
        ("get", Key(PODS, "n1", "a"))]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.db"
        _in_new_loop(_run_model(lambda: SqliteStore(path), ops))
