"""Controllers working inside each cluster's own API
(``racksmith.runtime.planes.RemotePlane``, built as ``racksmith up`` builds
it by ``racksmith.app.clusterplanes``): the management API is the harness's
server; clusters alpha and beta each serve their own API (a real
``racksmith apiserver`` on the cluster's PKI, on loopback). The Cluster
controller issues the identities; the roles are applied inside each cluster
with its admin certificate, as its init does. The reference workload
controller then runs one service per cluster, in that cluster's API alone,
as its own identity there; with alpha's API down, beta's work goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.app.clusterplanes import planes
from racksmith.controllers.cluster import cluster_controller
from racksmith.controllers.volume import VolumeTimings, volume_controller
from racksmith.controllers.volume.controller import ACCESS as VOLUME_ACCESS
from racksmith.controlplane.identities import cluster_rbac
from racksmith.controlplane.pki import KeyPair, issue_client
from racksmith.emulator.workloads import ACCESS as WORKLOADS_ACCESS
from racksmith.emulator.workloads import NAMESPACE, WorkloadTimings, reference_workloads_controller
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.kubeclient import api_client_with_certificate
from racksmith.runtime.resources import NODES, PODS, PVS, STORAGE_CLASSES, VOLUMES
from racksmith.runtime.source import Resource
from tests.harness.controllers import running
from tests.harness.process import ServerProc
from tests.harness.wait import eventually
from tests.integration.test_cluster_reachability import World, port_of, serve
from tests.integration.test_volume_controller import Agent as VolumeAgent
from tests.integration.test_volume_controller import agent_running

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLUSTER = "cluster.racksmith.io"
IDENTITY = "reference-workloads"
LOCKS = Resource("lcm.racksmith.io", "v1alpha1", "nodeworkloadlocks")
TIMINGS = WorkloadTimings(busy_requeue=0.2, idle_requeue=0.5)
VOLUME_TIMINGS = VolumeTimings(job_poll=0.2, resync=1.0)


def admin(root: Path, url: str, ca: KeyPair) -> Client:
    """The cluster's admin (``system:masters``), for the test's own reads and
    writes inside it."""
    pair = issue_client(ca, "kubernetes-admin", ("system:masters",))
    for name, data in (("admin-ca.crt", ca.cert_pem), ("admin.crt", pair.cert_pem),
                       ("admin.key", pair.key_pem)):
        (root / name).write_bytes(data)
    return Client(api_client_with_certificate(url, root / "admin-ca.crt", root / "admin.crt",
                                              root / "admin.key"))


async def node(inside: Client, name: str) -> None:
    await inside.create(NODES, {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})


async def ready_pods(inside: Client) -> None:
    """Plays the kubelet: the service's pods look Running and Ready."""
    for pod in await inside.list(PODS, NAMESPACE, live=True):
        meta = pod["metadata"]
        await inside.patch(PODS, NAMESPACE, meta["name"], {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            status=True)


async def test_each_cluster_is_served_in_its_own_api(client: ApiClient, ns: str,
                                                     tmp_path: Path,
                                                     procs: list[ServerProc]) -> None:
    world = World(client, ns)
    tracker = ClusterClients(tmp_path / "clusters", probe_interval=0.3, probe_timeout=2.0)
    admins: dict[str, Client] = {}
    try:
        async with running(cluster_controller(client, namespace=ns, clusters=tracker,
                                              identities=(IDENTITY,))):
            for name in ("alpha", "beta"):
                await world.create(CLUSTER, "clusters", {
                    "apiVersion": f"{CLUSTER}/v1alpha1", "kind": "Cluster",
                    "metadata": {"name": name}, "spec": {"release": "rel-1"}})
            for name in ("alpha", "beta"):
                ca = await world.ca(name)
                procs.append(serve(tmp_path / name, ca))
                await world.patch(CLUSTER, "clusters", name, {"spec": {
                    "controlPlaneEndpoint": {"host": "127.0.0.1",
                                             "port": port_of(procs[-1])}}})
                admins[name] = inside = admin(tmp_path / name, procs[-1].url, ca)
                # the roles inside the cluster, applied with its admin credentials
                for obj in cluster_rbac({IDENTITY: WORKLOADS_ACCESS.policy_rules()}):
                    plural = "clusterroles" if obj["kind"] == "ClusterRole" \
                        else "clusterrolebindings"
                    await inside.create(Resource("rbac.authorization.k8s.io", "v1", plural),
                                        obj)
                await world.says(name, "ControlPlaneReachable", "True", "Reachable")
            plane = planes(lambda _n: as_client(client), [IDENTITY], tracker, None,
                           reader=client)[IDENTITY]
            async with running(reference_workloads_controller(client, timings=TIMINGS,
                                                              plane=plane)):
                for name in ("alpha", "beta"):
                    for i in (1, 2):
                        await node(admins[name], f"{name}-{i}")

                async def served(name: str) -> bool:
                    inside = admins[name]
                    await ready_pods(inside)
                    locks = {o["metadata"]["name"] for o in await inside.list(
                        LOCKS, live=True)}
                    pods = await inside.list(PODS, NAMESPACE, live=True)
                    return locks >= {f"reference.{name}-1", f"reference.{name}-2"} \
                        and len(pods) == 6
                for name in ("alpha", "beta"):
                    await eventually(lambda n=name: served(n), f"{name}'s service")
                # each cluster's objects are its own: no node of the other
                for name, other in (("alpha", "beta"), ("beta", "alpha")):
                    nodes = {p["spec"]["nodeName"] for p in await admins[name].list(
                        PODS, NAMESPACE, live=True)}
                    assert nodes <= {f"{name}-1", f"{name}-2"}, nodes
                    assert not any(lock["spec"]["nodeName"].startswith(other)
                                   for lock in await admins[name].list(LOCKS, live=True))
                # the management API holds none of it
                management = as_client(client)
                assert await management.list(PODS, NAMESPACE, live=True) == []
                assert await management.list(LOCKS, live=True) == []
                # alpha's API dies: beta's work goes on
                procs[0].kill(9)
                await world.says("alpha", "ControlPlaneReachable", "False", "Unreachable")
                await node(admins["beta"], "beta-3")

                async def locked() -> bool:
                    return any(o["metadata"]["name"] == "reference.beta-3"
                               for o in await admins["beta"].list(LOCKS, live=True))
                await eventually(locked, "beta-3's lock while alpha is down")
    finally:
        for inside in admins.values():
            await inside.api_client.close()
        await tracker.close()


async def test_a_volume_lives_and_goes_in_its_clusters_api(
        client: ApiClient, ns: str, tmp_path: Path, procs: list[ServerProc]) -> None:
    """The Volume controller in a cluster's own API (a RemotePlane): a Volume
    there becomes Available with its PersistentVolume there, and its
    deletion releases the device and removes both."""
    world = World(client, ns)
    tracker = ClusterClients(tmp_path / "clusters", probe_interval=0.3, probe_timeout=2.0)
    inside: Client | None = None
    try:
        async with running(cluster_controller(client, namespace=ns, clusters=tracker,
                                              identities=("volume",))):
            await world.create(CLUSTER, "clusters", {
                "apiVersion": f"{CLUSTER}/v1alpha1", "kind": "Cluster",
                "metadata": {"name": "gamma"}, "spec": {"release": "rel-1"}})
            ca = await world.ca("gamma")
            procs.append(serve(tmp_path / "gamma", ca))
            await world.patch(CLUSTER, "clusters", "gamma", {"spec": {
                "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port_of(procs[-1])}}})
            inside = admin(tmp_path / "gamma", procs[-1].url, ca)
            for obj in cluster_rbac({"volume": VOLUME_ACCESS.policy_rules()}):
                plural = "clusterroles" if obj["kind"] == "ClusterRole" \
                    else "clusterrolebindings"
                await inside.create(Resource("rbac.authorization.k8s.io", "v1", plural), obj)
            await world.says("gamma", "ControlPlaneReachable", "True", "Reachable")
            plane = planes(lambda _n: as_client(client), ["volume"], tracker, None,
                           reader=client)["volume"]
            agent = VolumeAgent(inside.api_client, "n1")
            async with running(volume_controller(client, timings=VOLUME_TIMINGS, plane=plane)), \
                    agent_running(agent):
                await node(inside, "n1")
                await inside.create(STORAGE_CLASSES, {
                    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": "local"},
                    "provisioner": "kubernetes.io/no-provisioner",
                    "volumeBindingMode": "WaitForFirstConsumer"})
                await inside.create(VOLUMES, {
                    "apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
                    "metadata": {"name": "v1"},
                    "spec": {"nodeName": "n1", "storageClassName": "local",
                             "sparseLoopDevice": {"size": "1Gi"}}})

                async def available() -> bool:
                    vol = await inside.get(VOLUMES, None, "v1", live=True) or {}
                    return (vol.get("status") or {}).get("phase") == "Available"
                await eventually(available, "v1 Available in gamma's API")
                assert await inside.get(PVS, None, "v1", live=True) is not None
                assert await as_client(client).get(VOLUMES, None, "v1", live=True) is None
                await inside.delete(VOLUMES, None, "v1")

                async def gone() -> bool:
                    return await inside.get(VOLUMES, None, "v1", live=True) is None and \
                        await inside.get(PVS, None, "v1", live=True) is None
                await eventually(gone, "v1 and its PV gone from gamma's API")
                assert agent.ops("v1") == ["prepare", "unprepare"]
    finally:
        if inside is not None:
            await inside.api_client.close()
        await tracker.close()
