"""The host agent's node side against a cluster's own API: a real
``racksmith apiserver`` on the cluster's PKI (``--client-ca-file``), bound
to the loopback image of the cluster's VIP (``racksmith.loopback``), and an
emulated host whose user data gave it the cluster CA and the kubelet's
client certificate (``system:node:node-a`` in ``system:nodes``). From the
kubelet.conf the emulated kubeadm writes, ``AgentKube`` reaches the
endpoint at its image with that certificate: the emulated kubelet creates
Node node-a, renews Lease ``kube-node-lease/node-a`` and makes a pod bound
to node-a Running; Node node-b is a 403; the management API is never
asked (its client points nowhere). An endpoint that does not answer yet
fails a kubelet tick and the next one retries, never ending the kubelet.
The API server is stopped by the module's fixture."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient, Configuration

from racksmith.agent import kubeadm
from racksmith.agent.config import AgentTiming
from racksmith.agent.host import EmulatedHost
from racksmith.agent.kube import AgentKube, NodeSource
from racksmith.agent.kubelet import EmulatedKubelet
from racksmith.clock import SystemClock
from racksmith.controlplane.pki import ClusterPki, issue_client, issue_serving
from racksmith.loopback import LoopbackMap
from racksmith.runtime.client import as_client
from racksmith.runtime.errors import Forbidden, ServerError
from racksmith.runtime.resources import NODES, PODS
from tests.harness.process import ServerProc, start_server
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

VIP = "10.77.0.100"
NODE, OTHER = "node-a", "node-b"
PKI = ClusterPki.generate()
LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@dataclass(frozen=True)
class ClusterApi:
    proc: ServerProc
    port: int
    network: LoopbackMap
    root: Path


@pytest.fixture(scope="module")
def cluster_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterApi]:
    """The cluster's API on its PKI at the VIP's loopback image; stopped after."""
    root = tmp_path_factory.mktemp("cluster")
    network = LoopbackMap(root / "network.json")
    image = network.image(VIP)
    pki = root / "pki"
    pki.mkdir(mode=0o700)
    serving = issue_serving(PKI.ca, "kube-apiserver", [image, VIP, "127.0.0.1", "kubernetes"])
    (pki / "apiserver.crt").write_bytes(serving.cert_pem)
    (pki / "apiserver.key").write_bytes(serving.key_pem)
    (pki / "ca.crt").write_bytes(PKI.ca.cert_pem)
    proc = start_server(root / "data", command="apiserver", extra=[
        "--host", image,
        "--tls-cert-file", str(pki / "apiserver.crt"),
        "--tls-private-key-file", str(pki / "apiserver.key"),
        "--client-ca-file", str(pki / "ca.crt")])
    try:
        port = urlsplit(proc.url).port
        assert port is not None
        yield ClusterApi(proc, port, network, root)
    finally:
        proc.kill()


def write_files(path: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = path / rel.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def emulated_host(root: Path, node: str, port: int) -> EmulatedHost:
    """A host as its user data and the emulated kubeadm leave it: the cluster
    CA, the kubelet's certificate and key, kubelet.conf with them."""
    pair = issue_client(PKI.ca, f"system:node:{node}", ["system:nodes"])
    write_files(root, {kubeadm.CLUSTER_CA: PKI.ca.cert_pem,
                       kubeadm.KUBELET_CLIENT: pair.cert_pem + pair.key_pem})
    host = EmulatedHost(root)
    cluster = {"name": "demo", "apiServerVIP": VIP, "apiServerPort": port,
               "kubernetesVersion": "1.30.1"}
    host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
        cluster, node, "https://management.invalid:6443", credentials=True).encode(), 0o600)
    return host


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def management() -> AsyncIterator[ApiClient]:
    """The management API's client: nowhere, so any management call would fail."""
    client = ApiClient(configuration=Configuration(host="https://127.0.0.1:9"))
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def admin(cluster_api: ClusterApi) -> AsyncIterator[ApiClient]:
    """The cluster's admin (``system:masters``) at the VIP's image."""
    pair = issue_client(PKI.ca, "kubernetes-admin", ["system:masters"])
    write_files(cluster_api.root, {"admin/admin.crt": pair.cert_pem,
                                   "admin/admin.key": pair.key_pem})
    configuration = Configuration(
        host=f"https://{cluster_api.network.image(VIP)}:{cluster_api.port}")
    configuration.ssl_ca_cert = str(cluster_api.root / "pki/ca.crt")
    configuration.cert_file = str(cluster_api.root / "admin/admin.crt")
    configuration.key_file = str(cluster_api.root / "admin/admin.key")
    client = ApiClient(configuration=configuration)
    try:
        yield client
    finally:
        await client.close()


