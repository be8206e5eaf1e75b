"""Faults of the replicated control plane, under continuous writes: a killed
etcd member, lost quorum, a killed API server replica (kill -9 each time)."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.api import serving
from tests.harness.etcd import etcd_cluster, etcd_config
from tests.harness.process import ServerProc, start_server
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def etcd3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEtcdCluster]:
    with etcd_cluster(tmp_path_factory.mktemp("etcd3"), members=3) as cluster:
        yield cluster


def _tls(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


class Writer:
    """Creates ConfigMaps one after another; remembers what was acknowledged."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str) -> None:
        self.http = http
        self.url = url
        self.token = token
        self.acked: dict[str, int] = {}
        self.failures: list[tuple[int, str]] = []
        self.stop = asyncio.Event()
        self._n = 0

    async def create(self) -> tuple[int, Any]:
        name = f"w-{self._n:05d}"
        self._n += 1
        try:
            async with self.http.post(
                    f"{self.url}/api/v1/namespaces/default/configmaps",
                    json={"metadata": {"name": name}, "data": {"n": name}},
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=aiohttp.ClientTimeout(total=30)) as resp:
                body = await resp.json(content_type=None)
                if resp.status == 201:
                    self.acked[name] = int(body["metadata"]["resourceVersion"])
                else:
                    self.failures.append((resp.status, str(body.get("message", ""))))
                return resp.status, body
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.failures.append((0, type(exc).__name__))
            return 0, None

    async def run(self) -> None:
        while not self.stop.is_set():
            await self.create()
            await asyncio.sleep(0.01)

    def successes(self) -> int:
        return len(self.acked)


async def test_a_killed_etcd_member_loses_no_acknowledged_write_and_rejoins(
        etcd3: LocalEtcdCluster, tmp_path: Path) -> None:
    config = etcd_config(etcd3, f"/faults-{uuid.uuid4().hex}")
    async with serving(tmp_path / "data", etcd=config) as server:
        assert server.ca_pem is not None
        conn = aiohttp.TCPConnector(ssl=_tls(server.ca_pem))
        async with aiohttp.ClientSession(connector=conn) as http:
            writer = Writer(http, server.url, server.token)
            watched: set[str] = set()

            async def watch() -> None:
                async with http.get(f"{server.url}/api/v1/namespaces/default/configmaps",
                                    params={"watch": "1", "resourceVersion": "0"},
                                    headers={"Authorization": f"Bearer {server.token}"},
                                    timeout=aiohttp.ClientTimeout(total=None)) as resp:
                    async for line in resp.content:
                        ev = orjson.loads(line)
                        if ev["type"] == "ADDED":
                            watched.add(ev["object"]["metadata"]["name"])

            # the replica's one etcd watch must survive the member's death too
            watching = asyncio.create_task(watch())
            task = asyncio.create_task(writer.run())
            await eventually(lambda: writer.successes() >= 30, "writes before the kill")
            etcd3.kill(0)  # the endpoint the store's channel tries first
            before = writer.successes()
            await eventually(lambda: writer.successes() >= before + 50,
                             "writes succeeding after the election", limit=60)
            etcd3.start_member(0)
            etcd3.wait_healthy(60)
            after = writer.successes()
            await eventually(lambda: writer.successes() >= after + 20,
                             "writes with the member back")
            writer.stop.set()
            await task
            assert sorted(etcd3.member_list()) == sorted(etcd3.member_names())
            async with http.get(f"{server.url}/api/v1/namespaces/default/configmaps",
                                headers={"Authorization": f"Bearer {server.token}"}) as resp:
                listed = await resp.json()
            stored = {o["metadata"]["name"] for o in listed["items"]}
            missing = set(writer.acked) - stored
            assert not missing, f"acknowledged writes lost: {sorted(missing)[:10]}"
            await eventually(lambda: set(writer.acked) <= watched,
                             "every acknowledged write seen by the watch opened before the kill")
            watching.cancel()
            # whatever failed, failed cleanly: a Status, never a 500
            assert all(code in (0, 503, 504) for code, _ in writer.failures), writer.failures


