"""Crash test of the API server process: SIGKILL it under write load, restart.

Acceptance item: a client creating objects in a loop while the server is
killed with SIGKILL; after restart every acknowledged object is there,
resource versions are monotonic, watches resume from the last version or get
410.

``racksmith apiserver`` runs as its own process on one data dir. Each round
starts it, checks everything acknowledged so far, resumes a watch from the
last acknowledged resourceVersion, then runs concurrent HTTPS clients creating
ConfigMaps and records every ``201`` (name → resourceVersion); after a random
number of acknowledgements (seeded) the server is SIGKILLed with requests in
flight. A final start checks the last round. Requests that were in flight at
the kill may or may not have been committed; acknowledged ones must survive
with the same resourceVersion.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.harness.process import ServerProc, start_server

pytestmark = pytest.mark.timeout(120)

ROUNDS = 3
WORKERS = 6
SEED = 20240611
CM = "/api/v1/namespaces/default/configmaps"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=10)
WATCH_TIMEOUT_S = 10

Obj = dict[str, Any]


@dataclass
class History:
    """What the clients were told, across rounds."""

    acked: dict[str, int] = field(default_factory=dict)
    """name → resourceVersion of every 201 the server sent."""
    max_rv: int = 0
    """The largest resourceVersion any response carried."""

    def ack(self, name: str, rv: int) -> None:
        assert name not in self.acked, f"{name} acknowledged twice"
        self.acked[name] = rv
        self.max_rv = max(self.max_rv, rv)


def _session(proc: ServerProc) -> aiohttp.ClientSession:
    assert proc.ca_path is not None, "the server must serve TLS"
    ctx = ssl.create_default_context(cafile=str(proc.ca_path))
    assert proc.url.startswith("https://127.0.0.1:"), proc.url
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx),
        headers={"Authorization": f"Bearer {proc.token}"}, timeout=REQUEST_TIMEOUT)


def _cm(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"payload": name * 8}}


def _rv(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def _create(session: aiohttp.ClientSession, proc: ServerProc, name: str) -> Obj:
    async with session.post(proc.url + CM, json=_cm(name)) as r:
        body = await r.json()
        assert r.status == 201, (r.status, body)
        return body  # type: ignore[no-any-return]


async def _list(session: aiohttp.ClientSession, proc: ServerProc) -> tuple[dict[str, int], int]:
    async with session.get(proc.url + CM) as r:
        assert r.status == 200, await r.text()
        body = await r.json()
    return ({o["metadata"]["name"]: _rv(o) for o in body["items"]},
            int(body["metadata"]["resourceVersion"]))


async def _verify(session: aiohttp.ClientSession, proc: ServerProc, hist: History) -> dict[
        str, int]:
    """Every acknowledged object is there with its resourceVersion."""
    present, list_rv = await _list(session, proc)
    missing = sorted(n for n in hist.acked if n not in present)
    assert not missing, f"{len(missing)} acknowledged objects lost: {missing[:10]}"
    changed = {n: (rv, present[n]) for n, rv in hist.acked.items() if present[n] != rv}
    assert not changed, f"resourceVersion changed across the crash: {changed}"
    assert list_rv >= hist.max_rv, (list_rv, hist.max_rv)
    assert len(set(present.values())) == len(present), "two objects share a resourceVersion"
    # spot-check single GETs too (they read through a different path than list)
    for name in sorted(hist.acked)[:: max(1, len(hist.acked) // 10)]:
        async with session.get(f"{proc.url}{CM}/{name}") as r:
            assert r.status == 200, await r.text()
            assert _rv(await r.json()) == hist.acked[name]
    return present


async def _check_watch_resumes(session: aiohttp.ClientSession, proc: ServerProc,
                               hist: History, since: int, present: dict[str, int],
                               probe: str) -> None:
    """A watch from the last acknowledged rv replays what followed it, or says 410."""
    events: list[Obj] = []
    url = f"{proc.url}{CM}"
    params = {"watch": "true", "resourceVersion": str(since),
              "timeoutSeconds": str(WATCH_TIMEOUT_S)}
    watch_timeout = aiohttp.ClientTimeout(total=WATCH_TIMEOUT_S + 5)
    async with session.get(url, params=params, timeout=watch_timeout) as r:
        assert r.status == 200, await r.text()
        first = await asyncio.wait_for(_probe_after_first(session, proc, r, probe, events), 15)
    if first == "ERROR":
        st = events[-1]["object"]
        assert st["kind"] == "Status" and st["code"] == 410, st
        assert st["reason"] == "Expired", st
        return
    names = [e["object"]["metadata"]["name"] for e in events]
    assert names[-1] == probe, names
    rvs = [_rv(e["object"]) for e in events]
    assert all(rv > since for rv in rvs), (since, rvs)
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs), rvs
    assert all(e["type"] == "ADDED" for e in events), [e["type"] for e in events]
    # completeness: exactly the objects committed after ``since`` (writes in flight at
    # the kill that made it to disk), each with the resourceVersion it has now
    replayed = {e["object"]["metadata"]["name"]: _rv(e["object"]) for e in events[:-1]}
    expected = {n: rv for n, rv in present.items() if rv > since}
    assert replayed == expected, (since, replayed, expected)
    assert not set(replayed) & set(hist.acked), "an acknowledged object was replayed"


async def _probe_after_first(session: aiohttp.ClientSession, proc: ServerProc,
                             resp: aiohttp.ClientResponse, probe: str,
                             events: list[Obj]) -> str:
    """Create ``probe`` once the watch is open; read events until it shows up."""
    created = asyncio.create_task(_create(session, proc, probe))
    try:
        while True:
            line = await resp.content.readline()
            assert line, f"watch ended before {probe} was seen: {events}"
            event = json.loads(line)
            events.append(event)
            if event["type"] == "ERROR":
                return "ERROR"
            if event["object"]["metadata"]["name"] == probe:
                return event["type"]  # type: ignore[no-any-return]
    finally:
        await created


async def _load(proc: ServerProc, hist: History, tag: str, kill_after: int) -> int:
    """Concurrent creators; SIGKILL the server after ``kill_after`` acknowledgements."""
    count = 0
    killed = asyncio.Event()
    errors: list[BaseException] = []

    async def worker(session: aiohttp.ClientSession, w: int) -> None:
        nonlocal count
        last = 0
        i = 0
        while not killed.is_set():
            name = f"{tag}-w{w}-{i}"
            i += 1
            try:
                async with session.post(proc.url + CM, json=_cm(name)) as r:
                    status = r.status
                    raw = await r.read()
            except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
                if killed.is_set():
                    return  # the kill cut this request off: not acknowledged
                errors.append(exc)
                return
            if status != 201:
                errors.append(AssertionError(f"{name}: {status} {raw[:300]!r}"))
                return
            rv = _rv(json.loads(raw))
            assert rv > last, f"worker {w}: resourceVersion went from {last} to {rv}"
            last = rv
            hist.ack(name, rv)
            count += 1
            if count == kill_after:
                proc.kill(signal.SIGKILL)
                killed.set()

    async with _session(proc) as session:
        await asyncio.wait_for(asyncio.gather(*(worker(session, w) for w in range(WORKERS))),
                               30)
    assert not errors, f"client errors before the kill: {errors}\n{proc.log()[-3000:]}"
    assert killed.is_set() and proc.proc.returncode == -signal.SIGKILL, proc.proc.returncode
    return count


async def _round(proc: ServerProc, hist: History, rnd: int, kill_after: int | None) -> None:
    async with _session(proc) as session:
        present = await _verify(session, proc, hist)
        prev_max = hist.max_rv
        if hist.acked:
            probe = f"probe-{rnd}"
            await _check_watch_resumes(session, proc, hist, prev_max, present, probe=probe)
            async with session.get(f"{proc.url}{CM}/{probe}") as r:
                assert r.status == 200, await r.text()
                hist.ack(probe, _rv(await r.json()))
        # new writes get larger resourceVersions than anything acknowledged before
        after = await _create(session, proc, f"after-{rnd}")
        assert _rv(after) > hist.max_rv >= prev_max, (_rv(after), hist.max_rv)
        assert _rv(after) > max(present.values(), default=0)
        _present, list_rv = await _list(session, proc)
        hist.ack(f"after-{rnd}", _rv(after))
        assert list_rv >= _rv(after)
    if kill_after is not None:
        before = hist.max_rv
        n = await _load(proc, hist, f"r{rnd}", kill_after)
        assert n >= kill_after
        round_rvs = [rv for name, rv in hist.acked.items() if name.startswith(f"r{rnd}-")]
        assert min(round_rvs) > before, (min(round_rvs), before)


def test_sigkill_under_load_keeps_acknowledged_writes(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "server"
    hist = History()
    for rnd in range(ROUNDS + 1):
        kill_after = rng.randint(40, 160) if rnd < ROUNDS else None
        proc = start_server(data_dir, command="apiserver")
        try:
            asyncio.run(_round(proc, hist, rnd, kill_after))
        except BaseException:
            print(f"---- server log, round {rnd} ----\n{proc.log()[-4000:]}")
            raise
        finally:
            proc.kill()
    # every round's objects, plus the probes and markers
    assert sum(1 for n in hist.acked if n.startswith("r")) >= 40 * ROUNDS
