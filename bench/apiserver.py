"""Benchmark of the API server over HTTPS, against raw SQLite with the same durability.

Owns: ``make bench``. Starts a real ``racksmith apiserver`` as its own process
(port 0, a temporary data dir), talks to it over HTTPS with the admin bearer
token through pooled aiohttp sessions, and measures:

* creates/s sustained: N ConfigMap creates from C concurrent callers (p50/p99);
* gets/s: N random gets of those objects from C concurrent callers (p50/p99);
* list: one unpaged request for 10,000 ConfigMaps, and the same with
  ``limit=500`` paging (client-side JSON decoding included);
* watch fan-out: W watchers on one resource x E events (half creates, half
  updates): time until every watcher has received every event. Every
  watcher decodes every event and checks order and the whole set; it reads
  its stream a chunk at a time and splits the lines itself (aiohttp's
  line-by-line reading cost this one client process more CPU than the
  server spent sending, and the writers share that process);
* the reference: ``raw_sqlite_inserts`` from ``bench/store_bench.py`` (WAL,
  ``synchronous=FULL``, one commit per insert) and the ratio creates/s / it;
  with ``--store etcd [--etcd-members N]`` the server runs on a local etcd
  cluster (racksmith.etcdcluster, TLS) and the reference is
  ``raw_etcd_creates`` from ``bench/etcd_bench.py``: the store's own create
  transaction, values of a stored ConfigMap's size, the same concurrency, the
  same TLS gRPC channel (target ratio >= 0.3).

It prints a table (targets: >= 500 creates/s, list of 10k < 1 s; they are
shown, not enforced: this is a benchmark, not a test) and, with ``--json PATH``,
writes the results as JSON. Every request and phase has a timeout, the server
is always stopped by PID (SIGTERM, then SIGKILL), and it dies with us
(PR_SET_PDEATHSIG). Exit status is 1 when the server misbehaved (failed
requests, missing events, timeouts, errors in its log), else 0.

    .venv/bin/python bench/apiserver.py [--quick] [--creates N] [--concurrency C]
                                        [--store sqlite|etcd] [--etcd-members N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import datetime as dt
import json
import os
import platform
import random
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from store_bench import raw_sqlite_inserts

ROOT = Path(__file__).resolve().parent.parent
TARGET_CREATES_PER_S = 500.0
TARGET_LIST_SECONDS = 1.0
TARGET_LIST_SIZE = 10_000
REQUEST_TIMEOUT = 60.0
START_TIMEOUT = 60.0
MAX_ERRORS = 50
"""A phase stops issuing requests after this many failures."""

Obj = dict[str, Any]


@dataclass
class Sizes:
    creates: int
    concurrency: int
    gets: int
    list_size: int
    page: int
    watchers: int
    events: int
    list_repeats: int
    phase_timeout: float


# --------------------------------------------------------------------------- server process


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    url: str
    token: str
    ca_path: Path
    log_path: Path

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server process so far (Linux)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0.0
        rest = stat.rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _die_with_parent() -> None:
    """In the child: SIGTERM it when the benchmark process dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_server(data_dir: Path, profile: Path | None = None,
                 command: tuple[str, ...] = ("apiserver",),
                 extra: tuple[str, ...] = (), ca_file: Path | None = None) -> Server:
    """Start ``racksmith <command>`` (default: the API server alone; the
    approach of tests/harness/process.py) on port 0 and wait until /readyz is 200.
    ``ca_file``: the CA its serving certificate is checked against (None: the
    one it makes, DATA/pki/ca.crt; give the one of ``--tls-cert-file``)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = data_dir / "kubeconfig"
    log_path = data_dir / "server.log"
    prefix = [sys.executable]
    if profile is not None:
        prefix += ["-m", "cProfile", "-o", str(profile)]
    args = [*prefix, "-m", "racksmith.cli.main", *command, "--data-dir", str(data_dir),
            "--port", "0", *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log_path.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                preexec_fn=_die_with_parent)
    server: Server | None = None
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n"
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            if server is None and kubeconfig.exists():
                with contextlib.suppress(Exception):
                    cfg = yaml.safe_load(kubeconfig.read_text())
                    url = cfg["clusters"][0]["cluster"]["server"]
                    if not url.endswith(":0"):
                        server = Server(proc, data_dir, url, cfg["users"][0]["user"]["token"],
                                        ca_file or data_dir / "pki" / "ca.crt", log_path)
            if server is not None and _ready(server):
                return server
            time.sleep(0.1)
        raise RuntimeError(f"server not ready in {START_TIMEOUT:.0f}s:\n"
                           f"{log_path.read_text(errors='replace')[-3000:]}")
    except BaseException:
        Server(proc, data_dir, "", "", Path(), log_path).stop()
        raise


def _ready(server: Server) -> bool:
    ctx = ssl.create_default_context(cafile=str(server.ca_path))
    req = urllib.request.Request(f"{server.url}/readyz",
                                 headers={"Authorization": f"Bearer {server.token}"})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except Exception:
        return False


# --------------------------------------------------------------------------- client helpers


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(q * len(ordered) + 0.5) - 1))]


@dataclass
class OpStats:
    ops: int
    seconds: float
    latencies: list[float] = field(repr=False)
    errors: Counter[str]
    cpu: Obj

    @property
    def rate(self) -> float:
        ok = self.ops - sum(self.errors.values())
        return ok / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> Obj:
        return {"ops": self.ops, "seconds": round(self.seconds, 4),
                "per_second": round(self.rate, 1),
                "p50_ms": round(quantile(self.latencies, 0.50) * 1000, 2),
                "p99_ms": round(quantile(self.latencies, 0.99) * 1000, 2),
                "max_ms": round(max(self.latencies, default=0.0) * 1000, 2),
                "errors": dict(self.errors), **self.cpu}


def machine_busy_seconds() -> float:
    """CPU seconds all processes on this machine have used so far, over all cores
    (Linux ``/proc/stat``; 0 elsewhere). Shows when something else competes for the CPUs."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time of one phase, and the CPU time of the server, of this client and of
    everything else on the machine meanwhile."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def __enter__(self) -> Meter:
        self.t0 = time.perf_counter()
        self.s0 = self.server.cpu_seconds()
        self.c0 = time.process_time()
        self.m0 = machine_busy_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.server_cpu = self.server.cpu_seconds() - self.s0
        self.client_cpu = time.process_time() - self.c0
        self.other_cpu = max(0.0, machine_busy_seconds() - self.m0 - self.server_cpu
                             - self.client_cpu)

    def cpu(self) -> Obj:
        """CPU use as % of one core: server, client and other processes."""
        def pct(x: float) -> float:
            return round(100 * x / self.seconds, 1) if self.seconds > 0 else 0.0
        return {"server_cpu_pct": pct(self.server_cpu), "client_cpu_pct": pct(self.client_cpu),
                "other_cpu_pct": pct(self.other_cpu)}


