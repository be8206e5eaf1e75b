"""What only the SQLite store backend does (racksmith.apiserver.store.sqlite):
its durability settings, the events table's compaction on disk, the group
commit flushed on close, and a model-based property test across restarts.
The Store contract itself (CRUD, errors, lists, pages, watches, expiry,
close) runs against SQLite and etcd in tests/integration/test_store_contract.py."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racksmith.apiserver.store.base import EventType, Key, Scope, Store
from racksmith.apiserver.store.sqlite import SqliteStore
from tests.harness.storemodel import PODS, collect, model_ops, obj, run_model, rv_of


def test_conforms_to_protocol(tmp_path: Path) -> None:
    s: Store = SqliteStore(tmp_path / "x.db")
    assert s is not None


async def test_the_event_log_is_compacted_on_disk_and_its_bound_survives_a_restart(
        tmp_path: Path) -> None:
    """The contract's Expired behaviour (tests/integration/test_store_contract.py)
    rests on SQLite's events table: at most ``event_log_size`` rows, and the
    oldest rv a watch may start from is the same after a restart."""
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
    finally:
        await s.close()
    s2 = SqliteStore(tmp_path / "c.db", event_log_size=20)
    await s2.open()
    try:
        assert s2.oldest_rv() == oldest and s2.current_rv() == 50
    finally:
        await s2.close()


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


# ---------------------------------------------------------------- property test

_ops = model_ops(["a", "b", "c", "d"])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ops, max_size=40))
def test_property_random_ops_match_model(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.db"
        asyncio.run(run_model(lambda: SqliteStore(path, quick_check=False), ops, exact=True))
