"""The raw-etcd reference of bench/apiserver.py --store etcd.

Owns: ``raw_etcd_creates``: the same single-key transaction the etcd store
makes for a create (``create_revision == 0`` → put), from C concurrent
callers, values of the size a stored ConfigMap has, over the same TLS gRPC
channel (racksmith.apiserver.store.etcd.open_channel): so the ratio of the
API's creates/s to it is the cost of the API server alone, at etcd's own
durability (a quorum fsync per write).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import orjson
from aetcd import rpc

from racksmith.apiserver.store.etcd import EtcdConfig, open_channel


def stored_configmap(i: int) -> bytes:
    """About what the API server stores for bench/apiserver.py's ConfigMap."""
    name = f"cm-{i:07d}"
    return orjson.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "bench-create", "uid": str(uuid.uuid4()),
                     "resourceVersion": "0", "creationTimestamp": "2026-12-04T00:00:00Z",
                     "labels": {"app": "bench", "i": str(i)},
                     "managedFields": [{"manager": "python", "operation": "Update",
                                        "apiVersion": "v1", "time": "2026-12-04T00:00:00Z",
                                        "fieldsType": "FieldsV1", "fieldsV1": {
                                            "f:data": {".": {}, "f:image": {}, "f:node": {},
                                                       "f:seq": {}},
                                            "f:metadata": {"f:labels": {
                                                ".": {}, "f:app": {}, "f:i": {}}}}}]},
        "data": {"image": "busybox:1.36", "node": f"node-{i % 50}", "seq": str(i)}})


async def _creates(config: EtcdConfig, n: int, concurrency: int) -> float:
    channel = open_channel(config)
    kv = rpc.KVStub(channel)
    prefix = f"/raw-bench-{uuid.uuid4().hex}/".encode()
    counter = iter(range(n))

    async def caller() -> None:
        for i in counter:
            key = prefix + f"ns{i % 10}!cm-{i:07d}".encode()
            resp = await kv.Txn(rpc.TxnRequest(
                compare=[rpc.Compare(key=key, target=rpc.Compare.CREATE,
                                     result=rpc.Compare.EQUAL, create_revision=0)],
                success=[rpc.RequestOp(request_put=rpc.PutRequest(
                    key=key, value=stored_configmap(i)))]), timeout=30)
            if not resp.succeeded:
                raise RuntimeError("raw etcd create refused")

    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
        await kv.DeleteRange(rpc.DeleteRangeRequest(key=prefix, range_end=prefix[:-1] + b"0"))
        return n / elapsed
    finally:
        await channel.close()


def raw_etcd_creates(config: EtcdConfig, n: int, concurrency: int) -> float:
    """Creates/s of raw etcd transactions (see the module docstring)."""
    return asyncio.run(_creates(config, n, concurrency))
