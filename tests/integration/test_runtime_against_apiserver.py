"""The controller runtime against the real embedded API server (in-process, TLS).

A small "finalizer" controller for storage.racksmith.io/v1alpha1 Volume
(cluster-scoped), built only from the runtime (``Controller``, ``KubeSource``,
``Manager``) over a kubernetes_asyncio ``ApiClient`` made from the server's
kubeconfig: it adds a finalizer to every live Volume, writes its status
through the status subresource when it differs from the desired one, and
removes the finalizer from Volumes being deleted.

Covered: list then watch, the status subresource, deletion held by the
finalizer, re-list after a compacted resourceVersion (ERROR 410 in the watch),
level-based convergence across a stop/restart with nothing done twice, leader
election over a real coordination.k8s.io/v1 Lease (graceful hand-over and
expiry after a partition) and the reconcile metrics.

Every wait polls a condition under a timeout; nothing asserts on durations.
The tests share the module's API server (the Volumes and the Lease a test
made are deleted after it, ``tests.harness``), except the re-list test, which
needs a server with a short event log of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from racksmith.apiserver.server import ApiServer
from racksmith.election import LeaderElector, LeaseRecord, PartitionedLeaseStore
from racksmith.runtime import Controller, Done, Manager, ObjectKey, Result
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from racksmith.runtime.leader import KubeLeaseStore
from racksmith.runtime.source import KubeSource, Resource
from tests.harness.api import connect, optional, serving
from tests.harness.controllers import managing as running
from tests.harness.wait import WAIT, eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, VERSION, PLURAL = "storage.racksmith.io", "v1alpha1", "volumes"
VOLUMES = Resource(GROUP, VERSION, PLURAL)
FINALIZER = "test.racksmith.io/cleanup"
FIELD_MANAGER = "volume-finalizer"
CONTROLLER = "volumes"
LEASE_NS, LEASE_NAME = "kube-system", "runtime-it"


# --------------------------------------------------------------------- helpers


def volume(name: str, size: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Volume",
        "metadata": {"name": name},
        "spec": {
            "nodeName": "node-1",
            "storageClassName": "local",
            "sparseLoopDevice": {"size": size},
        },
    }


def desired_status(obj: dict[str, Any]) -> dict[str, Any]:
    """The status the controller converges to: a pure function of the object."""
    return {
        "phase": "Available",
        "deviceName": f"loop-{obj['metadata']['name']}",
        "size": obj["spec"]["sparseLoopDevice"]["size"],
    }


class Volumes:
    """The test's own view of the API (not the controller's)."""

    def __init__(self, client: ApiClient) -> None:
        self.api = CustomObjectsApi(client)

    async def create(self, name: str, size: str = "1Gi") -> dict[str, Any]:
        obj: dict[str, Any] = await self.api.create_cluster_custom_object(
            GROUP, VERSION, PLURAL, volume(name, size)
        )
        return obj

    async def get(self, name: str) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = await optional(
            self.api.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))
        return obj

    async def resize(self, name: str, size: str) -> None:
        obj = await self.get(name)
        assert obj is not None
        obj["spec"]["sparseLoopDevice"]["size"] = size
        await self.api.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, obj)

    async def delete(self, name: str) -> None:
        await self.api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)

    async def force_remove(self, name: str) -> None:
        """Delete and strip every finalizer, behind the controller's back."""
        await self.delete(name)
        obj = await self.get(name)
        assert obj is not None
        obj["metadata"]["finalizers"] = []
        await self.api.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, obj)
        assert await self.get(name) is None

    async def converged(self, name: str) -> bool:
        """Finalizer present and status as desired (as read from the server)."""
        obj = await self.get(name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return False
        status = obj.get("status") or {}
        return FINALIZER in (obj["metadata"].get("finalizers") or []) and all(
            status.get(k) == v for k, v in desired_status(obj).items()
        )

    async def all_converged(self, names: list[str]) -> bool:
        return all([await self.converged(name) for name in names])


class VolumeFinalizer:
    """The reconciler under test; counts every write it makes."""

    def __init__(self, client: ApiClient, identity: str = "") -> None:
        self.api = CustomObjectsApi(client)
        self.identity = identity
        self.reconciled: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.finalizers_added: Counter[str] = Counter()
        self.finalizers_removed: Counter[str] = Counter()
        self.status_writes: Counter[str] = Counter()
        self.hold_cleanup: dict[str, asyncio.Event] = {}
        self.cleanup_waiting: set[str] = set()

    async def reconcile(self, key: ObjectKey) -> Result:
        assert key.namespace == "", key  # Volume is cluster-scoped
        name = key.name
        self.reconciled[name] += 1
        try:
            obj: dict[str, Any] = await self.api.get_cluster_custom_object(
                GROUP, VERSION, PLURAL, name
            )
        except ApiException as exc:
            if exc.status == 404:
                self.missing[name] += 1
                return Done()
            raise
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                gate = self.hold_cleanup.get(name)
                if gate is not None:
                    self.cleanup_waiting.add(name)
                    await gate.wait()
                meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
                await self.api.replace_cluster_custom_object(
                    GROUP, VERSION, PLURAL, name, obj, field_manager=FIELD_MANAGER
                )
                self.finalizers_removed[name] += 1
            return Done()
        if FINALIZER not in finalizers:
            meta["finalizers"] = [*finalizers, FINALIZER]
            obj = await self.api.replace_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, obj, field_manager=FIELD_MANAGER
            )
            self.finalizers_added[name] += 1
        current = obj.get("status") or {}
        desired = desired_status(obj)
        if any(current.get(k) != v for k, v in desired.items()):
            obj["status"] = {**current, **desired}
            await self.api.replace_cluster_custom_object_status(
                GROUP, VERSION, PLURAL, name, obj, field_manager=FIELD_MANAGER
            )
            self.status_writes[name] += 1
        return Done()


