"""The Volume controller and the claim binder against the real embedded API server.

The test plays the node's agent (``Agent``): it polls the Volumes of its
node, and for a ``status.job`` without a result it "runs" the task (after
an optional delay, optionally failing the prepare) and writes the
``storage.racksmith.io/job-result`` annotation with a merge patch, as the
contracts say. It records every job it ran, so the tests can tell how many
jobs a Volume got and in which order. Every wait polls under a bound.

The tests share the module's API server, each with its own namespace (for
its claims); what a test made, cluster-scoped Nodes, StorageClasses, Volumes
and PersistentVolumes included, is deleted after it (``tests.harness``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi

from racksmith.controllers.volume import (
    FINALIZER,
    JOB_RESULT_ANNOTATION,
    VolumeTimings,
    claim_binder_controller,
    volume_controller,
)
from tests.harness import api
from tests.harness.api import optional
from tests.harness.controllers import finished_reconciles, reconciled_again, running
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, V = "storage.racksmith.io", "v1alpha1"
GI = 2**30
TIMINGS = VolumeTimings(job_poll=0.2, resync=1.0)


class Agent:
    """The node agent's storage tasks, played by the test (see the module docstring)."""

    def __init__(self, client: ApiClient, node: str, *, delay: float = 0.0,
                 fail: tuple[str, str] | None = None, size_bytes: int = GI) -> None:
        self.custom = CustomObjectsApi(client)
        self.node = node
        self.delay = delay
        self.fail = fail
        self.size_bytes = size_bytes
        self.jobs: list[tuple[str, str]] = []  # (volume, job) in start order
        self.finished: list[tuple[str, str]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        while True:
            out = await self.custom.list_cluster_custom_object(
                GROUP, V, "volumes", field_selector=f"spec.nodeName={self.node}")
            for vol in out["items"]:
                name = vol["metadata"]["name"]
                job = (vol.get("status") or {}).get("job")
                raw = (vol["metadata"].get("annotations") or {}).get(JOB_RESULT_ANNOTATION)
                done = json.loads(raw)["job"] if raw else None
                if job and job != done and (name, job) not in self.jobs:
                    self.jobs.append((name, job))
                    task = asyncio.create_task(self._task(name, job))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            await asyncio.sleep(0.05)

    async def _task(self, name: str, job: str) -> None:
        await asyncio.sleep(self.delay)
        result: dict[str, Any] = {"job": job, "ok": True}
        if job.startswith("prepare:"):
            if self.fail is not None:
                result = {"job": job, "ok": False, "reason": self.fail[0],
                          "error": self.fail[1]}
            else:
                result.update(deviceName="loop3", sizeBytes=self.size_bytes, uuid="u-1")
        patch: Any = self.custom.patch_cluster_custom_object  # _content_type is untyped
        await patch(GROUP, V, "volumes", name,
                    {"metadata": {"annotations": {JOB_RESULT_ANNOTATION: json.dumps(result)}}},
                    _content_type="application/merge-patch+json")
        self.finished.append((name, job))

    def ops(self, volume: str) -> list[str]:
        return [job.partition(":")[0] for name, job in self.jobs if name == volume]


class World(api.World):
    """The test's view of the API: Volumes, their PersistentVolumes and claims."""

    async def setup(self, node: str = "n1", storage_class: str = "local") -> None:
        body: Any = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
        await self.core.create_node(body)
        await self.storage_class(storage_class)

    async def storage_class(self, name: str) -> None:
        body: Any = {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "parameters": {"fsType": "xfs", "mkfsOptions": '["-K"]'},
            "mountOptions": ["noatime"]}
        await self.storage.create_storage_class(body)

    async def volume(self, name: str, *, node: str = "n1", storage_class: str = "local",
                     template: dict[str, Any] | None = None) -> None:
        spec: dict[str, Any] = {"nodeName": node, "storageClassName": storage_class,
                                "sparseLoopDevice": {"size": "1Gi"}}
        if template is not None:
            spec["template"] = template
        await self.create(GROUP, "volumes", {
            "apiVersion": f"{GROUP}/{V}", "kind": "Volume", "metadata": {"name": name},
            "spec": spec})

    async def read(self, name: str) -> dict[str, Any] | None:
        """The Volume ``name``, or ``None``."""
        return await self.get(GROUP, "volumes", name)

    async def status(self, name: str) -> dict[str, Any]:
        return dict(((await self.read(name)) or {}).get("status") or {})

    async def ready(self, name: str) -> dict[str, Any]:
        conds = (await self.status(name)).get("conditions") or []
        return next((dict(c) for c in conds if c["type"] == "Ready"), {})

    async def in_phase(self, name: str, phase: str) -> None:
        async def check() -> bool:
            return (await self.status(name)).get("phase") == phase
        await eventually(check, f"volume {name} {phase}")

    async def pv(self, name: str) -> dict[str, Any] | None:
        pv = await optional(self.core.read_persistent_volume(name))
        return None if pv is None else self.plain(pv)

    async def pvc(self, name: str) -> dict[str, Any] | None:
        pvc = await optional(self.core.read_namespaced_persistent_volume_claim(name, self.ns))
        return None if pvc is None else self.plain(pvc)

    async def events(self, name: str, namespace: str | None = None) -> list[Any]:
        """Volumes are cluster-scoped: their events are in ``default``."""
        return await super().events(name, namespace or "default")


@contextlib.asynccontextmanager
async def agent_running(agent: Agent) -> AsyncIterator[Agent]:
    task = asyncio.create_task(agent.run())
    try:
        yield agent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_sparse_volume_becomes_available_then_is_released(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1", size_bytes=GI)
    template = {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {"mountOptions": ["nodiratime"]}}
    async with running(volume_controller(client, timings=TIMINGS)), agent_running(agent):
        await world.volume("v1", template=template)
        await world.in_phase("v1", "Available")
        status = await world.status("v1")
        assert status.get("job") is None
        assert status["deviceName"] == "loop3"
        assert status["size"] == "1Gi"
        assert (await world.ready("v1"))["status"] == "True"
        vol = await world.read("v1")
        assert vol is not None and FINALIZER in vol["metadata"]["finalizers"]

        pv = await world.pv("v1")
        assert pv is not None
        meta, spec = pv["metadata"], pv["spec"]
        assert meta["labels"] == {"team": "a", "storage.racksmith.io/volume": "v1"}
        assert meta["annotations"] == {"note": "x"}
        assert meta["finalizers"] == [FINALIZER]
        assert meta["ownerReferences"] == [{
            "apiVersion": f"{GROUP}/{V}", "kind": "Volume", "name": "v1",
            "uid": vol["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert spec["capacity"] == {"storage": "1Gi"}
        assert spec["local"] == {"path": "/dev/loop3", "fsType": "xfs"}
        assert spec["mountOptions"] == ["noatime", "nodiratime"]
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["storageClassName"] == "local"
        assert spec["volumeMode"] == "Filesystem"
        assert spec["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                  "values": ["n1"]}]}]}}
        assert pv["status"]["phase"] == "Available"
        assert agent.ops("v1") == ["prepare"]

        await world.delete(GROUP, "volumes", "v1")
        await world.gone("volume v1", lambda: world.read("v1"))
        await world.gone("PersistentVolume v1", lambda: world.pv("v1"))
        assert agent.ops("v1") == ["prepare", "unprepare"]


async def test_failing_prepare_is_terminal(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1", fail=("DeviceInUse", "/dev/sdb holds an ext4 signature"))
    async with running(volume_controller(client, timings=TIMINGS)), agent_running(agent):
        await world.volume("v2")
        await world.in_phase("v2", "Failed")
        ready = await world.ready("v2")
        assert (ready["status"], ready["reason"]) == ("False", "CreationError")
        assert ready["message"] == "DeviceInUse: /dev/sdb holds an ext4 signature"
        await world.has_event("v2", "CreationError", type="Warning")
        assert await world.pv("v2") is None
        assert agent.ops("v2") == ["prepare"]


async def test_unknown_storage_class_and_node(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1")
    async with running(volume_controller(client, timings=TIMINGS)), agent_running(agent):
        await world.volume("v3", storage_class="nope")
        await world.volume("v4", node="ghost")
        await world.in_phase("v3", "Failed")
        await world.in_phase("v4", "Failed")
        ready3, ready4 = await world.ready("v3"), await world.ready("v4")
        assert (ready3["reason"], ready3["message"]) == (
            "CreationError", "StorageClass nope not found")
        assert (ready4["reason"], ready4["message"]) == ("CreationError", "node ghost not found")
        await world.has_event("v3", "CreationError", type="Warning")
        await world.has_event("v4", "CreationError", type="Warning")
        assert agent.jobs == []
        # Applied before its StorageClass: it recovers once the class exists.
        await world.storage_class("nope")
        await world.in_phase("v3", "Available")
        assert agent.ops("v3") == ["prepare"]


async def test_bound_volume_waits_for_its_claim(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1")
    volumes = volume_controller(client, timings=TIMINGS)
    async with running(volumes, claim_binder_controller(client)), agent_running(agent):
        await world.volume("v5")
        await world.in_phase("v5", "Available")
        claim: Any = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"volumeName": "v5", "storageClassName": "local",
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}
        await world.core.create_namespaced_persistent_volume_claim(ns, claim)

        async def bound() -> bool:
            pv, pvc = await world.pv("v5"), await world.pvc("data")
            return ((pv or {}).get("status") or {}).get("phase") == "Bound" and \
                ((pvc or {}).get("status") or {}).get("phase") == "Bound"
        await eventually(bound, "PV v5 and PVC data Bound")
        pv, pvc = await world.pv("v5"), await world.pvc("data")
        assert pv is not None and pvc is not None
        ref = pv["spec"]["claimRef"]
        assert (ref["namespace"], ref["name"], ref["uid"]) == (
            ns, "data", pvc["metadata"]["uid"])
        assert pvc["spec"]["volumeName"] == "v5"
        assert pvc["status"]["capacity"] == {"storage": "1Gi"}

        await world.delete(GROUP, "volumes", "v5")

        async def blocked() -> bool:
            return (await world.ready("v5")).get("message") == \
                f"PersistentVolume v5 is bound to claim {ns}/data"
        await eventually(blocked, "volume v5 blocked by its claim")
        assert (await world.status("v5"))["phase"] == "Terminating"
        # Woken again (an annotation), the controller still waits for the claim.
        idle = finished_reconciles(volumes.metrics, volumes.name)
        await world.patch(GROUP, "volumes", "v5", {"metadata": {"annotations": {"touch": "1"}}},
                          namespace=None)
        await reconciled_again(volumes.metrics, volumes.name, "the blocked volume v5, woken",
                               since=idle, more=1)
        assert (await world.status("v5"))["phase"] == "Terminating"
        assert agent.ops("v5") == ["prepare"]
        pv = await world.pv("v5")
        assert pv is not None and pv["status"]["phase"] == "Bound"

        await world.core.delete_namespaced_persistent_volume_claim("data", ns)
        await world.gone("volume v5", lambda: world.read("v5"))
        await world.gone("PersistentVolume v5", lambda: world.pv("v5"))
        assert agent.ops("v5") == ["prepare", "unprepare"]


async def test_deleted_mid_creation(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1", delay=1.0)
    async with running(volume_controller(client, timings=TIMINGS)), agent_running(agent):
        await world.volume("v6")

        async def started() -> bool:
            return agent.ops("v6") == ["prepare"]
        await eventually(started, "the prepare job of v6 started")
        await world.delete(GROUP, "volumes", "v6")
        await world.in_phase("v6", "Terminating")
        assert agent.finished == []
        await world.gone("volume v6", lambda: world.read("v6"))
        assert agent.ops("v6") == ["prepare", "unprepare"]
        assert [job.partition(":")[0] for _, job in agent.finished] == ["prepare", "unprepare"]
        assert await world.pv("v6") is None


async def test_restart_mid_job_runs_one_job(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.setup()
    agent = Agent(client, "n1", delay=1.5)
    async with agent_running(agent):
        async with running(volume_controller(client, timings=TIMINGS)):
            await world.volume("v7")

            async def started() -> bool:
                return len(agent.jobs) == 1
            await eventually(started, "the prepare job of v7 started")
        job = (await world.status("v7"))["job"]
        assert agent.jobs == [("v7", job)]
        async with running(volume_controller(client, timings=TIMINGS)):
            await world.in_phase("v7", "Available")
        assert agent.jobs == [("v7", job)]
        pvs = await world.core.list_persistent_volume()
        assert [p.metadata.name for p in pvs.items] == ["v7"]