async def test_lost_quorum_is_a_clear_503_and_everything_resumes(
        etcd3: LocalEtcdCluster, tmp_path: Path) -> None:
    etcd3.wait_healthy(60)
    config = etcd_config(etcd3, f"/quorum-{uuid.uuid4().hex}", request_timeout=2.0)
    async with serving(tmp_path / "data", etcd=config) as server:
        assert server.ca_pem is not None
        conn = aiohttp.TCPConnector(ssl=_tls(server.ca_pem))
        headers = {"Authorization": f"Bearer {server.token}"}
        async with aiohttp.ClientSession(connector=conn) as http:
            writer = Writer(http, server.url, server.token)
            assert (await writer.create())[0] == 201
            etcd3.kill(1)
            etcd3.kill(2)
            try:
                status, body = await writer.create()
                assert status == 503, body
                assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
                assert "etcd" in body["message"], body["message"]
                # a read is not answered from stale data either
                async with http.get(f"{server.url}/api/v1/namespaces/default/configmaps/w-00000",
                                    headers=headers) as resp:
                    assert resp.status == 503, await resp.text()
            finally:
                etcd3.start_member(1)
                etcd3.start_member(2)
            etcd3.wait_healthy(60)

            async def writes_again() -> bool:
                return (await writer.create())[0] == 201

            await eventually(writes_again, "writes once quorum is back", limit=60)
            async with http.get(f"{server.url}/api/v1/namespaces/default/configmaps/w-00000",
                                headers=headers) as resp:
                assert resp.status == 200


@pytest.fixture
def two_replicas(etcd3: LocalEtcdCluster, tmp_path: Path) -> Iterator[list[ServerProc]]:
    etcd3.wait_healthy(60)
    tls = etcd3.tls
    assert tls is not None
    extra = ["--etcd-endpoints", ",".join(etcd3.endpoints), "--etcd-cafile", str(tls.ca_file),
             "--etcd-certfile", str(tls.cert_file), "--etcd-keyfile", str(tls.key_file),
             "--etcd-prefix", f"/replicas-{uuid.uuid4().hex}",
             "--shared-dir", str(tmp_path / "site")]
    procs: list[ServerProc] = []
    try:
        for name in ("a", "b"):
            procs.append(start_server(tmp_path / name, command="apiserver", extra=extra))
        yield procs
    finally:
        for proc in procs:
            proc.kill()


async def test_a_watch_resumes_on_the_other_replica_after_kill_9(
        two_replicas: list[ServerProc], tmp_path: Path) -> None:
    a, b = two_replicas
    ca = (tmp_path / "site" / "pki" / "ca.crt").read_bytes()
    conn = aiohttp.TCPConnector(ssl=_tls(ca))
    headers = {"Authorization": f"Bearer {a.token}"}
    assert a.token == b.token
    async with aiohttp.ClientSession(connector=conn) as http:
        async with http.get(f"{a.url}/api/v1/namespaces/default/configmaps",
                            headers=headers) as resp:
            start_rv = (await resp.json())["metadata"]["resourceVersion"]
        writer = Writer(http, b.url, b.token)
        seen: list[tuple[str, str]] = []

        async def watch(url: str, since: str) -> None:
            async with http.get(f"{url}/api/v1/namespaces/default/configmaps",
                                params={"watch": "1", "resourceVersion": since,
                                        "allowWatchBookmarks": "true"},
                                headers=headers,
                                timeout=aiohttp.ClientTimeout(total=None)) as resp:
                assert resp.status == 200
                async for line in resp.content:
                    ev = orjson.loads(line)
                    if ev["type"] == "BOOKMARK":
                        continue
                    seen.append((ev["object"]["metadata"]["name"],
                                 ev["object"]["metadata"]["resourceVersion"]))

        task = asyncio.create_task(writer.run())
        watching = asyncio.create_task(watch(a.url, start_rv))
        await eventually(lambda: len(seen) >= 20, "events through replica A")
        a.kill(9)
        with pytest.raises((aiohttp.ClientError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(watching, 10)
        last = seen[-1][1]
        resumed = asyncio.create_task(watch(b.url, last))
        count = writer.successes()
        await eventually(lambda: writer.successes() >= count + 20, "writes after the kill")
        writer.stop.set()
        await task
        final = max(writer.acked.values())
        await eventually(lambda: bool(seen) and int(seen[-1][1]) >= final,
                         "the resumed watch reaches the last write")
        resumed.cancel()
        names = [name for name, _ in seen]
        assert len(names) == len(set(names)), "no event twice"
        assert sorted(names) == sorted(writer.acked), "no event missed"
        rvs = [int(rv) for _, rv in seen]
        assert rvs == sorted(rvs)
