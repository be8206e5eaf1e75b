"""Several API server replicas on one etcd (in this process, each its own
data dir, one shared dir of secrets): what one replica is told, the others
serve — objects, watches, CRDs, RBAC, namespaces, ServiceAccount tokens."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
import yaml

from racksmith.apiserver.server import ApiServer
from racksmith.apiserver.store.etcd import EtcdStore
from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.api import serving
from tests.harness.etcd import etcd_config
from tests.harness.manifests import WIDGET_CRD
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replicas(etcd: LocalEtcdCluster, tmp_path_factory: pytest.TempPathFactory
                   ) -> AsyncIterator[tuple[ApiServer, ApiServer]]:
    base = tmp_path_factory.mktemp("replicas")
    config = etcd_config(etcd, f"/replicas-{uuid.uuid4().hex}")
    async with serving(base / "a", etcd=config, shared_dir=base / "site") as a, \
            serving(base / "b", etcd=config, shared_dir=base / "site") as b:
        yield a, b


def headers(server: ApiServer, token: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token or server.token}"}


@pytest_asyncio.fixture(loop_scope="module")
async def http(replicas: tuple[ApiServer, ApiServer]) -> AsyncIterator[aiohttp.ClientSession]:
    a, _ = replicas
    assert a.ca_pem is not None
    conn = aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=a.ca_pem.decode()))
    async with aiohttp.ClientSession(connector=conn) as session:
        yield session


async def call(http: aiohttp.ClientSession, server: ApiServer, method: str, path: str,
               body: Any = None, token: str | None = None) -> tuple[int, Any]:
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    async with http.request(method, server.url + path,
                            data=orjson.dumps(body) if body is not None else None,
                            headers={**headers(server, token),
                                     "Content-Type": content_type}) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_replicas_share_one_ca_and_the_token_file(
        replicas: tuple[ApiServer, ApiServer], http: aiohttp.ClientSession) -> None:
    a, b = replicas
    assert a.ca_pem == b.ca_pem and a.token == b.token
    assert a.data_dir != b.data_dir and a.kubeconfig_path.exists() and b.kubeconfig_path.exists()
    status, _ = await call(http, b, "GET", "/api/v1/namespaces/default")
    assert status == 200


async def test_a_watch_on_one_replica_sees_writes_made_through_the_other(
        replicas: tuple[ApiServer, ApiServer], http: aiohttp.ClientSession) -> None:
    a, b = replicas
    status, listed = await call(http, b, "GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200
    rv = listed["metadata"]["resourceVersion"]
    events: list[tuple[str, str, str]] = []

    async def watch() -> None:
        async with http.get(f"{b.url}/api/v1/namespaces/default/configmaps",
                            params={"watch": "1", "resourceVersion": rv},
                            headers=headers(b)) as resp:
            async for line in resp.content:
                ev = orjson.loads(line)
                events.append((ev["type"], ev["object"]["metadata"]["name"],
                               ev["object"]["metadata"]["resourceVersion"]))
                if len(events) == 3:
                    return

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.1)
    written = []
    status, made = await call(http, a, "POST", "/api/v1/namespaces/default/configmaps",
                              {"metadata": {"name": "cross"}, "data": {"k": "1"}})
    assert status == 201, made
    written.append(("ADDED", "cross", made["metadata"]["resourceVersion"]))
    status, changed = await call(http, a, "PATCH", "/api/v1/namespaces/default/configmaps/cross",
                                 {"data": {"k": "2"}})
    written.append(("MODIFIED", "cross", changed["metadata"]["resourceVersion"]))
    status, _ = await call(http, a, "DELETE", "/api/v1/namespaces/default/configmaps/cross")
    assert status == 200
    await asyncio.wait_for(task, 10)
    assert [e[:2] for e in events] == [("ADDED", "cross"), ("MODIFIED", "cross"),
                                      ("DELETED", "cross")]
    assert [e[2] for e in events[:2]] == [w[2] for w in written]


async def test_a_crd_created_on_one_replica_is_served_by_the_other(
        replicas: tuple[ApiServer, ApiServer], http: aiohttp.ClientSession) -> None:
    a, b = replicas
    crd = yaml.safe_load(WIDGET_CRD)
    status, body = await call(http, a, "POST",
                              "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status in (201, 409), body
    group = crd["spec"]["group"]
    version = crd["spec"]["versions"][0]["name"]
    plural = crd["spec"]["names"]["plural"]

    async def served() -> bool:
        status, _ = await call(http, b, "GET", f"/apis/{group}/{version}/namespaces/default/"
                               f"{plural}")
        return status == 200

    await eventually(served, "replica B serves the CRD made on A", limit=10)


async def test_rbac_and_namespaces_written_on_one_replica_hold_on_the_other(
        replicas: tuple[ApiServer, ApiServer], http: aiohttp.ClientSession) -> None:
    a, b = replicas
    ns = f"rb-{uuid.uuid4().hex[:6]}"
    assert (await call(http, a, "POST", "/api/v1/namespaces",
                       {"metadata": {"name": ns}}))[0] == 201
    assert (await call(http, a, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                       {"metadata": {"name": "reader"}}))[0] == 201
    status, tok = await call(http, a, "POST",
                             f"/api/v1/namespaces/{ns}/serviceaccounts/reader/token",
                             {"spec": {"expirationSeconds": 3600}})
    assert status == 201, tok
    token = tok["status"]["token"]
    # issued by A, accepted by B (one signing key); not allowed yet
    status, _ = await call(http, b, "GET", f"/api/v1/namespaces/{ns}/configmaps", token=token)
    assert status == 403
    assert (await call(http, a, "POST",
                       f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                       {"metadata": {"name": "read"}, "rules": [
                           {"apiGroups": [""], "resources": ["configmaps"],
                            "verbs": ["list"]}]}))[0] == 201
    assert (await call(http, a, "POST",
                       f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                       {"metadata": {"name": "read"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                    "name": "read"},
                        "subjects": [{"kind": "ServiceAccount", "name": "reader",
                                      "namespace": ns}]}))[0] == 201

    async def allowed() -> bool:
        status, _ = await call(http, b, "GET", f"/api/v1/namespaces/{ns}/configmaps",
                               token=token)
        return status == 200

    await eventually(allowed, "replica B enforces the Role made on A", limit=10)
    # the namespace (made on A) is known to B's namespace check
    status, made = await call(http, b, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                              {"metadata": {"name": "x"}})
    assert status == 201, made


async def test_the_replica_follows_other_replicas_writes_only(
        replicas: tuple[ApiServer, ApiServer], http: aiohttp.ClientSession) -> None:
    a, b = replicas
    seen: list[tuple[str, str]] = []
    store = b.store
    assert isinstance(store, EtcdStore)
    hook = store.on_foreign
    assert hook is not None

    async def recording(key: Any, old: Any, new: Any) -> None:
        seen.append((key.name, "deleted" if new is None else "written"))
        await hook(key, old, new)

    store.on_foreign = recording
    try:
        # B's own write sits between two of A's: B's watch delivers in
        # resourceVersion order, so once it followed the second, it had
        # passed its own write (and must not have called the hook for it).
        for server, name in ((a, "from-a"), (b, "from-b"), (a, "after-b")):
            status, _ = await call(http, server, "POST", "/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": name}})
            assert status == 201

        async def followed() -> bool:
            return ("after-b", "written") in seen

        await eventually(followed, "B follows A's writes", limit=10)
        assert ("from-a", "written") in seen
        assert ("from-b", "written") not in seen
    finally:
        store.on_foreign = hook


def _modes(root: Path) -> list[tuple[Path, int]]:
    return [(p, p.stat().st_mode & 0o777) for p in [root, *root.rglob("*")]]


async def test_data_dirs_keep_their_modes(replicas: tuple[ApiServer, ApiServer]) -> None:
    a, _ = replicas
    for path, mode in _modes(Path(a.shared_dir)):
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


async def test_a_replica_whose_watch_fell_behind_compaction_resets(
        etcd: LocalEtcdCluster) -> None:
    """A replica cut off from etcd for longer than the history kept cannot
    resume its watch: its watchers expire (clients re-list), it starts again
    at etcd's revision and reloads its caches (on_reset). The cut is made by
    stopping the replica's watch task (what a long partition does)."""
    from racksmith.apiserver.store.base import Expired, Key, Scope

    config = etcd_config(etcd, f"/reset-{uuid.uuid4().hex}")
    a, b = EtcdStore(config), EtcdStore(config)
    await a.open()
    await b.open()
    resets: list[int] = []

    async def reset() -> None:
        resets.append(a.current_rv())

    a.on_reset = reset
    try:
        pods = "core/pods"
        first = await b.create(Key(pods, "ns", "p0"), {"metadata": {"name": "p0"}})
        await a.wait_synced(int(first["metadata"]["resourceVersion"]))
        watcher = a.watch(Scope(pods), a.current_rv())
        a._tasks[0].cancel()  # the partition: A's etcd watch stops
        last = 0
        for i in range(1, 6):
            last = int((await b.create(Key(pods, "ns", f"p{i}"),
                                       {"metadata": {"name": f"p{i}"}}))["metadata"]
                       ["resourceVersion"])
        await b.compact(last)
        a._tasks[0] = asyncio.get_running_loop().create_task(a._watch_loop())  # healed
        with pytest.raises(Expired):
            async with asyncio.timeout(10):
                async for _ in watcher:
                    pass
        await eventually(lambda: resets, "A reset its watch", limit=10)
        assert resets[0] >= last
        fresh = a.watch(Scope(pods), a.current_rv())
        made = await b.create(Key(pods, "ns", "after"), {"metadata": {"name": "after"}})
        async with asyncio.timeout(10):
            event = await anext(fresh)
        assert event.key.name == "after" and event.rv == int(made["metadata"]["resourceVersion"])
    finally:
        await a.close()
        await b.close()


