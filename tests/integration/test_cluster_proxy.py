"""The management API's cluster proxy (``racksmith.app.clusterproxy``) on a
real API server, in-process and wired as ``racksmith up`` wires it (its
routes beside the console's, the server's own authorizer), in front of a
cluster's own API: a real ``racksmith apiserver`` process on the cluster's
PKI (its CA made here), with the ``console`` identity's role applied inside
it with the cluster's admin certificate, as the cluster's init does. How
the proxy reaches the cluster is read from the management API as ``racksmith
up`` reads it (``AccessReader``: the Cluster's ``controlPlaneEndpoint`` and
the Secret ``<cluster>-racksmith-console``).

Checked: no token is a 401; a viewer reads through the proxy but is refused
a create with kube-apiserver's 403; an unknown cluster, a dead cluster API
and no tracker are 503s saying so; the caller's token never reaches the
cluster; a refusal inside the cluster comes back as it is; a GET, a create
and a delete are forwarded; a watch is streamed over HTTP and over
WebSocket, event by event.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
import yaml

from racksmith import console
from racksmith.apiserver.server import ApiServer
from racksmith.apiserver.users import add_user, kubeconfig_path
from racksmith.app import clusterproxy
from racksmith.app.clusterplanes import AccessReader
from racksmith.app.clusterproxy import ClusterProxy, Upstreams
from racksmith.controlplane.identities import cluster_rbac, identity_secret
from racksmith.controlplane.pki import KeyPair, new_ca
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.resources import CLUSTERS, NODES, SECRETS
from racksmith.runtime.source import Resource
from tests.harness.api import connect, serving
from tests.harness.http import ssl_context
from tests.harness.process import ServerProc
from tests.harness.wait import eventually
from tests.integration.test_cluster_planes import admin
from tests.integration.test_cluster_reachability import port_of, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

NS = "default"
CLUSTER = "demo"
VOLUMES = "/apis/storage.racksmith.io/v1alpha1/volumes"


@dataclass
class Site:
    server: ApiServer
    proxy: ClusterProxy
    session: aiohttp.ClientSession
    cluster: ServerProc
    inside: Client
    """The cluster's admin, for the test's own reads and writes inside it."""
    viewer: str
    """A token of the management API with the ``view`` role."""
    holder: dict[str, Upstreams | None]

    def url(self, path: str, cluster: str = CLUSTER) -> str:
        return f"{self.server.url}/clusters/{NS}/{cluster}/proxy{path}"

    async def call(self, method: str, path: str, token: str | None, *,
                   cluster: str = CLUSTER, body: Any = None) -> tuple[int, str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = orjson.dumps(body)
        async with self.session.request(method, self.url(path, cluster), headers=headers,
                                        data=data) as resp:
            raw = await resp.read()
            return resp.status, resp.headers.get("Content-Type", ""), \
                orjson.loads(raw) if raw else None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    root = tmp_path_factory.mktemp("proxy")
    holder: dict[str, Upstreams | None] = {"upstreams": None}
    box: dict[str, ApiServer] = {}
    proxy = ClusterProxy(lambda subject, attrs: box["server"].authorizer.authorize(
        subject, attrs), lambda: holder["upstreams"])
    ca = new_ca("demo-ca")
    cluster = serve(root / "cluster", ca)
    tracker = ClusterClients(root / "clusters", probe_interval=0.3, probe_timeout=2.0)
    inside = admin(root / "cluster", cluster.url, ca)
    try:
        async with serving(root / "data", extra_routes=[*console.routes(), *proxy.routes()],
                           public=lambda p: console.is_public(p)
                           or clusterproxy.is_public(p)) as server:
            box["server"] = server
            async with connect(server) as api:
                management = as_client(api)
                await _describe_cluster(management, ca, port_of(cluster))
                await _apply_console_role(inside)
                holder["upstreams"] = Upstreams(tracker, AccessReader(management, ttl=0.0))
                viewer = _viewer(server.data_dir)
                async with aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(ssl=ssl_context(server)),
                        timeout=aiohttp.ClientTimeout(total=60)) as session:
                    s = Site(server, proxy, session, cluster, inside, viewer, holder)
                    await eventually(lambda: _accepted(s, viewer), "the viewer's token")
                    yield s
    finally:
        await proxy.close()
        await inside.api_client.close()
        await tracker.close()
        cluster.kill()


async def _describe_cluster(management: Client, ca: KeyPair, port: int) -> None:
    """The Cluster with its endpoint, and the console's identity Secret, as
    the Cluster controller writes them."""
    await management.create(CLUSTERS, {
        "apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS}, "spec": {"release": "rel-1"}})
    await management.patch(CLUSTERS, NS, CLUSTER, {"status": {
        "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port}}}, status=True)
    await management.create(SECRETS, identity_secret(NS, CLUSTER, clusterproxy.IDENTITY, ca))


async def _apply_console_role(inside: Client) -> None:
    """The console identity's role inside the cluster, as its init applies it."""
    for obj in cluster_rbac({clusterproxy.IDENTITY: clusterproxy.ACCESS.policy_rules()}):
        plural = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        await inside.create(Resource("rbac.authorization.k8s.io", "v1", plural), obj)


