"""Crash test of the SQLite store: SIGKILL a writer mid-stream, then recover.

A child process creates objects through SqliteStore with concurrent callers and
prints every acknowledged ``name rv`` (flushed) to a file. The parent kills it
with SIGKILL at a random moment, reopens the store and checks that every
acknowledged write is there with its rv, that rvs keep increasing across
rounds, that the file passes ``PRAGMA integrity_check``, and that a watch from
the last acknowledged rv either replays the tail or raises Expired.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from racksmith.apiserver.store.base import Expired, Key, Scope, WatchEvent
from racksmith.apiserver.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
RESOURCE = "core/pods"

CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from racksmith.apiserver.store.base import Key
    from racksmith.apiserver.store.sqlite import SqliteStore

    async def main(path: str, tag: str) -> None:
        store = SqliteStore(Path(path), event_log_size=500)
        await store.open()
        out = sys.stdout
        out.write(f"OPEN {store.current_rv()}\\n")
        out.flush()

        async def worker(w: int) -> None:
            i = 0
            while True:
                name = f"{tag}-w{w}-{i}"
                o = await store.create(Key("core/pods", "ns", name),
                                       {"metadata": {"name": name}, "pad": "x" * 200})
                out.write(f"{name} {o['metadata']['resourceVersion']}\\n")
                out.flush()
                i += 1

        await asyncio.gather(*(worker(w) for w in range(8)))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


def _acked(out_file: Path) -> tuple[int, list[tuple[str, int]]]:
    """Parse the child's output; an incomplete last line is ignored."""
    text = out_file.read_text()
    lines = text.split("\n")[:-1]  # everything after the last newline is partial
    assert lines and lines[0].startswith("OPEN "), text[:200]
    open_rv = int(lines[0].split()[1])
    acked = [(name, int(rv)) for name, rv in (ln.split() for ln in lines[1:])]
    return open_rv, acked


async def _verify(db: Path, acked: list[tuple[str, int]], last_rv: int) -> int:
    store = SqliteStore(db, event_log_size=500)
    await store.open()
    try:
        for name, rv in acked:
            got = await store.get(Key(RESOURCE, "ns", name))
            assert got["metadata"]["name"] == name
            assert int(got["metadata"]["resourceVersion"]) == rv
        current = store.current_rv()
        assert current >= last_rv
        listed = await store.list(Scope(RESOURCE))
        assert listed.rv == current
        assert len({o["metadata"]["name"] for o in listed.items}) == len(listed.items)
        # a watch from the last acknowledged rv replays the committed tail
        events: list[WatchEvent] = []
        if current > last_rv:
            try:
                async with asyncio.timeout(5):
                    async for ev in store.watch(Scope(RESOURCE), last_rv):
                        events.append(ev)
                        if ev.rv >= current:
                            break
            except Expired:
                assert last_rv < store.oldest_rv()
            else:
                assert [e.rv for e in events] == list(range(last_rv + 1, current + 1))
        return current
    finally:
        await store.close()


@pytest.mark.timeout(60)
def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rng = random.Random()
    prev_max = 0
    all_acked: list[tuple[str, int]] = []
    for round_no in range(3):
        out_file = tmp_path / f"out{round_no}.txt"
        with out_file.open("wb") as out:
            proc = subprocess.Popen([sys.executable, str(script), str(db), f"r{round_no}"],
                                    stdout=out, stderr=subprocess.PIPE, cwd=REPO, env=env)
        try:
            deadline = time.monotonic() + 15
            while out_file.stat().st_size == 0:  # wait until the store is open
                if proc.poll() is not None:
                    assert proc.stderr is not None
                    pytest.fail(f"child exited early: {proc.stderr.read().decode()}")
                assert time.monotonic() < deadline, "child did not start"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.2, 0.8))
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            if proc.stderr is not None:
                proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL

        open_rv, acked = _acked(out_file)
        assert acked, "the child acknowledged no write"
        assert open_rv >= prev_max
        rvs = [rv for _, rv in acked]
        assert min(rvs) > prev_max and len(set(rvs)) == len(rvs)
        last_rv = max(rvs)

        with sqlite3.connect(db) as conn:  # recovers the WAL like any reader would
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        all_acked += acked
        prev_max = asyncio.run(_verify(db, all_acked, last_rv))
    assert prev_max >= len(all_acked)
