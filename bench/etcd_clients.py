"""Which etcd client for the store: gRPC or etcd's JSON gateway, measured.

Owns the measurement behind the README's choice of grpcio (with aetcd's
generated stubs) for racksmith.apiserver.store.etcd. Starts a one-member
local etcd with TLS (racksmith.etcdcluster) and, with each client in turn,
makes N create transactions (``create_revision == 0`` → put, what the store
does for a create) of ~1 kB values from 1 and from 16 concurrent callers, then
reads them back in one range request. It prints a table with the gateway's
figures as the reference and gRPC's ratio to them.

    .venv/bin/python bench/etcd_clients.py [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import orjson
from aetcd import rpc

from racksmith.apiserver.store.etcd import EtcdConfig, open_channel
from racksmith.etcdcluster import LocalEtcdCluster

VALUE = b"x" * 1000


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def gateway(url: str, ssl_ctx: object, n: int, concurrency: int) -> tuple[float, float]:
    """(creates/s, seconds to range-read them) through the JSON gateway."""
    prefix = f"/gw-{uuid.uuid4().hex}/".encode()
    conn = aiohttp.TCPConnector(ssl=ssl_ctx, limit=concurrency)  # type: ignore[arg-type]
    async with aiohttp.ClientSession(connector=conn) as http:
        counter = iter(range(n))

        async def caller() -> None:
            for i in counter:
                key = prefix + f"k{i:06d}".encode()
                body = {"compare": [{"key": _b64(key), "target": "CREATE", "result": "EQUAL",
                                     "create_revision": "0"}],
                        "success": [{"request_put": {"key": _b64(key), "value": _b64(VALUE)}}]}
                async with http.post(f"{url}/v3/kv/txn", data=orjson.dumps(body)) as resp:
                    answer = orjson.loads(await resp.read())
                    if not answer.get("succeeded"):
                        raise RuntimeError(f"gateway txn failed: {answer}")

        t0 = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        creates = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        body = {"key": _b64(prefix), "range_end": _b64(prefix[:-1] + b"0")}
        async with http.post(f"{url}/v3/kv/range", data=orjson.dumps(body)) as resp:
            listed = orjson.loads(await resp.read())
        values = [base64.b64decode(kv["value"]) for kv in listed.get("kvs", [])]
        read = time.perf_counter() - t0
        if len(values) != n:
            raise RuntimeError(f"gateway range read {len(values)} of {n}")
        return creates, read


async def grpc_client(config: EtcdConfig, n: int, concurrency: int) -> tuple[float, float]:
    """(creates/s, seconds to range-read them) through gRPC."""
    prefix = f"/grpc-{uuid.uuid4().hex}/".encode()
    channel = open_channel(config)
    kv = rpc.KVStub(channel)
    try:
        counter = iter(range(n))

        async def caller() -> None:
            for i in counter:
                key = prefix + f"k{i:06d}".encode()
                resp = await kv.Txn(rpc.TxnRequest(
                    compare=[rpc.Compare(key=key, target=rpc.Compare.CREATE,
                                         result=rpc.Compare.EQUAL, create_revision=0)],
                    success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=VALUE))]))
                if not resp.succeeded:
                    raise RuntimeError("grpc txn failed")

        t0 = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        creates = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        listed = await kv.Range(rpc.RangeRequest(key=prefix, range_end=prefix[:-1] + b"0"))
        values = [item.value for item in listed.kvs]
        read = time.perf_counter() - t0
        if len(values) != n:
            raise RuntimeError(f"grpc range read {len(values)} of {n}")
        return creates, read
    finally:
        await channel.close()


async def measure(cluster: LocalEtcdCluster, n: int) -> list[tuple[str, float, float]]:
    tls = cluster.tls
    assert tls is not None
    config = EtcdConfig(endpoints=tuple(cluster.endpoints), ca_file=tls.ca_file,
                        cert_file=tls.cert_file, key_file=tls.key_file)
    rows = []
    for concurrency in (1, 16):
        gw = await gateway(cluster.endpoints[0], tls.ssl_context(), n, concurrency)
        gr = await grpc_client(config, n, concurrency)
        rows.append((f"creates/s, {concurrency} caller(s)", gw[0], gr[0]))
        rows.append((f"range read of {n} values, s ({concurrency})", gw[1], gr[1]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="creates per run")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="racksmith-etcd-clients-") as d:
        cluster = LocalEtcdCluster(Path(d), 1)
        try:
            cluster.start()
            rows = asyncio.run(measure(cluster, args.n))
        finally:
            cluster.stop()
    print(f"etcd clients — one TLS member, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load {load:.2f}")
    print(f"{'metric':<42}{'JSON gateway (ref)':>20}{'gRPC':>12}{'ratio':>8}")
    for metric, gw, gr in rows:
        better = gr / gw if metric.startswith("creates") else gw / gr
        print(f"{metric:<42}{gw:>20,.3f}{gr:>12,.3f}{better:>7.2f}x")
    print("ratio: how many times better gRPC does (throughput up, time down)")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "n": args.n, "load_before": load,
            "rows": [{"metric": m, "gateway": gw, "grpc": gr,
                      "ratio": gr / gw if m.startswith("creates") else gw / gr}
                     for m, gw, gr in rows]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