def _viewer(data_dir: Path) -> str:
    path = kubeconfig_path(data_dir, "proxy-viewer")
    if not path.exists():
        add_user(data_dir, "proxy-viewer", "view")
    token: str = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    return token


async def _accepted(site: Site, token: str) -> bool:
    async with site.session.get(f"{site.server.url}/apis",
                                headers={"Authorization": f"Bearer {token}"}) as resp:
        return resp.status == 200


async def _node(inside: Client, name: str) -> None:
    await inside.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


async def test_a_request_without_a_token_is_401(site: Site) -> None:
    code, _ctype, status = await site.call("GET", "/api/v1/nodes", None)
    assert code == 401, status
    assert status["kind"] == "Status"


async def test_a_viewer_reads_through_the_proxy_but_may_not_create(site: Site) -> None:
    await _node(site.inside, "viewed-1")
    code, ctype, body = await site.call("GET", "/api/v1/nodes", site.viewer)
    # the cluster answers 401 to a bearer token it does not know: a 200 says
    # the caller's token stayed in the management API
    assert code == 200, body
    assert ctype.startswith("application/json")
    assert "viewed-1" in {n["metadata"]["name"] for n in body["items"]}
    # the same read of one object, with a query string passed through
    code, _ctype, body = await site.call("GET", "/api/v1/nodes/viewed-1?pretty=false",
                                         site.viewer)
    assert code == 200 and body["metadata"]["name"] == "viewed-1", body

    code, _ctype, status = await site.call("POST", VOLUMES, site.viewer, body=_volume("v-1"))
    assert code == 403, status
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'clusters.cluster.racksmith.io "{CLUSTER}" is forbidden: User "proxy-viewer" cannot '
        f'create resource "clusters/proxy" in API group "cluster.racksmith.io" in the '
        f'namespace "{NS}"')
    assert await site.inside.get(Resource("storage.racksmith.io", "v1alpha1", "volumes"),
                                 "", "v-1", live=True) is None


async def test_an_admin_creates_and_deletes_a_volume_in_the_cluster(site: Site) -> None:
    volumes = Resource("storage.racksmith.io", "v1alpha1", "volumes")
    code, _ctype, body = await site.call("POST", f"{VOLUMES}?fieldManager=racksmith-console",
                                         site.server.token, body=_volume("v-2"))
    assert code == 201, body
    made = await site.inside.get(volumes, "", "v-2", live=True)
    assert made is not None and made["spec"]["nodeName"] == "viewed-1"
    # the management API holds no such thing
    async with connect(site.server) as api:
        assert await as_client(api).get(volumes, "", "v-2", live=True) is None
    code, _ctype, body = await site.call("DELETE", f"{VOLUMES}/v-2", site.server.token)
    assert code == 200, body
    gone = await site.inside.get(volumes, "", "v-2", live=True)
    assert gone is None or gone["metadata"].get("deletionTimestamp"), gone