def volume_controller(
    client: Any, reconciler: VolumeFinalizer, *, workers: int = 2, **source_kw: Any
) -> Controller:
    return Controller(
        CONTROLLER, KubeSource(client, VOLUMES, **source_kw), reconciler, workers=workers
    )


async def quiesce(volumes: Volumes, controller: Controller, reconciler: VolumeFinalizer,
                  barrier: str) -> None:
    """Wait until every event that preceded now has been reconciled.

    Creates ``barrier`` (a Volume): watch events arrive in order, so once the
    barrier has been reconciled every earlier event's key has been queued;
    once the queue is also idle, all of them have been processed.
    """
    await volumes.create(barrier)
    await eventually(lambda: reconciler.status_writes[barrier] >= 1, f"barrier {barrier}")
    await eventually(lambda: idle(controller), "an idle work queue")


def idle(controller: Controller) -> bool:
    queue = controller.queue
    return len(queue) == 0 and queue.processing == 0 and queue.delayed == 0


async def settle(volumes: Volumes, controller: Controller, names: list[str], what: str) -> None:
    """Wait until ``names`` have converged on the server *and* the reconciles
    that wrote them have returned (the server answers other clients before
    the writer has read its own response, so counters may lag otherwise)."""
    await eventually(lambda: volumes.all_converged(names), what)
    await eventually(lambda: idle(controller), f"{what}: idle work queue")


@pytest.fixture
def volumes(client: ApiClient) -> Volumes:
    return Volumes(client)


# ------------------------------------------------------------------- controller


