"""Benchmark of IPAM address claims against a real API server.

Owns the IPAM part of ``make bench``. Measures, in one run:

* the in-memory baseline: the pure allocator (``racksmith.ipam.Allocator``)
  handing out N addresses of a /16, no I/O at all;
* API claims: N addresses claimed from a /16 Subnet by C concurrent
  claimers (each with its own ApiClient, shared IPaddr informer and
  TakenHint, as separate controller processes would be — ``--no-cache``:
  no informer; each claims with W concurrent workers
  sharing its hint, default 4 as ``racksmith up``'s controllers have),
  twice: lowest address first (the default) and with
  ``TakenHint(spread=...)`` (random start), each on its own /16; both with the real protocol
  (``racksmith.ipamclaims.claim_address``: create the IPaddr named
  after the address; 409 → someone else won, try the next) against a
  ``racksmith apiserver`` process started here (port 0, temporary data dir,
  stopped by PID; it dies with us);

and prints a table with claims/s, the ratio to the baseline, lost races
(409s) and p50/p99 claim latency. Afterwards it checks the result: exactly N
IPaddr objects, all addresses distinct, and the Subnet controller's status
(one reconcile) showing N allocated. Exit status 1 if any check failed.

    .venv/bin/python bench/ipam.py [--quick] [--count N] [--claimers C] [--workers W]
        [--no-cache] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from apiserver import Server, quantile, server_log_problems, start_server
from kubernetes_asyncio.client import CustomObjectsApi

from racksmith.controllers.ipam import SubnetReconciler
from racksmith.ipam import Allocated, Allocator, parse_pool
from racksmith.ipamclaims import Claimed, TakenHint, claim_address, list_ipaddrs
from racksmith.kinds.common import ObjectReference
from racksmith.runtime.client import Client
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from racksmith.runtime.resources import IPADDRS

GROUP, VERSION, NS = "ipam.racksmith.io", "v1alpha1", "default"
CIDR, GATEWAY = "10.100.0.0/16", "10.100.0.1"
PHASE_TIMEOUT = 900.0
OWNER = ObjectReference(api_version="metal.racksmith.io/v1alpha1", kind="Machine",
                        name="bench", namespace=NS)
Obj = dict[str, Any]


def in_memory(n: int, repeats: int = 3) -> float:
    """Allocations/s of the pure allocator (best of ``repeats``)."""
    pool = parse_pool(CIDR, GATEWAY)
    best = 0.0
    for _ in range(repeats):
        alloc = Allocator(pool)
        start = time.perf_counter()
        for _ in range(n):
            if not isinstance(alloc.allocate(), Allocated):
                raise RuntimeError("in-memory pool exhausted")
        best = max(best, n / (time.perf_counter() - start))
    return best


PHASES = (("lowest first", "bench-net", "10.100.0.0/16", False),
          ("spread", "bench-spread", "10.101.0.0/16", True))


async def claims(server: Server, n: int, claimers: int, subnet_name: str, cidr: str,
                 spread: bool, workers: int = 1, cache: bool = True) -> Obj:
    """One phase: ``claimers`` concurrent claimers take ``n`` addresses of a new
    subnet (``cache``: each with a shared IPaddr informer, as a controller
    process has)."""
    gateway = cidr.replace(".0/16", ".1")
    kubeconfig = server.data_dir / "kubeconfig"
    admin = await api_client_from_kubeconfig(kubeconfig)
    clients = [Client(await api_client_from_kubeconfig(kubeconfig)) for _ in range(claimers)]
    informers = [c.informer(IPADDRS, NS) for c in clients] if cache else []
    for informer in informers:
        informer.acquire()
    try:
        async with asyncio.timeout(60):
            while not all(i.has_synced for i in informers):
                await asyncio.sleep(0.05)
        api = CustomObjectsApi(admin)
        await api.create_namespaced_custom_object(GROUP, VERSION, NS, "subnets", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Subnet",
            "metadata": {"name": subnet_name}, "spec": {"cidr": cidr, "gateway": gateway}})
        reconciler = SubnetReconciler(admin)
        key = ObjectKey(NS, subnet_name)
        await reconciler.reconcile(key)
        subnet = await api.get_namespaced_custom_object(GROUP, VERSION, NS, "subnets",
                                                        subnet_name)
        shares = [n // claimers + (1 if i < n % claimers else 0) for i in range(claimers)]
        latencies: list[float] = []
        conflicts = 0
        failures: list[str] = []

        async def claimer(i: int, client: Client, count: int) -> list[str]:
            hint = TakenHint(spread=random.Random(i).random if spread else None)
            shares = [count // workers + (1 if w < count % workers else 0)
                      for w in range(workers)]
            done = await asyncio.gather(*(worker(client, hint, k) for k in shares))
            return [a for got in done for a in got]

        async def worker(client: Client, hint: TakenHint, count: int) -> list[str]:
            nonlocal conflicts
            got: list[str] = []
            for _ in range(count):
                t0 = time.perf_counter()
                out = await claim_address(client, subnet, OWNER, hint=hint)
                latencies.append(time.perf_counter() - t0)
                if not isinstance(out, Claimed):
                    failures.append(out.message)
                    return got
                conflicts += out.conflicts
                got.append(out.address)
            return got

        cpu0, client0 = server.cpu_seconds(), time.process_time()
        start = time.perf_counter()
        async with asyncio.timeout(PHASE_TIMEOUT):
            results = await asyncio.gather(*(claimer(i, c, k) for i, (c, k) in
                                             enumerate(zip(clients, shares, strict=True))))
        seconds = time.perf_counter() - start
        cpu, client_cpu = server.cpu_seconds() - cpu0, time.process_time() - client0
        addresses = [a for r in results for a in r]
        stored = await list_ipaddrs(admin, NS, subnet=subnet_name)
        await reconciler.reconcile(key)
        after = await api.get_namespaced_custom_object(GROUP, VERSION, NS, "subnets",
                                                       subnet_name)
        status = after.get("status") or {}
        return {
            "n": n, "claimers": claimers, "workers": workers, "cidr": cidr, "spread": spread,
            "cache": cache,
            "seconds": round(seconds, 3),
            "per_second": round(len(addresses) / seconds, 1) if seconds else 0.0,
            "conflicts": conflicts, "failures": failures[:5],
            "p50_ms": round(quantile(latencies, 0.5) * 1000, 2),
            "p99_ms": round(quantile(latencies, 0.99) * 1000, 2),
            "server_cpu_percent": round(100 * cpu / seconds, 0) if seconds else 0.0,
            "client_cpu_percent": round(100 * client_cpu / seconds, 0) if seconds else 0.0,
            "claimed": len(addresses), "distinct": len(set(addresses)),
            "stored": len(stored),
            "stored_distinct": len({o["spec"]["address"] for o in stored}),
            "status_allocated": status.get("allocated"),
            "status_capacity": status.get("capacity"),
        }
    finally:
        for informer in informers:
            await informer.release()
        for c in [admin, *(c.api_client for c in clients)]:
            await c.close()


async def run(server: Server, n: int, claimers: int, res: Obj, workers: int = 1,
              cache: bool = True) -> None:
    for name, subnet_name, cidr, spread in PHASES:
        print(f"  {name}: {claimers} claimers x {workers} workers claiming {n} addresses "
              f"of {cidr} ...", flush=True)
        res["phases"][name] = await claims(server, n, claimers, subnet_name, cidr, spread,
                                           workers, cache)


def problems_of(res: Obj) -> list[str]:
    out = []
    if res.get("phase_error"):
        out.append(res["phase_error"])
    for name, _, _, _ in PHASES:
        c = res["phases"].get(name)
        if c is None:
            out.append(f"phase {name!r} did not run")
            continue
        if c["failures"]:
            out.append(f"{name}: claims failed: {c['failures']}")
        if not c["claimed"] == c["distinct"] == c["stored"] == c["stored_distinct"] == c["n"]:
            out.append(f"{name}: expected {c['n']} distinct addresses, claimed {c['claimed']} "
                       f"({c['distinct']} distinct), stored {c['stored']} "
                       f"({c['stored_distinct']} distinct)")
        if c["status_allocated"] != c["n"]:
            out.append(f"{name}: Subnet status shows {c['status_allocated']} allocated, "
                       f"not {c['n']}")
    out += [f"server log: {p}" for p in res.get("server", {}).get("log_errors", [])]
    return out


def print_table(res: Obj) -> None:
    mem = res["in_memory_per_second"]
    rows = [("in-memory allocator (pure, no I/O), /16", f"{res['params']['count']:,}",
             f"{mem:,.0f}/s")]
    for name, c in res["phases"].items():
        rows += [
            (f"API claims, {c['claimers']} claimers x {c.get('workers', 1)} workers, {name}",
             f"{c['n']:,}",
             f"{c['per_second']:,.0f}/s"),
            ("  claim latency p50 / p99", "", f"{c['p50_ms']} / {c['p99_ms']} ms"),
            ("  lost races (409 AlreadyExists, retried)", "", f"{c['conflicts']:,}"),
            ("  CPU, % of one core: server / claimers", "",
             f"{c['server_cpu_percent']:.0f}% / {c['client_cpu_percent']:.0f}%"),
            ("  distinct addresses / IPaddr objects / status.allocated", "",
             f"{c['distinct']:,} / {c['stored']:,} / {c['status_allocated']}"),
            ("  API claims/s ÷ in-memory allocations/s", "",
             f"{c['per_second'] / mem:.5f}"),
        ]
    width = max(len(r[0]) for r in rows)
    print(f"\nIPAM allocation — {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'':{width}}  {'n':>7}  result")
    for name, n, value in rows:
        print(f"{name:{width}}  {n:>7}  {value}")


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="addresses to claim")
    parser.add_argument("--claimers", type=int, default=4, help="concurrent claimers")
    parser.add_argument("--workers", type=int, default=4,
                        help="concurrent claims per claimer, sharing its hint")
    parser.add_argument("--no-cache", action="store_true",
                        help="claimers without an IPaddr informer (hint from one list only)")
    parser.add_argument("--quick", action="store_true", help="1,000 addresses")
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the data dir goes")
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    args = parser.parse_args(argv)
    count = 1_000 if args.quick else args.count
    signal.signal(signal.SIGTERM, _sigterm)
    res: Obj = {"benchmark": "racksmith ipam", "date": dt.datetime.now(dt.UTC).isoformat(),
                "params": {"count": count, "claimers": args.claimers,
                           "workers": max(1, args.workers), "cache": not args.no_cache},
                "phases": {},
                "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "loadavg_start": os.getloadavg()}}
    print(f"in-memory allocator: {count} allocations ...", flush=True)
    res["in_memory_per_second"] = round(in_memory(count), 1)
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-ipam-", dir=args.tmpdir) as d:
        print("starting the API server ...", flush=True)
        server = start_server(Path(d) / "server")
        try:
            print(f"server {server.url} (pid {server.proc.pid})", flush=True)
            try:
                asyncio.run(run(server, count, args.claimers, res, max(1, args.workers),
                                not args.no_cache))
            except (TimeoutError, RuntimeError, OSError) as exc:
                res["phase_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            rc = server.stop()
            res["server"] = {"exit_code": rc, "log_errors": server_log_problems(server.log())}
    res["machine"]["loadavg_end"] = os.getloadavg()
    for phase in res["phases"].values():
        phase["ratio_to_in_memory"] = round(
            phase["per_second"] / res["in_memory_per_second"], 6)
    res["problems"] = problems_of(res)
    print_table(res)
    for prob in res["problems"]:
        print(f"PROBLEM: {prob}")
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