async def test_one_replica_runs_the_lifecycles_and_another_takes_over(
        etcd: LocalEtcdCluster, tmp_path: Path) -> None:
    """Replicas elect the one that runs garbage collection and namespace and
    CRD finalization (a Lease in kube-system, as kube-controller-manager);
    the other only follows. When the holder stops, the other takes the Lease
    and collects what is orphaned from then on (a short Lease: the setting)."""
    config = etcd_config(etcd, f"/elect-{uuid.uuid4().hex}")
    lease_path = ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                  "racksmith-apiserver-lifecycle")
    async with serving(tmp_path / "x", etcd=config, shared_dir=tmp_path / "site",
                       lifecycle_lease_seconds=1.5) as x, \
            serving(tmp_path / "y", etcd=config, shared_dir=tmp_path / "site",
                    lifecycle_lease_seconds=1.5) as y:
        assert x.ca_pem is not None
        conn = aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=x.ca_pem.decode()))
        async with aiohttp.ClientSession(connector=conn) as http:
            await eventually(lambda: x.lifecycle.acting or y.lifecycle.acting,
                             "a replica holds the lifecycle Lease", limit=10)
            leader, other = (x, y) if x.lifecycle.acting else (y, x)
            assert not other.lifecycle.acting
            status, lease = await call(http, other, "GET", lease_path)
            assert status == 200
            assert lease["spec"]["holderIdentity"].endswith(str(leader.data_dir.resolve()))

            async def orphan_collected(via: ApiServer, name: str) -> None:
                cms = "/api/v1/namespaces/default/configmaps"
                status, owner = await call(http, via, "POST", cms,
                                           {"metadata": {"name": f"{name}-owner"}})
                assert status == 201, owner
                ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": f"{name}-owner",
                       "uid": owner["metadata"]["uid"]}
                status, _ = await call(http, via, "POST", cms, {"metadata": {
                    "name": f"{name}-dependent", "ownerReferences": [ref]}})
                assert status == 201
                status, _ = await call(http, via, "DELETE", f"{cms}/{name}-owner")
                assert status == 200

                async def gone() -> bool:
                    status, _ = await call(http, via, "GET", f"{cms}/{name}-dependent")
                    return status == 404

                await eventually(gone, f"{name}-dependent collected", limit=15)

            # written through the replica that does not act: the holder collects
            await orphan_collected(other, "before")
            await leader.stop()
            await eventually(lambda: other.lifecycle.acting,
                             "the other replica takes the Lease over", limit=10)
            status, lease = await call(http, other, "GET", lease_path)
            assert lease["spec"]["holderIdentity"].endswith(str(other.data_dir.resolve()))
            await orphan_collected(other, "after")