async def run_ops(server: Server, n: int, concurrency: int,
                  op: Callable[[int], Awaitable[int]], ok: int) -> OpStats:
    """Run ``op(i)`` for i in 0..n-1 from ``concurrency`` workers; ``op`` returns a status."""
    counter = iter(range(n))
    latencies: list[float] = []
    errors: Counter[str] = Counter()

    async def worker() -> None:
        for i in counter:
            if sum(errors.values()) >= MAX_ERRORS:
                errors["aborted"] += 1
                continue
            t = time.perf_counter()
            try:
                status = await op(i)
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors[type(exc).__name__] += 1
                continue
            latencies.append(time.perf_counter() - t)
            if status != ok:
                errors[f"HTTP {status}"] += 1

    with Meter(server) as m:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return OpStats(n, m.seconds, latencies, errors, m.cpu())


def configmap(name: str, i: int) -> Obj:
    """About the size of store_bench's Pod, so the raw-SQLite comparison is fair."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": "bench", "i": str(i)}},
            "data": {"image": "busybox:1.36", "node": f"node-{i % 50}", "seq": str(i)}}


class Client:
    def __init__(self, server: Server, pool: int, read_timeout: float = REQUEST_TIMEOUT) -> None:
        ctx = ssl.create_default_context(cafile=str(server.ca_path))
        connector = aiohttp.TCPConnector(ssl=ctx, limit=pool, limit_per_host=pool,
                                         keepalive_timeout=120)
        self.session = aiohttp.ClientSession(
            base_url=server.url, connector=connector,
            headers={"Authorization": f"Bearer {server.token}", "User-Agent": "racksmith-bench"},
            timeout=aiohttp.ClientTimeout(total=read_timeout, sock_read=read_timeout))

    async def close(self) -> None:
        await self.session.close()

    async def create(self, path: str, obj: Obj) -> int:
        async with self.session.post(path, data=orjson.dumps(obj),
                                     headers={"Content-Type": "application/json"}) as r:
            await r.read()
            return r.status

    async def patch(self, path: str, patch: Obj) -> int:
        async with self.session.patch(
                path, data=orjson.dumps(patch),
                headers={"Content-Type": "application/merge-patch+json"}) as r:
            await r.read()
            return r.status

    async def get(self, path: str, params: dict[str, str] | None = None) -> tuple[int, bytes]:
        async with self.session.get(path, params=params) as r:
            return r.status, await r.read()


def cm_path(ns: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    return f"{base}/{name}" if name else base


async def create_namespace(client: Client, name: str) -> None:
    status = await client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    if status not in (201, 409):
        raise RuntimeError(f"creating namespace {name}: HTTP {status}")


# --------------------------------------------------------------------------- phases


async def phase_creates(server: Server, client: Client, ns: str, n: int,
                        concurrency: int) -> OpStats:
    async def op(i: int) -> int:
        return await client.create(cm_path(ns), configmap(f"cm-{i:07d}", i))

    return await run_ops(server, n, concurrency, op, 201)


async def phase_gets(server: Server, client: Client, ns: str, n_objects: int, n: int,
                     concurrency: int) -> OpStats:
    rng = random.Random(1)
    picks = [rng.randrange(n_objects) for _ in range(n)]

    async def op(i: int) -> int:
        status, _ = await client.get(cm_path(ns, f"cm-{picks[i]:07d}"))
        return status

    return await run_ops(server, n, concurrency, op, 200)


async def phase_list(server: Server, client: Client, ns: str, expect: int, page: int,
                     repeats: int) -> Obj:
    full: list[float] = []
    full_cpu: list[Obj] = []
    size = 0
    problems: list[str] = []
    for _ in range(repeats):
        with Meter(server) as m:
            status, body = await client.get(cm_path(ns))
            items = orjson.loads(body).get("items", []) if status == 200 else []
        full.append(m.seconds)
        full_cpu.append(m.cpu())
        size = len(body)
        if status != 200 or len(items) != expect:
            problems.append(f"unpaged list: HTTP {status}, {len(items)} items "
                            f"(expected {expect})")
    paged: list[float] = []
    pages = 0
    for _ in range(repeats):
        count, pages, token = 0, 0, ""
        with Meter(server) as m:
            while True:
                params = {"limit": str(page)}
                if token:
                    params["continue"] = token
                status, body = await client.get(cm_path(ns), params)
                if status != 200:
                    problems.append(f"paged list: HTTP {status} on page {pages + 1}")
                    break
                doc = orjson.loads(body)
                count += len(doc.get("items", []))
                pages += 1
                token = doc.get("metadata", {}).get("continue", "")
                if not token or pages > expect // max(page, 1) + 2:
                    break
        paged.append(m.seconds)
        if count != expect:
            problems.append(f"paged list: {count} items in {pages} pages (expected {expect})")
    best = min(range(len(full)), key=full.__getitem__)
    return {"objects": expect, "repeats": repeats, "bytes": size,
            "seconds_median": round(sorted(full)[len(full) // 2], 4),
            "seconds_min": round(min(full), 4),
            "cpu_of_fastest": full_cpu[best],
            "paged_limit": page, "pages": pages,
            "paged_seconds_median": round(sorted(paged)[len(paged) // 2], 4),
            "paged_seconds_min": round(min(paged), 4),
            "problems": problems}


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The non-empty lines of a watch stream, read a chunk at a time (as
    client-go's decoder reads its buffer; aiohttp's per-line readline costs
    the bench client more than the events themselves)."""
    rest = b""
    async for data in content.iter_any():
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.strip():
                yield line
    if rest.strip():
        yield rest


