"""The Store contract as a model: one runner for every backend.

Owns ``run_model`` (random operation sequences applied to a store and to a
dict, which must agree) and ``model_ops`` (hypothesis's strategy for them),
and the helpers the store tests share (``obj`` builds a stored object,
``rv_of``, ``collect`` a watch's first events, ``settled``: wait until a
store's resourceVersion reaches one). Used by
tests/unit/store/test_sqlite_store.py, tests/integration/test_store_model.py
and tests/integration/test_store_contract.py (SQLite and etcd).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
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

PODS = "core/pods"
NODES = "core/nodes"


def model_ops(names: list[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    """One operation of ``run_model``'s, on objects named from ``names`` (fewer
    names: more collisions) in two resources and three namespaces."""
    nss = st.sampled_from(["", "n1", "n2"])
    resources = st.sampled_from([PODS, NODES])
    keys = st.builds(Key, resources, nss, st.sampled_from(names))
    return st.one_of(
        st.tuples(st.just("create"), keys, st.integers(0, 9)),
        st.tuples(st.just("update"), keys, st.integers(0, 9), st.booleans()),
        st.tuples(st.just("delete"), keys, st.booleans()),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("list"), resources, st.one_of(st.none(), nss), st.integers(0, 3)),
        st.tuples(st.just("restart")),
    )


def rv_of(o: Obj) -> int:
    return int(o["metadata"]["resourceVersion"])


async def collect(it: AsyncIterator[WatchEvent], n: int, within: float = 10.0
                  ) -> list[WatchEvent]:
    """The first ``n`` events of a watch (within ``within`` seconds)."""
    out: list[WatchEvent] = []

    async def run() -> None:
        async for ev in it:
            out.append(ev)
            if len(out) >= n:
                return

    await asyncio.wait_for(run(), within)
    return out


async def settled(store: Store, rv: int) -> None:
    """Until ``store``'s resourceVersion is at least ``rv``."""
    async with asyncio.timeout(10):
        while store.current_rv() < rv:
            await asyncio.sleep(0.005)


def obj(name: str, ns: str = "", **spec: Any) -> Obj:
    """A stored object named ``name`` (in ``ns``) with ``spec``."""
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Thing", "metadata": md, "spec": spec}


def mobj(k: Key, v: int) -> Obj:
    return {"metadata": {"name": k.name, "namespace": k.namespace}, "v": v}


async def run_model(make: Callable[[], Store], ops: list[tuple[Any, ...]], *,
                    exact: bool = False) -> None:
    """Apply ``ops`` (create, update, delete, get, list, restart: the
    strategies of the tests) to the store ``make`` opens and to a dict, and
    check that they agree: results, resourceVersions, pages, and at the end
    the watch history. ``exact``: the store's resourceVersion is the model's
    after every operation (a store of its own, not a prefix of a shared one)."""
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
                        await s.create(k, mobj(k, v))
                else:
                    out = await s.create(k, mobj(k, v))
                    rv += 1
                    assert rv_of(out) == rv
                    model[k] = (rv, v)
                    log.append((EventType.ADDED, k, rv))
            elif kind == "update":
                _, k, v, use_stale = op
                if k not in model:
                    with pytest.raises(NotFoundError):
                        await s.update(k, mobj(k, v))
                elif use_stale:
                    with pytest.raises(ConflictError):
                        await s.update(k, mobj(k, v), expected_rv=model[k][0] - 1)
                else:
                    out = await s.update(k, mobj(k, v), expected_rv=model[k][0])
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
                    assert page.rv == rv if exact else page.rv >= rv
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
            if exact:
                assert s.current_rv() == rv
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