async def test_list_then_watch_status_subresource_and_finalizer(
    client: ApiClient, volumes: Volumes
) -> None:
    before = ["before-0", "before-1", "before-2"]
    for name in before:
        await volumes.create(name)
    reconciler = VolumeFinalizer(client)
    controller = volume_controller(client, reconciler)
    manager = Manager(client, [controller], identity="solo")
    async with running(manager):
        # Objects that existed before start: found by the initial list.
        await settle(volumes, controller, before, "pre-existing volumes converge")
        # Objects created afterwards: found by the watch.
        after = ["after-0", "after-1"]
        for name in after:
            await volumes.create(name)
        await settle(volumes, controller, after, "new volumes converge")

        # The status was written through the status subresource, by us.
        obj = await volumes.get("after-0")
        assert obj is not None
        entries = [m for m in obj["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
        status_entries = [m for m in entries if m.get("subresource") == "status"]
        assert status_entries, entries
        assert "f:status" in status_entries[0]["fieldsV1"]
        assert all("f:status" not in m["fieldsV1"] for m in entries if m not in status_entries)

        # Deletion completes only once the controller removes its finalizer.
        gate = reconciler.hold_cleanup["before-1"] = asyncio.Event()
        await volumes.delete("before-1")
        await eventually(lambda: "before-1" in reconciler.cleanup_waiting, "cleanup started")
        held = await volumes.get("before-1")
        assert held is not None, "deleted while the finalizer was still present"
        assert held["metadata"].get("deletionTimestamp")
        assert FINALIZER in held["metadata"]["finalizers"]
        assert reconciler.finalizers_removed["before-1"] == 0
        gate.set()

        async def gone() -> bool:
            return await volumes.get("before-1") is None

        await eventually(gone, "the deleted volume disappears")

        # The reconciler counts its write once the server has answered it,
        # which may be just after the object is gone.
        async def counted() -> bool:
            return reconciler.finalizers_removed["before-1"] >= 1

        await eventually(counted, "the finalizer removal counted")
        assert reconciler.finalizers_removed["before-1"] == 1

        await quiesce(volumes, controller, reconciler, "barrier")
        everything = [*before, *after]
        for name in everything:
            assert reconciler.finalizers_added[name] == 1, name
        for name in [n for n in everything if n != "before-1"]:
            assert reconciler.status_writes[name] == 1, name  # our own events are no-ops
        assert manager.metrics.error_count(CONTROLLER) == 0

        # Metrics: the manager's registry counts the controller's reconciles.
        text = manager.metrics_text().decode()
        assert "racksmith_reconcile_total" in text
        samples = {
            (s.name, s.labels.get("controller"), s.labels.get("result")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        done = samples[("racksmith_reconcile_total", CONTROLLER, "done")]
        assert done >= sum(reconciler.reconciled.values()) > 0
        assert samples[("racksmith_reconcile_total", CONTROLLER, "error")] == 0
        assert samples[("racksmith_leader_is_leader", None, None)] == 1
    assert not controller.is_running


class GatedClient:
    """Wraps an ApiClient: counts list/watch GETs of the collection and can
    hold new watch requests at a gate (the controller "falls behind")."""

    def __init__(self, inner: ApiClient) -> None:
        self.inner = inner
        self.lists = 0
        self.watch_rvs: list[str | None] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.watch_held = asyncio.Event()
        self.list_gate = asyncio.Event()
        self.list_gate.set()
        self.list_held = asyncio.Event()

    async def call_api(self, path: str, method: str, *args: Any, **kw: Any) -> Any:
        query = dict(kw.get("query_params") or [])
        if path == VOLUMES.path() and method == "GET":
            if query.get("watch") == "true":
                self.watch_rvs.append(query.get("resourceVersion"))
                if not self.gate.is_set():
                    self.watch_held.set()
                    await self.gate.wait()
            else:
                self.lists += 1
                if not self.list_gate.is_set():
                    self.list_held.set()
                    await self.list_gate.wait()
        return await self.inner.call_api(path, method, *args, **kw)


class RecordingLogger:
    """A structlog-like logger that records event names."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def bind(self, **_: Any) -> RecordingLogger:
        return self

    def _record(self, event: str, *_: Any, **__: Any) -> None:
        self.events.append(event)

    debug = info = warning = error = exception = _record


async def test_relist_after_the_watch_resource_version_is_compacted(tmp_path: Path) -> None:
    # Its own server: one with a short event log (20 events), so it compacts.
    async with serving(tmp_path / "data", event_log_size=20) as server, \
            connect(server) as client:
        volumes = Volumes(client)
        gated = GatedClient(client)
        log = RecordingLogger()
        reconciler = VolumeFinalizer(client)
        # Short watches so a new watch request (held at the gate) comes soon.
        controller = volume_controller(gated, reconciler, watch_timeout_seconds=1, logger=log)
        manager = Manager(client, [controller], identity="solo")
        async with running(manager):
            for name in ("keep", "vanish"):
                await volumes.create(name)
            await settle(volumes, controller, ["keep", "vanish"], "initial converge")
            assert gated.lists == 1

            # Fall behind: the next watch waits at the gate, from an old rv.
            gated.gate.clear()
            await eventually(gated.watch_held.is_set, "a watch held at the gate")
            stale_rv = gated.watch_rvs[-1]
            assert stale_rv
            await volumes.force_remove("vanish")  # gone without the controller
            await volumes.resize("keep", "2Gi")
            late = [f"late-{i:02d}" for i in range(25)]  # > event_log_size writes
            for name in late:
                await volumes.create(name)
            gated.gate.set()

            await eventually(lambda: volumes.all_converged(["keep", *late]), "converge after 410")
            await eventually(lambda: reconciler.missing["vanish"] >= 1, "vanished key reconciled")
            await quiesce(volumes, controller, reconciler, "barrier")
            assert gated.lists == 2, "re-listed exactly once"
            assert "resource version expired, listing again" in log.events
            # The held watch asked for the stale rv; the one after the re-list did not.
            held_index = max(i for i, rv in enumerate(gated.watch_rvs) if rv == stale_rv)
            assert any(rv != stale_rv for rv in gated.watch_rvs[held_index + 1 :])
            assert manager.metrics.error_count(CONTROLLER) == 0
            writes = {name: reconciler.status_writes[name] for name in ["keep", *late]}
            assert writes == {"keep": 2, **{name: 1 for name in late}}  # keep: 1Gi, 2Gi


async def test_level_based_convergence_across_a_restart(
    client: ApiClient, volumes: Volumes
) -> None:
    names = [f"v-{i}" for i in range(5)]
    for name in names:
        await volumes.create(name)
    reconciler = VolumeFinalizer(client)
    gated = GatedClient(client)
    controller = volume_controller(gated, reconciler)
    manager = Manager(client, [controller], identity="solo")
    async with running(manager):
        await eventually(lambda: volumes.all_converged(names), "first run converges")
        await quiesce(volumes, controller, reconciler, "barrier-1")
    assert not controller.is_running
    first = {
        "status": reconciler.status_writes.copy(),
        "added": reconciler.finalizers_added.copy(),
    }
    assert all(first["status"][n] == 1 and first["added"][n] == 1 for n in names)

    # Changes while the controller is down.
    await volumes.resize("v-1", "3Gi")
    await volumes.resize("v-2", "4Gi")
    await volumes.resize("v-2", "5Gi")  # only the last state matters
    await volumes.delete("v-3")  # held by the finalizer
    obj = await volumes.get("v-3")
    assert obj is not None and obj["metadata"].get("deletionTimestamp")
    await volumes.create("v-new")

    # Run the same Manager and Controller again, holding its first list: it
    # runs, but is not ready until it has listed again (no stale "synced").
    gated.list_gate.clear()
    async with running(manager, wait_ready=False):
        await eventually(gated.list_held.is_set, "the re-list held at the gate")
        assert manager.is_leader and controller.is_running
        assert not controller.has_synced and not manager.ready
        gated.list_gate.set()
        await eventually(lambda: manager.ready, "ready after the re-list")
        assert gated.lists == 2
        live = ["v-0", "v-1", "v-2", "v-4", "v-new"]
        await eventually(lambda: volumes.all_converged(live), "second run converges")

        async def v3_gone() -> bool:
            return await volumes.get("v-3") is None

        await eventually(v3_gone, "v-3 deleted")
        await quiesce(volumes, controller, reconciler, "barrier-2")

    def delta(counter: Counter[str], before: Counter[str], name: str) -> int:
        return counter[name] - before[name]

    # Exactly once for what changed, nothing for what did not.
    assert delta(reconciler.status_writes, first["status"], "v-0") == 0
    assert delta(reconciler.status_writes, first["status"], "v-4") == 0
    assert delta(reconciler.status_writes, first["status"], "v-1") == 1
    assert delta(reconciler.status_writes, first["status"], "v-2") == 1
    assert delta(reconciler.status_writes, first["status"], "v-3") == 0
    assert reconciler.status_writes["v-new"] == 1
    assert all(delta(reconciler.finalizers_added, first["added"], n) == 0 for n in names)
    assert reconciler.finalizers_added["v-new"] == 1
    assert reconciler.finalizers_removed == Counter({"v-3": 1})
    v2 = await volumes.get("v-2")
    assert v2 is not None and v2["status"]["size"] == "5Gi"
    assert manager.metrics.error_count(CONTROLLER) == 0


# -------------------------------------------------------------- leader election


class RecordingLeaseStore:
    """Wraps a LeaseStore, recording what each call read or wrote."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str]] = []  # (op, holder)

    async def get(self) -> LeaseRecord | None:
        record: LeaseRecord | None = await self.inner.get()
        self.calls.append(("get", record.holder_identity if record else "<none>"))
        return record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        out: LeaseRecord = await self.inner.create(record)
        self.calls.append(("create", out.holder_identity))
        return out

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        out: LeaseRecord = await self.inner.update(record)
        self.calls.append(("update", out.holder_identity))
        return out


class Candidate:
    """One process of the leader-election tests: client, controller, manager."""

    def __init__(self, identity: str, client: ApiClient, store: Any) -> None:
        self.identity = identity
        self.client = client
        self.reconciler = VolumeFinalizer(client, identity)
        self.controller = volume_controller(client, self.reconciler)
        self.manager = Manager(
            client,
            [self.controller],
            leader_election=True,
            identity=identity,
            lease_store=store,
            lease_duration=2,
            renew_deadline=1.5,
            retry_period=0.2,
            shutdown_timeout=10,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.manager.run(), name=f"manager-{self.identity}")

    async def stop(self) -> None:
        async with asyncio.timeout(WAIT):
            await self.manager.stop()
            if self.task is not None:
                await self.task

    @property
    def elector(self) -> Any:
        assert self.manager.elector is not None
        return self.manager.elector


class Monitor:
    """Samples who runs controllers on every loop turn-ish; records overlaps
    (both running at once) and the order in which leaders started."""

    def __init__(self, *candidates: Candidate) -> None:
        self.candidates = candidates
        self.overlaps = 0
        self.order: list[str] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            running_now = [c.identity for c in self.candidates if c.controller.is_running]
            if len(running_now) > 1:
                self.overlaps += 1
            for identity in running_now:
                if not self.order or self.order[-1] != identity:
                    self.order.append(identity)
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@contextlib.asynccontextmanager
async def candidates(
    api_server: ApiServer, *, partition_a: bool = False
) -> AsyncIterator[tuple[Candidate, Candidate, Any]]:
    client_a = await api_client_from_kubeconfig(api_server.kubeconfig_path)
    client_b = await api_client_from_kubeconfig(api_server.kubeconfig_path)
    store_a: Any = KubeLeaseStore(client_a, LEASE_NS, LEASE_NAME)
    if partition_a:
        store_a = PartitionedLeaseStore(store_a)
    store_b = RecordingLeaseStore(KubeLeaseStore(client_b, LEASE_NS, LEASE_NAME))
    a = Candidate("A", client_a, store_a)
    b = Candidate("B", client_b, store_b)
    try:
        yield a, b, store_a
    finally:
        for c in (b, a):
            with contextlib.suppress(Exception):
                await c.stop()
        await client_a.close()
        await client_b.close()


async def read_lease(client: ApiClient) -> Any:
    return (await CoordinationV1Api(client).read_namespaced_lease(LEASE_NAME, LEASE_NS)).spec


async def start_a_then_b(a: Candidate, b: Candidate) -> None:
    """A becomes leader first; B campaigns and sees A holding the Lease."""
    a.start()
    await eventually(lambda: a.manager.ready, "A leads with its controllers ready")
    b.start()
    await eventually(lambda: b.elector.observed_holder == "A", "B sees A holding the lease")
    assert not b.manager.is_leader and not b.controller.is_running


async def test_leader_election_graceful_handover(
    api_server: ApiServer, client: ApiClient, volumes: Volumes
) -> None:
    async with candidates(api_server) as (a, b, _):
        monitor = Monitor(a, b)
        try:
            await start_a_then_b(a, b)
            spec = await read_lease(client)
            assert spec.holder_identity == "A"
            assert spec.lease_transitions == 0
            assert spec.lease_duration_seconds == 2

            await volumes.create("led-by-a")
            await settle(volumes, a.controller, ["led-by-a"], "A reconciles")
            assert a.reconciler.status_writes["led-by-a"] == 1
            assert not b.reconciler.reconciled  # the standby runs no controller

            await a.stop()  # graceful: stops its controllers, then releases
            assert not a.manager.is_leader and not a.controller.is_running
            await eventually(lambda: b.manager.ready, "B takes over")
            # B acquired a released lease (holder ""), not an expired one.
            store_b = b.elector.store
            first_update = store_b.calls.index(("update", "B"))
            assert store_b.calls[first_update - 1] == ("get", "")

            spec = await read_lease(client)
            assert spec.holder_identity == "B"
            assert spec.lease_transitions == 1

            await volumes.create("led-by-b")
            await settle(volumes, b.controller, ["led-by-b"], "B reconciles")
            assert b.reconciler.status_writes["led-by-b"] == 1
            assert a.reconciler.reconciled["led-by-b"] == 0
            assert "led-by-a" in b.reconciler.reconciled  # B's initial list
            assert b.reconciler.status_writes["led-by-a"] == 0  # already converged
        finally:
            await monitor.close()
        assert monitor.order == ["A", "B"]
        assert monitor.overlaps == 0


async def test_leader_election_takeover_after_expiry(
    api_server: ApiServer, client: ApiClient, volumes: Volumes
) -> None:
    async with candidates(api_server, partition_a=True) as (a, b, store_a):
        monitor = Monitor(a, b)
        try:
            await start_a_then_b(a, b)
            # A is cut off from the API: it can neither renew nor release.
            store_a.unavailable = True
            await eventually(lambda: b.manager.ready, "B takes over after A's lease expires")
            await eventually(lambda: not a.manager.is_leader, "A deposes itself")
            assert not a.controller.is_running
            store_b = b.elector.store
            first_update = store_b.calls.index(("update", "B"))
            assert store_b.calls[first_update - 1] == ("get", "A")  # expired, not released

            spec = await read_lease(client)
            assert spec.holder_identity == "B"
            assert spec.lease_transitions == 1

            await volumes.create("after-expiry")
            await settle(volumes, b.controller, ["after-expiry"], "B reconciles")
            assert b.reconciler.status_writes["after-expiry"] == 1
            assert a.reconciler.reconciled["after-expiry"] == 0

            # A comes back: it sees B holding a live lease and stays a follower.
            store_a.unavailable = False
            await eventually(lambda: a.elector.observed_holder == "B", "A sees B")
            assert not a.manager.is_leader and not a.controller.is_running
            assert b.manager.is_leader
        finally:
            await monitor.close()
        assert monitor.order == ["A", "B"]


async def test_release_after_a_renewal_whose_answer_was_lost(client: ApiClient) -> None:
    """A renewal cancelled after the server applied it leaves the elector with
    a stale resourceVersion; releasing must still free the Lease."""
    store = KubeLeaseStore(client, LEASE_NS, LEASE_NAME)
    elector = LeaderElector(
        store, "A", lease_duration=2, renew_deadline=1.5, retry_period=0.2
    )
    async with asyncio.timeout(WAIT):
        assert await elector.try_acquire_or_renew()
        # The "lost" renewal: the server has it, the elector never saw it.
        current = await store.get()
        assert current is not None and current.holder_identity == "A"
        lost = await store.update(replace(current, renew_time=datetime.now(UTC)))
        assert lost.resource_version != current.resource_version
        await elector.release()
    spec = await read_lease(client)
    assert spec.holder_identity in ("", None)
    assert not elector.is_leader
    # A successor takes the released Lease at once (no expiry wait needed).
    successor = LeaderElector(
        store, "B", lease_duration=2, renew_deadline=1.5, retry_period=0.2
    )
    assert await successor.try_acquire_or_renew()
    spec = await read_lease(client)
    assert spec.holder_identity == "B" and spec.lease_transitions == 1