async def phase_watch(server: Server, client: Client, ns: str, watchers: int, events: int,
                      concurrency: int, wait_s: float) -> Obj:
    status, body = await client.get(cm_path(ns), {"limit": "1"})
    if status != 200:
        raise RuntimeError(f"list before watch: HTTP {status}")
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    n_creates = (events + 1) // 2
    n_updates = events - n_creates
    expected = {(f"w-{i:06d}", "ADDED") for i in range(n_creates)}
    expected |= {(f"w-{i:06d}", "MODIFIED") for i in range(n_updates)}

    wclient = Client(server, watchers + 1, read_timeout=wait_s)
    connected = 0
    all_connected = asyncio.Event()
    done_at: list[float] = []
    received: list[int] = [0] * watchers
    problems: list[str] = []

    def mark_connected() -> None:
        nonlocal connected
        connected += 1
        if connected == watchers:
            all_connected.set()

    async def watcher(w: int) -> None:
        try:
            await watch_one(w)
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
            problems.append(f"watcher {w}: {type(exc).__name__}: {exc}")
            if not is_connected[w]:
                is_connected[w] = True
                mark_connected()

    is_connected = [False] * watchers

    async def watch_one(w: int) -> None:
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(int(wait_s))}
        async with wclient.session.get(cm_path(ns), params=params) as r:
            is_connected[w] = True
            mark_connected()
            if r.status != 200:
                problems.append(f"watcher {w}: HTTP {r.status}")
                return
            seen: set[tuple[str, str]] = set()
            last_rv = int(rv)
            async for line in _lines(r.content):
                ev = orjson.loads(line)
                kind = ev.get("type")
                if kind == "BOOKMARK":
                    continue
                if kind == "ERROR":
                    problems.append(f"watcher {w}: ERROR event {ev.get('object')}")
                    return
                meta = ev["object"]["metadata"]
                ev_rv = int(meta["resourceVersion"])
                if ev_rv <= last_rv:
                    problems.append(f"watcher {w}: rv {ev_rv} after {last_rv} (out of order)")
                last_rv = ev_rv
                seen.add((meta["name"], kind))
                received[w] += 1
                if received[w] >= events:
                    done_at.append(time.perf_counter())
                    if seen != expected:
                        problems.append(f"watcher {w}: wrong event set "
                                        f"({len(expected - seen)} missing)")
                    return
            problems.append(f"watcher {w}: stream ended after {received[w]} events")

    tasks = [asyncio.create_task(watcher(w)) for w in range(watchers)]
    try:
        await asyncio.wait_for(all_connected.wait(), 60)
        # Let every watch reach its event loop (rv-based, so nothing is lost anyway).
        await asyncio.sleep(0.2)

        async def create(i: int) -> int:
            return await client.create(cm_path(ns), configmap(f"w-{i:06d}", i))

        async def update(i: int) -> int:
            return await client.patch(cm_path(ns, f"w-{i:06d}"), {"data": {"seq": f"u{i}"}})

        with Meter(server) as m:
            writes_c = await run_ops(server, n_creates, concurrency, create, 201)
            writes_u = await run_ops(server, n_updates, concurrency, update, 200)
            writes_done = time.perf_counter()
            _, pending = await asyncio.wait(tasks, timeout=wait_s)
        for t in tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                problems.append(f"watcher failed: {t.exception()!r}")
        if pending:
            problems.append(f"{len(pending)} watchers not done within {wait_s:.0f}s; "
                            f"received min {min(received)} / max {max(received)} of {events}")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await wclient.close()
    errors = writes_c.errors + writes_u.errors
    seconds = (max(done_at) - m.t0) if len(done_at) == watchers else m.seconds
    delivered = sum(received)
    return {"watchers": watchers, "events": events, "creates": n_creates,
            "updates": n_updates, "seconds": round(seconds, 4),
            "events_delivered": delivered,
            "events_per_second": round(delivered / seconds, 1) if seconds else 0.0,
            "writes_seconds": round(writes_done - m.t0, 4),
            "writes_per_second": round(events / (writes_done - m.t0), 1),
            "lag_after_last_write_s": round(max(0.0, seconds - (writes_done - m.t0)), 4),
            **m.cpu(),
            "write_errors": dict(errors), "problems": problems}


