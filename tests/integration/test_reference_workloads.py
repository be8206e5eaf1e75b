"""The reference workload controller against the real embedded API server.

The test plays each node's kubelet (``Kubelet``): it marks instance pods
Ready through the pods' status subresource, unless told to hold back. It
also plays LCM by creating and deleting NodeMaintenanceRequests and the
ClusterMaintenanceRequest. Every wait polls under a bound. The tests share
the module's API server; the workloads live in the controller's own
namespace and the locks and requests are cluster-scoped, and all of them
are deleted after each test (``tests.harness``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.emulator.workloads import (
    NAMESPACE,
    WorkloadTimings,
    reference_workloads_controller,
)
from racksmith.runtime import Controller
from tests.harness import api
from tests.harness.controllers import reconciled_again
from tests.harness.controllers import running as running_controllers
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, V = "lcm.racksmith.io", "v1alpha1"
RACK = "metal.racksmith.io/rack"
INSTANCE = "workloads.racksmith.io/instance"
TIMINGS = WorkloadTimings(busy_requeue=0.2, idle_requeue=0.5)


class Kubelet:
    """Marks instance pods Ready, except on nodes in ``hold``."""

    def __init__(self, client: ApiClient) -> None:
        self.core = CoreV1Api(client)
        self.hold: set[str] = set()

    async def run(self) -> None:
        while True:
            pods = await self.core.list_namespaced_pod(NAMESPACE)
            for pod in pods.items:
                ready = any(c.type == "Ready" and c.status == "True"
                            for c in (pod.status.conditions if pod.status else None) or [])
                if ready or pod.spec.node_name in self.hold:
                    continue
                body: Any = {"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True"}]}}
                with contextlib.suppress(ApiException):
                    await self.core.patch_namespaced_pod_status(
                        pod.metadata.name, NAMESPACE, body)
            await asyncio.sleep(0.05)


class Site(api.World):
    """Helpers over one API client."""

    async def node(self, name: str, rack: str, *, taint: bool = False) -> None:
        body: Any = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": {RACK: rack}},
                     "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane",
                                          "effect": "NoSchedule"}]} if taint else {},
                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        await self.core.create_node(body)

    async def pods(self) -> dict[str, tuple[str, str, bool]]:
        """Pod name → (instance, node, ready)."""
        out = await self.core.list_namespaced_pod(NAMESPACE)
        return {p.metadata.name: (p.metadata.labels[INSTANCE], p.spec.node_name, any(
            c.type == "Ready" and c.status == "True"
            for c in (p.status.conditions if p.status else None) or []))
            for p in out.items}

    async def per_node(self) -> Counter[str]:
        return Counter(node for _, node, _ in (await self.pods()).values())

    async def settled(self, instances: int) -> bool:
        """One Ready pod per instance."""
        pods = list((await self.pods()).values())
        return (len(pods) == instances and len({i for i, _, _ in pods}) == instances
                and all(r for _, _, r in pods))

    async def lock(self, name: str, plural: str = "nodeworkloadlocks") -> dict[str, Any] | None:
        return await self.get(GROUP, plural, name, None)

    async def state(self, name: str, plural: str = "nodeworkloadlocks") -> str | None:
        lock = await self.lock(name, plural)
        return None if lock is None else (lock.get("status") or {}).get("state")

    async def told_to_wait(self, name: str, reason: str) -> dict[str, Any] | None:
        """The lock ``name`` once the controller wrote why it keeps it (its
        inactivation progress names ``reason``): what it decided, observed."""
        lock = await self.lock(name)
        progress = ((lock or {}).get("status") or {}).get("inactivationProgress") or {}
        return lock if reason in (progress.get("description") or "") else None

    async def nmr(self, node: str, release: str | None = "r-2") -> None:
        spec: dict[str, Any] = {"nodeName": node, "scope": "os"}
        if release:
            spec["release"] = release
        body: Any = {"apiVersion": f"{GROUP}/{V}", "kind": "NodeMaintenanceRequest",
                     "metadata": {"name": node}, "spec": spec}
        await self.custom.create_cluster_custom_object(GROUP, V, "nodemaintenancerequests", body)

    async def end_nmr(self, node: str) -> None:
        await self.custom.delete_cluster_custom_object(GROUP, V, "nodemaintenancerequests", node)

    async def configure(self, **data: str) -> None:
        body: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await self.core.create_namespace(body)
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "reference", "namespace": NAMESPACE}, "data": data}
        await self.core.create_namespaced_config_map(NAMESPACE, body)


@pytest_asyncio.fixture(loop_scope="module")
async def kubelet(client: ApiClient) -> AsyncIterator[Kubelet]:
    k = Kubelet(client)
    task = asyncio.create_task(k.run())
    try:
        yield k
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def running(client: ApiClient) -> AsyncIterator[Controller]:
    controller = reference_workloads_controller(client, timings=TIMINGS)
    async with running_controllers(controller, grace=5):
        yield controller


async def test_defaults_spread_pdb_and_locks(client: ApiClient, kubelet: Kubelet) -> None:
    site = Site(client)
    for i, rack in enumerate(["a", "a", "b", "b"], 1):
        await site.node(f"n{i}", rack)
    await site.node("master", "a", taint=True)
    async with running(client):
        await eventually(lambda: site.settled(6), "6 Ready instances")
        counts = await site.per_node()
        assert set(counts) == {"n1", "n2", "n3", "n4"}  # never on the tainted master
        assert max(counts.values()) - min(counts.values()) <= 1
        cm = await site.core.read_namespaced_config_map("reference", NAMESPACE)
        assert cm.data == {"instances": "6", "maxParallel": "2", "zoneKey": RACK}
        pdb = await site.policy.read_namespaced_pod_disruption_budget("instances", NAMESPACE)
        assert pdb.spec.max_unavailable == 1
        for n in ("n1", "n2", "n3", "n4"):
            await eventually(lambda n=n: _is(site.state(f"reference.{n}"), "active"),
                             f"lock of {n} active")
            lock = await site.lock(f"reference.{n}")
            assert lock is not None
            assert lock["spec"] == {"controllerName": "reference", "nodeName": n,
                                    "nodeDeletionRequestSupported": False}
        assert await site.lock("reference.master") is None
        await eventually(lambda: _is(site.state("reference", "clusterworkloadlocks"), "active"),
                         "cluster lock active")
        # Cluster maintenance: nothing to prepare, the cluster lock goes inactive.
        body: Any = {"apiVersion": f"{GROUP}/{V}", "kind": "ClusterMaintenanceRequest",
                     "metadata": {"name": "default.demo"},
                     "spec": {"scope": "os", "release": "r-2"}}
        await site.custom.create_cluster_custom_object(GROUP, V, "clustermaintenancerequests",
                                                       body)
        await eventually(lambda: _is(site.state("reference", "clusterworkloadlocks"),
                                     "inactive"), "cluster lock inactive")
        lock = await site.lock("reference", "clusterworkloadlocks")
        assert lock is not None and lock["status"]["release"] == "r-2"
        await site.custom.delete_cluster_custom_object(GROUP, V, "clustermaintenancerequests",
                                                       "default.demo")
        await eventually(lambda: _is(site.state("reference", "clusterworkloadlocks"), "active"),
                         "cluster lock active again")


async def _is(value: Awaitable[str | None], want: str) -> bool:
    return await value == want


async def test_migration_then_release_then_reactivation(client: ApiClient,
                                                        kubelet: Kubelet) -> None:
    site = Site(client)
    await site.configure(instances="4")
    for i in range(1, 4):
        await site.node(f"n{i}", "a")
    async with running(client):
        await eventually(lambda: site.settled(4), "4 Ready instances")
        before = {p for p, (_, node, _) in (await site.pods()).items() if node == "n1"}
        assert before
        kubelet.hold = {"n2", "n3"}  # replacements stay un-Ready for now
        await site.nmr("n1")

        async def replacements_waiting() -> bool:
            lock = await site.lock("reference.n1")
            progress = ((lock or {}).get("status") or {}).get("inactivationProgress") or {}
            pods = await site.pods()
            return ("waiting for" in (progress.get("description") or "")
                    and len(pods) == 4 + len(before))

        await eventually(replacements_waiting, "replacements created, old pods kept")
        assert await site.state("reference.n1") == "active"
        assert before <= set(await site.pods())  # nothing deleted before its replacement
        kubelet.hold = set()
        await eventually(lambda: _is(site.state("reference.n1"), "inactive"), "n1 released")
        lock = await site.lock("reference.n1")
        assert lock is not None
        assert lock["status"]["release"] == "r-2"
        assert lock["status"]["inactivationProgress"]["percentage"] == 100
        assert await site.settled(4)
        assert "n1" not in await site.per_node()
        await site.end_nmr("n1")
        await eventually(lambda: _is(site.state("reference.n1"), "active"), "n1 active again")
        lock = await site.lock("reference.n1")
        assert lock is not None and "release" not in lock["status"]


async def test_max_parallel_and_one_zone_at_a_time(client: ApiClient, kubelet: Kubelet) -> None:
    site = Site(client)
    await site.configure(instances="5", maxParallel="2")
    for name, rack in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b"),
                       ("c1", "c")]:
        await site.node(name, rack)
    async with running(client):
        await eventually(lambda: site.settled(5), "5 Ready instances")
        await site.nmr("a1")
        await eventually(lambda: _is(site.state("reference.a1"), "inactive"), "a1 released")
        await site.nmr("b1")  # another rack: must wait, and says why
        lock = await eventually(lambda: site.told_to_wait("reference.b1", "another"),
                                "b1 told to wait for the other rack")
        assert lock["status"]["state"] == "active"
        await site.nmr("a2")  # same rack, second slot
        await eventually(lambda: _is(site.state("reference.a2"), "inactive"), "a2 released")
        await site.nmr("a3")  # same rack, but maxParallel reached: waits, says why
        lock = await eventually(lambda: site.told_to_wait("reference.a3", "maxParallel 2"),
                                "a3 told to wait for a slot")
        assert lock["status"]["state"] == "active"
        assert await site.state("reference.b1") == "active"
        await site.end_nmr("a1")
        await eventually(lambda: _is(site.state("reference.a3"), "inactive"),
                         "a3 released once a1 is back")
        assert await site.state("reference.b1") == "active"
        await site.end_nmr("a2")
        await site.end_nmr("a3")
        await eventually(lambda: _is(site.state("reference.b1"), "inactive"),
                         "b1 released once rack a is done")
        counts = await site.per_node()
        assert "b1" not in counts and await site.settled(5)


async def test_pinned_instance_fails_the_lock_until_unpinned(client: ApiClient,
                                                             kubelet: Kubelet) -> None:
    site = Site(client)
    await site.configure(instances="2")
    await site.node("n1", "a")
    await site.node("n2", "a")
    async with running(client):
        await eventually(lambda: site.settled(2), "2 Ready instances")
        pods = await site.pods()
        name, (instance, _, _) = next((p, v) for p, v in pods.items() if v[1] == "n1")
        patch: Any = {"metadata": {"annotations": {
            "workloads.racksmith.io/pinned": "local data not replicated"}}}
        await site.core.patch_namespaced_pod(name, NAMESPACE, patch)
        await site.nmr("n1")
        await eventually(lambda: _is(site.state("reference.n1"), "failed"), "n1 lock failed")
        lock = await site.lock("reference.n1")
        assert lock is not None
        assert lock["status"]["errorMessage"] == (
            f"instance {instance} cannot migrate: local data not replicated")
        assert name in await site.pods()
        patch = {"metadata": {"annotations": {"workloads.racksmith.io/pinned": None}}}
        await site.core.patch_namespaced_pod(name, NAMESPACE, patch)
        await eventually(lambda: _is(site.state("reference.n1"), "inactive"),
                         "n1 released after unpinning")
        assert name not in await site.pods()
        lock = await site.lock("reference.n1")
        assert lock is not None and "errorMessage" not in lock["status"]


async def test_locks_of_deleted_nodes_are_deleted(client: ApiClient, kubelet: Kubelet) -> None:
    site = Site(client)
    await site.configure(instances="3")
    for i in range(1, 4):
        await site.node(f"n{i}", "a")
    async with running(client):
        await eventually(lambda: site.settled(3), "3 Ready instances")
        await eventually(lambda: _is(site.state("reference.n3"), "active"), "n3 lock")
        await site.core.delete_node("n3")

        async def gone() -> bool:
            return await site.lock("reference.n3") is None
        await eventually(gone, "lock of the deleted node deleted")
        await eventually(lambda: site.settled(3), "its instance recreated")
        assert "n3" not in await site.per_node()


async def test_restart_mid_migration_resumes(client: ApiClient, kubelet: Kubelet) -> None:
    site = Site(client)
    await site.configure(instances="4")
    for i in range(1, 4):
        await site.node(f"n{i}", "a")
    async with running(client):
        await eventually(lambda: site.settled(4), "4 Ready instances")
        kubelet.hold = {"n2", "n3"}
        on_n1 = sum(1 for _, node, _ in (await site.pods()).values() if node == "n1")
        await site.nmr("n1", release=None)

        async def replacements() -> bool:
            return len(await site.pods()) == 4 + on_n1
        await eventually(replacements, "replacements created")
    # A new controller (a restarted racksmith up) finds the migration in the API.
    async with running(client) as controller:
        # the new controller has looked at the whole service once (it has one
        # key: every kind it watches enqueues it) while n1's pods are held
        await reconciled_again(controller.metrics, controller.name, "a first", since=0, more=1)
        assert len(await site.pods()) == 4 + on_n1  # no second set of replacements
        kubelet.hold = set()
        await eventually(lambda: _is(site.state("reference.n1"), "inactive"), "n1 released")
        assert await site.settled(4)
        lock = await site.lock("reference.n1")
        assert lock is not None and "release" not in lock["status"]