async def test_a_refusal_inside_the_cluster_comes_back_as_it_is(site: Site) -> None:
    """The console identity may not read Secrets there: the cluster's 403."""
    code, ctype, status = await site.call("GET", "/api/v1/namespaces/default/secrets",
                                          site.server.token)
    assert code == 403, status
    assert ctype.startswith("application/json")
    assert 'User "racksmith:console"' in status["message"], status


async def test_an_unknown_cluster_is_503(site: Site) -> None:
    code, _ctype, status = await site.call("GET", "/api/v1/nodes", site.server.token,
                                           cluster="nowhere")
    assert code == 503, status
    assert status["reason"] == "ServiceUnavailable"
    assert f"cluster {NS}/nowhere" in status["message"], status


async def test_without_a_tracker_it_is_503(site: Site) -> None:
    kept = site.holder["upstreams"]
    site.holder["upstreams"] = None
    try:
        code, _ctype, status = await site.call("GET", "/api/v1/nodes", site.server.token)
    finally:
        site.holder["upstreams"] = kept
    assert code == 503, status
    assert "no cluster tracker" in status["message"], status


async def test_a_watch_is_streamed_event_by_event(site: Site) -> None:
    await _node(site.inside, "watched-0")
    headers = {"Authorization": f"Bearer {site.viewer}"}
    async with site.session.get(site.url("/api/v1/nodes?watch=1&timeoutSeconds=30"),
                                headers=headers) as resp:
        assert resp.status == 200
        names: set[str] = set()
        async with asyncio.timeout(20):
            while "watched-0" not in names:
                names.add(orjson.loads(await resp.content.readline())["object"]["metadata"][
                    "name"])
            # an event made after the watch started arrives while it is open
            await _node(site.inside, "watched-1")
            while "watched-1" not in names:
                event = orjson.loads(await resp.content.readline())
                names.add(event["object"]["metadata"]["name"])
            assert event["type"] == "ADDED"


async def test_a_watch_over_websocket_is_one_message_per_event(site: Site) -> None:
    token = base64.urlsafe_b64encode(site.viewer.encode()).decode().rstrip("=")
    url = site.url("/api/v1/nodes?watch=1&timeoutSeconds=30")
    async with site.session.ws_connect(url, protocols=(
            "watch.racksmith.io", f"base64url.bearer.authorization.k8s.io.{token}")) as ws:
        assert ws.protocol == "watch.racksmith.io"
        await _node(site.inside, "socket-1")
        names: set[str] = set()
        async with asyncio.timeout(20):
            while "socket-1" not in names:
                msg = await ws.receive()
                assert msg.type == aiohttp.WSMsgType.TEXT, msg
                names.add(orjson.loads(msg.data)["object"]["metadata"]["name"])
    # a watch the cluster refuses: one ERROR event with its Status, then a clean close
    url = site.url("/api/v1/secrets?watch=1")
    async with site.session.ws_connect(url, protocols=(
            "watch.racksmith.io", f"base64url.bearer.authorization.k8s.io.{token}")) as ws:
        async with asyncio.timeout(20):
            msg = await ws.receive()
            assert msg.type == aiohttp.WSMsgType.TEXT, msg
            event = orjson.loads(msg.data)
            assert event["type"] == "ERROR" and event["object"]["code"] == 403, event
            closed = await ws.receive()
        assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), closed


async def test_a_dead_cluster_api_is_503(site: Site) -> None:
    """Last: it stops the cluster's API."""
    site.cluster.kill(9)
    code, _ctype, status = await site.call("GET", "/api/v1/nodes", site.server.token)
    assert code == 503, status
    assert status["reason"] == "ServiceUnavailable"
    assert f"cluster {NS}/{CLUSTER}" in status["message"], status


def _volume(name: str) -> dict[str, Any]:
    return {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
            "metadata": {"name": name},
            "spec": {"nodeName": "viewed-1", "storageClassName": "local",
                     "sparseLoopDevice": {"size": "1Gi"}}}