# --------------------------------------------------------------------------- run + report


async def run(server: Server, sizes: Sizes, res: Obj) -> None:
    """Run every phase, filling ``res`` as they finish (partial results survive errors)."""
    t = sizes.phase_timeout
    client = Client(server, sizes.concurrency)
    try:
        for ns in ("bench-create", "bench-list", "bench-watch"):
            await create_namespace(client, ns)
        # Open (and TLS-handshake) the pool's connections before timing anything.
        await asyncio.gather(*(client.get("/api/v1/namespaces/default")
                               for _ in range(sizes.concurrency)))

        creates = await asyncio.wait_for(
            phase_creates(server, client, "bench-create", sizes.creates, sizes.concurrency), t)
        res["creates"] = creates.as_dict()
        gets = await asyncio.wait_for(
            phase_gets(server, client, "bench-create", sizes.creates, sizes.gets,
                       sizes.concurrency), t)
        res["gets"] = gets.as_dict()
        fill = await asyncio.wait_for(
            phase_creates(server, client, "bench-list", sizes.list_size, sizes.concurrency), t)
        res["list_fill_creates"] = fill.as_dict()
        res["list"] = await asyncio.wait_for(
            phase_list(server, client, "bench-list", sizes.list_size, sizes.page,
                       sizes.list_repeats), t)
        res["watch"] = await asyncio.wait_for(
            phase_watch(server, client, "bench-watch", sizes.watchers, sizes.events,
                        sizes.concurrency, t), t + 60)
    finally:
        await client.close()


