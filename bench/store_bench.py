"""Benchmark of the SQLite store against raw SQLite with the same durability.

Owns: ``raw_sqlite_inserts`` (the reference: WAL, ``synchronous=FULL``, one
commit per insert, one thread) and ``store_creates`` (``SqliteStore.create``
from ``concurrency`` concurrent callers, so group commit can batch them), plus
a list timing. Run ``python bench/store_bench.py [n]`` for a small table.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson

from racksmith.apiserver.store.base import Key, Scope
from racksmith.apiserver.store.sqlite import SqliteStore

RESOURCE = "core/pods"


def _obj(i: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:07d}", "namespace": f"ns{i % 10}",
                         "labels": {"app": "bench", "i": str(i)}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}],
                     "nodeName": f"node-{i % 50}"}}


def raw_sqlite_inserts(path: Path, n: int) -> float:
    """Ops/s of plain sequential SQLite inserts, one durable commit each."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS objects (resource TEXT, namespace TEXT, "
                     "name TEXT, rv INTEGER, data BLOB, "
                     "PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID")
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN")
            conn.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                         (RESOURCE, f"ns{i % 10}", f"p{i:07d}", i + 1, orjson.dumps(_obj(i))))
            conn.execute("COMMIT")
        return n / (time.perf_counter() - t0)
    finally:
        conn.close()


async def _store_creates(path: Path, n: int, concurrency: int) -> float:
    store = SqliteStore(path)
    await store.open()
    try:
        counter = iter(range(n))

        async def caller() -> None:
            for i in counter:
                await store.create(Key(RESOURCE, f"ns{i % 10}", f"p{i:07d}"), _obj(i))

        t0 = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        return n / (time.perf_counter() - t0)
    finally:
        await store.close()


def store_creates(path: Path, n: int, concurrency: int) -> float:
    """Ops/s of ``SqliteStore.create`` with ``concurrency`` concurrent callers."""
    return asyncio.run(_store_creates(path, n, concurrency))


async def _list_seconds(path: Path) -> tuple[int, float]:
    store = SqliteStore(path)
    await store.open()
    try:
        t0 = time.perf_counter()
        res = await store.list(Scope(RESOURCE))
        return len(res.items), time.perf_counter() - t0
    finally:
        await store.close()


def main(n: int = 2000) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        raw = raw_sqlite_inserts(tmp / "raw.db", n)
        print(f"{'case':<28}{'ops/s':>10}{'store/raw':>11}")
        print(f"{'raw sqlite (1 commit/op)':<28}{raw:>10.0f}{1.0:>11.2f}")
        for c in (1, 8, 64, 256):
            ops = store_creates(tmp / f"store{c}.db", n, c)
            print(f"{f'store create, {c} callers':<28}{ops:>10.0f}{ops / raw:>11.2f}")
        store_creates(tmp / "list.db", 10_000, 64)
        count, secs = asyncio.run(_list_seconds(tmp / "list.db"))
        print(f"list of {count} objects: {secs * 1000:.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