def pod(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause:3"}]}}


async def test_the_kubelet_reaches_its_own_objects_in_the_clusters_api(
        cluster_api: ClusterApi, management: ApiClient, admin: ApiClient,
        tmp_path: Path) -> None:
    cluster = as_client(admin)
    await cluster.create(PODS, pod("on-a", NODE))
    await cluster.create(PODS, pod("on-b", OTHER))
    host = emulated_host(tmp_path / "host", NODE, cluster_api.port)
    kube = AgentKube(management, host=host, network=cluster_api.network)
    kubelet = EmulatedKubelet(host, kube, NODE, SystemClock())
    try:
        assert await kubelet.sync() is True
        assert kube.uses_cluster
        node = await cluster.get(NODES, None, NODE, live=True)
        assert node is not None
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        lease = await cluster._call("GET", f"{LEASES_PATH}/{NODE}")
        first = lease["spec"]["renewTime"]
        assert lease["spec"]["holderIdentity"] == NODE
        mine = await cluster.get(PODS, "default", "on-a", live=True)
        assert (mine or {})["status"]["phase"] == "Running"  # the kubelet patched it
        theirs = await cluster.get(PODS, "default", "on-b", live=True)
        assert ((theirs or {}).get("status") or {}).get("phase") != "Running"

        await asyncio.sleep(0.01)
        assert await kube.renew_lease(NODE, node["metadata"]["uid"], 40,
                                      SystemClock().wall()) is True
        lease = await cluster._call("GET", f"{LEASES_PATH}/{NODE}")
        assert lease["spec"]["renewTime"] >= first

        with pytest.raises(Forbidden, match="no relationship found between node 'node-a'"):
            await kube.get_node(OTHER)
        with pytest.raises(Forbidden):
            await kube.create_node({"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": OTHER}})
        with pytest.raises(Forbidden):
            await kube.patch_pod_status("default", "on-b", {"phase": "Running"})
        with pytest.raises(Forbidden):  # a node reads no LCMMachine, even by name
            await (await kube.node_client())._call(
                "GET", "/apis/lcm.racksmith.io/v1alpha1/namespaces/default/lcmmachines/"
                + NODE)
    finally:
        await kube.close()


async def test_the_pod_watch_runs_on_the_clusters_api(
        cluster_api: ClusterApi, management: ApiClient, admin: ApiClient,
        tmp_path: Path) -> None:
    """The node's pod watch (``pod_source``), started before kubelet.conf
    had credentials (on the management API, here unreachable), moves to the
    cluster's API once it has them and watches there with the node's
    certificate: a pod placed on node-a is Running at once, not at the next
    status tick."""
    host = emulated_host(tmp_path / "host", NODE, cluster_api.port)
    with_credentials = host.read_file(kubeadm.KUBELET_CONF)
    assert with_credentials is not None
    host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
        {"name": "demo"}, NODE, "https://127.0.0.1:9").encode(), 0o600)
    kube = AgentKube(management, host=host, network=cluster_api.network)
    kubelet = EmulatedKubelet(host, kube, NODE, SystemClock())
    stop = asyncio.Event()
    source = kube.pod_source(NODE, SystemClock())
    follow = asyncio.create_task(kubelet.follow_pods(source, stop))
    cluster = as_client(admin)
    try:
        assert isinstance(source, NodeSource)
        await eventually(lambda: source.unreachable > 0, "the pod watch to find no API")
        assert not source.has_synced and not kube.uses_cluster
        host.write_file(kubeadm.KUBELET_CONF, with_credentials, 0o600)  # the kubeadm item
        await kube.refresh()  # as the kubelet's next tick does
        assert kube.uses_cluster
        await cluster.create(PODS, pod("later-on-a", NODE))
        for _ in range(200):
            found = await cluster.get(PODS, "default", "later-on-a", live=True)
            if ((found or {}).get("status") or {}).get("phase") == "Running":
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the pod watch did not make the pod Running")
    finally:
        stop.set()
        await asyncio.wait_for(follow, 10)
        await kube.close()


async def test_an_endpoint_not_serving_yet_makes_the_kubelet_retry(
        cluster_api: ClusterApi, management: ApiClient, tmp_path: Path) -> None:
    """kubelet.conf names an endpoint that does not serve yet (the cluster's
    first API server is still starting): nothing listens, or a proxy with no
    live backend closes the connection during the TLS handshake. Each tick
    fails and is logged, the kubelet keeps ticking, and the same kubelet
    registers once the endpoint serves."""
    image = cluster_api.network.image(VIP)
    with socket.socket() as probe:  # a free port on the VIP's image
        probe.bind((image, 0))
        closed_port = probe.getsockname()[1]

    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    eof = await asyncio.start_server(hang_up, image, 0)
    eof_port = eof.sockets[0].getsockname()[1]
    host = emulated_host(tmp_path / "host", NODE, closed_port)
    kube = AgentKube(management, host=host, network=cluster_api.network)
    kubelet = EmulatedKubelet(host, kube, NODE, SystemClock(),
                              AgentTiming(kubelet_status=0.05))
    stop = asyncio.Event()
    ticking = asyncio.create_task(kubelet.run(stop))

    def point_at(port: int) -> None:
        host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
            {"name": "demo", "apiServerVIP": VIP, "apiServerPort": port},
            NODE, "https://management.invalid:6443", credentials=True).encode(), 0o600)

    try:
        for port in (closed_port, eof_port):
            point_at(port)
            with pytest.raises(ServerError, match="no answer from the API server"):
                await kubelet.sync()
            failed = kubelet.failed_ticks
            await eventually(lambda failed=failed: kubelet.failed_ticks >= failed + 2,
                             f"two more failed ticks against port {port}")
            assert not ticking.done()  # several failed ticks: still running
        point_at(cluster_api.port)
        assert await kubelet.sync() is True  # the endpoint serves now: registered
    finally:
        stop.set()
        await asyncio.wait_for(ticking, 10)
        await kube.close()
        eof.close()
        await eof.wait_closed()