def server_log_problems(log: str) -> list[str]:
    lines = log.splitlines()
    return [ln for ln in lines if " ERROR " in ln or " CRITICAL " in ln or "Traceback" in ln]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}/s"


def cpu_text(d: Obj) -> str:
    return (f"{d['server_cpu_pct']:.0f}% / {d['client_cpu_pct']:.0f}% / "
            f"{d['other_cpu_pct']:.0f}%")


def build_rows(r: Obj, sizes: Sizes) -> list[tuple[str, str, str, str]]:
    """(metric, result, target, status) rows."""
    rows: list[tuple[str, str, str, str]] = []
    ref = r["reference"]
    rows.append((f"{ref['label']}, n={ref['n']} (before {ref['before_server']:,.0f}/s, after "
                 f"{ref['after_server']:,.0f}/s)", fmt_rate(ref["per_second"]), "reference",
                 ""))
    if "creates" in r:
        c = r["creates"]
        ok = c["per_second"] >= TARGET_CREATES_PER_S
        rows.append((f"ConfigMap creates, n={c['ops']}, C={sizes.concurrency}",
                     fmt_rate(c["per_second"]), f">= {TARGET_CREATES_PER_S:.0f}/s",
                     "PASS" if ok else "FAIL"))
        rows.append(("  create latency p50 / p99",
                     f"{c['p50_ms']:.1f} / {c['p99_ms']:.1f} ms", "", ""))
        rows.append(("  CPU: server / bench client / other processes",
                     cpu_text(c), "", ""))
        ratio = r["ratio_creates_to_raw"]
        if r["store"] == "etcd":
            rows.append(("creates/s / raw etcd creates/s", f"{ratio:.2f}", ">= 0.3",
                         "PASS" if ratio >= 0.3 else "FAIL"))
        else:
            rows.append(("creates/s / raw SQLite inserts/s", f"{ratio:.2f}", "", ""))
    if "gets" in r:
        g = r["gets"]
        rows.append((f"random gets, n={g['ops']}, C={sizes.concurrency}",
                     fmt_rate(g["per_second"]), "", ""))
        rows.append(("  get latency p50 / p99", f"{g['p50_ms']:.1f} / {g['p99_ms']:.1f} ms",
                     "", ""))
        rows.append(("  CPU: server / bench client / other processes",
                     cpu_text(g), "", ""))
    if "list_fill_creates" in r:
        f = r["list_fill_creates"]
        rows.append((f"ConfigMap creates (list fill), n={f['ops']}, C={sizes.concurrency}",
                     fmt_rate(f["per_second"]), "", ""))
    if "list" in r:
        li = r["list"]
        full_size = li["objects"] == TARGET_LIST_SIZE
        ok = li["seconds_median"] < TARGET_LIST_SECONDS
        rows.append((f"list {li['objects']:,} objects, 1 request "
                     f"({li['bytes'] / 1e6:.1f} MB, median of {li['repeats']})",
                     f"{li['seconds_median']:.3f} s", f"< {TARGET_LIST_SECONDS:.0f} s "
                     f"(10k)", ("PASS" if ok else "FAIL") if full_size else "n/a"))
        rows.append(("  CPU: server / bench client / other processes (fastest)",
                     cpu_text(li["cpu_of_fastest"]), "", ""))
        rows.append((f"list {li['objects']:,} objects, limit={li['paged_limit']} "
                     f"({li['pages']} requests)", f"{li['paged_seconds_median']:.3f} s", "", ""))
    if "watch" in r:
        w = r["watch"]
        full = w["watchers"] >= 100 and w["events"] >= 1000
        rows.append((f"watch fan-out: {w['watchers']} watchers x {w['events']:,} events, "
                     "until all received", f"{w['seconds']:.2f} s",
                     "<= 1.5 s" if full else "",
                     ("PASS" if w["seconds"] <= 1.5 else "MISS") if full else ""))
        rows.append(("  events delivered in total", fmt_rate(w["events_per_second"]), "", ""))
        rows.append((f"  writes during fan-out ({w['creates']} creates + "
                     f"{w['updates']} patches)", fmt_rate(w["writes_per_second"]), "", ""))
        rows.append(("  CPU: server / bench client / other processes",
                     cpu_text(w), "", ""))
    return rows


def print_table(rows: list[tuple[str, str, str, str]], title: str) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        for metric, result, target, status in rows:
            print(f"{metric:<72}{result:>18}  {target:<14}{status}")
        return
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("result", justify="right")
    table.add_column("target")
    table.add_column("status")
    for metric, result, target, status in rows:
        style = {"PASS": "green", "FAIL": "red"}.get(status, "")
        table.add_row(metric, result, target, f"[{style}]{status}[/]" if style else status)
    Console(width=130).print(table)


def collect_problems(r: Obj) -> list[str]:
    out: list[str] = []
    for key in ("creates", "gets", "list_fill_creates"):
        if r.get(key, {}).get("errors"):
            out.append(f"{key}: failed requests {r[key]['errors']}")
    out += [f"list: {p}" for p in r.get("list", {}).get("problems", [])]
    w = r.get("watch", {})
    if w.get("write_errors"):
        out.append(f"watch: failed writes {w['write_errors']}")
    out += [f"watch: {p}" for p in w.get("problems", [])[:20]]
    if r.get("phase_error"):
        out.append(f"phase error: {r['phase_error']}")
    out += [f"server log: {ln}" for ln in r.get("server", {}).get("log_errors", [])[:20]]
    rc = r.get("server", {}).get("exit_code")
    if rc not in (0, None):
        out.append(f"server exit code {rc} after SIGTERM")
    return out


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Sizes]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run in < 30 s")
    p.add_argument("--creates", type=int, help="creates (and gets) to time (default 5000)")
    p.add_argument("--concurrency", type=int, help="concurrent requests (default 32)")
    p.add_argument("--list-size", type=int, help="objects to list (default 10000)")
    p.add_argument("--watchers", type=int, help="watchers (default 100)")
    p.add_argument("--events", type=int, help="events per watcher (default 1000)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the data dirs go (default $TMPDIR)")
    p.add_argument("--profile", type=Path, metavar="PATH",
                   help="run the server under cProfile and write its stats to PATH")
    p.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite",
                   help="the server's store: its SQLite file, or a local etcd cluster "
                   "(reference: raw etcd creates of the same size and concurrency)")
    p.add_argument("--etcd-members", type=int, default=3, help="members of that cluster")
    a = p.parse_args(argv)
    if a.quick:
        sizes = Sizes(creates=300, concurrency=16, gets=300, list_size=1000, page=100,
                      watchers=10, events=100, list_repeats=2, phase_timeout=60)
    else:
        sizes = Sizes(creates=5000, concurrency=32, gets=5000, list_size=TARGET_LIST_SIZE,
                      page=500, watchers=100, events=1000, list_repeats=3, phase_timeout=300)
    if a.creates is not None:
        sizes.creates = sizes.gets = max(1, a.creates)
    if a.concurrency is not None:
        sizes.concurrency = max(1, a.concurrency)
    if a.list_size is not None:
        sizes.list_size = max(1, a.list_size)
    if a.watchers is not None:
        sizes.watchers = max(1, a.watchers)
    if a.events is not None:
        sizes.events = max(2, a.events)
    return a, sizes


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args, sizes = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    results: Obj = {
        "benchmark": "racksmith apiserver", "date": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg_start": os.getloadavg()},
        "params": {**sizes.__dict__, "quick": args.quick}}
    results["store"] = args.store
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-", dir=args.tmpdir) as d, \
            contextlib.ExitStack() as stack:
        tmp = Path(d)
        extra: tuple[str, ...] = ()
        if args.store == "etcd":
            from etcd_bench import raw_etcd_creates

            from racksmith.apiserver.store.etcd import EtcdConfig
            from racksmith.etcdcluster import LocalEtcdCluster
            print(f"starting a {args.etcd_members}-member etcd cluster ...", flush=True)
            cluster = LocalEtcdCluster(tmp / "etcd", args.etcd_members)
            stack.callback(cluster.stop)
            cluster.start()
            tls = cluster.tls
            assert tls is not None
            etcd = EtcdConfig(endpoints=tuple(cluster.endpoints), ca_file=tls.ca_file,
                              cert_file=tls.cert_file, key_file=tls.key_file)
            extra = ("--etcd-endpoints", ",".join(cluster.endpoints), "--etcd-cafile",
                     str(tls.ca_file), "--etcd-certfile", str(tls.cert_file),
                     "--etcd-keyfile", str(tls.key_file))
            label = (f"raw etcd creates (txn create_revision==0, TLS gRPC, "
                     f"{args.etcd_members} members, C={sizes.concurrency})")

            def reference(name: str) -> float:  # one signature with the SQLite variant
                return raw_etcd_creates(etcd, sizes.creates, sizes.concurrency)
        else:
            label = "raw SQLite inserts (WAL, sync=FULL, 1 commit each)"

            def reference(name: str) -> float:
                return raw_sqlite_inserts(tmp / f"{name}.db", sizes.creates)
        print(f"reference: {label}, {sizes.creates} ...", flush=True)
        raw_before = reference("raw-before")
        print("starting the API server ...", flush=True)
        server = start_server(tmp / "server", args.profile, extra=extra)
        try:
            print(f"server {server.url} (pid {server.proc.pid}); running "
                  f"{'quick ' if args.quick else ''}phases ...", flush=True)
            try:
                asyncio.run(run(server, sizes, results))
            except (TimeoutError, RuntimeError, aiohttp.ClientError) as exc:
                results["phase_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            rc = server.stop()
            results["machine"]["loadavg_end"] = os.getloadavg()
            results["server"] = {"exit_code": rc,
                                 "log_errors": server_log_problems(server.log())}
        # The reference again, after the server: disk and CPU contention vary over a run,
        # so the ratio uses the mean of both.
        print(f"reference again: {sizes.creates} ...", flush=True)
        raw_after = reference("raw-after")
        raw = (raw_before + raw_after) / 2
        results["reference"] = {"label": label, "n": sizes.creates,
                                "per_second": round(raw, 1),
                                "before_server": round(raw_before, 1),
                                "after_server": round(raw_after, 1)}
    if "creates" in results and raw > 0:
        results["ratio_creates_to_raw"] = round(results["creates"]["per_second"] / raw, 3)
    problems = collect_problems(results)
    results["problems"] = problems
    title = (f"racksmith apiserver over HTTPS on {args.store} — {os.cpu_count()} cores, Python "
             f"{platform.python_version()}{' (quick)' if args.quick else ''}")
    print_table(build_rows(results, sizes), title)
    print(f"CPU figures are % of one core (the machine has {os.cpu_count()} cores); load "
          f"average before/after: {results['machine']['loadavg_start'][0]:.2f} / "
          f"{results['machine'].get('loadavg_end', (0.0,))[0]:.2f}")
    for prob in problems:
        print(f"PROBLEM: {prob}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
