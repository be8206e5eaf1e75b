"""The reference workload controller: the maintenance protocol's demonstration.

A small stateful "service" of N instances (Pods in namespace
``racksmith-workloads``, labelled ``workloads.racksmith.io/instance``,
covered by the PodDisruptionBudget ``instances`` with maxUnavailable 1) that
takes part in node maintenance as MOSK's workload controllers do
(``docs/design/maintenance-contracts.md``, "The reference workload
controller"; ``docs/maintenance.md``):

- ClusterWorkloadLock ``reference``: inactive while a
  ClusterMaintenanceRequest exists (nothing to prepare cluster-wide),
  active otherwise.
- NodeWorkloadLock ``reference.<node>`` for every node that hosts or may
  host instances. On a NodeMaintenanceRequest for the node, when fewer than
  ``maxParallel`` of its node locks are released (or being released) and
  those are all in this node's zone (the ``zoneKey`` label of the Node), it
  moves each instance away (replacement on the least loaded schedulable,
  Ready node without a request; wait until the replacement is Ready — the
  node's kubelet says so; delete the old pod), showing
  ``status.inactivationProgress``, then sets the lock ``inactive`` with
  ``status.release`` = the request's ``spec.release``. An instance annotated
  ``workloads.racksmith.io/pinned: <reason>`` cannot move: the lock goes
  ``failed`` ("instance <name> cannot migrate: <reason>") until the
  annotation is removed. Request deleted → lock active again (instances are
  not moved back; new ones prefer empty nodes). Locks of nodes that no
  longer exist are deleted.

Config: ConfigMap ``racksmith-workloads/reference`` (``instances`` "6",
``maxParallel`` "2", ``zoneKey`` "metal.racksmith.io/rack"), created with
the defaults when absent.

One key (the whole service) reconciled level-based by one worker: every
reconcile reads the world, asks the pure :func:`workloads_plan.plan` what to
write, and writes it (lock status through the status subresource). No state
outside the API, so a restart resumes where it stopped. Started by
``racksmith up`` when hosts are emulated; the runtime's ``Controller`` runs
it (:func:`reference_workloads_controller`), looking again without events
as :class:`WorkloadTimings` says.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.emulator.workloads_plan import (
    APP,
    APP_LABEL,
    CONTROLLER_NAME,
    INSTANCE_LABEL,
    LOCK_PREFIX,
    MIGRATED_FROM_ANNOTATION,
    MIGRATION_ANNOTATION,
    PINNED_ANNOTATION,
    Actions,
    Config,
    CreatePod,
    LockStatus,
    NodeView,
    PodView,
    RequestView,
    World,
    lock_name,
    plan,
)
from racksmith.runtime.access import watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.keys import Mapper, ObjectKey
from racksmith.runtime.planes import ClusterMapper, ClusterPlane, ClusterUnavailable, SharedPlane
from racksmith.runtime.resources import (
    CLUSTER_LOCKS,
    CMRS,
    CONFIG_MAPS,
    NAMESPACES,
    NMRS,
    NODE_LOCKS,
    NODES,
    PDBS,
    PODS,
)
from racksmith.runtime.result import RequeueAfter, Result
from racksmith.runtime.source import Resource

NAMESPACE = "racksmith-workloads"
CONFIG_MAP = "reference"
PDB_NAME = "instances"
FIELD_MANAGER = "racksmith-reference-workloads"
ACCESS = (watches(NODES, NMRS, CMRS, CLUSTER_LOCKS, NODE_LOCKS, PODS, CONFIG_MAPS, NAMESPACES,
                  PDBS)
          + writes(CLUSTER_LOCKS, "create") + writes(CLUSTER_LOCKS, "update", subresource="status")
          + writes(NODE_LOCKS, "create", "delete")
          + writes(NODE_LOCKS, "update", subresource="status")
          + writes(PODS, "create", "delete") + writes(NAMESPACES, "create")
          + writes(CONFIG_MAPS, "create") + writes(PDBS, "create"))
"""What the reference workload controller reads and writes: its ClusterRole
(``racksmith.app.identities``; it runs as ``reference-workloads-controller``)."""
GROUP, VERSION = "lcm.racksmith.io", "v1alpha1"
KEY = ObjectKey(NAMESPACE, CONTROLLER_NAME)
IMAGE = "registry.racksmith.io/reference-workload:1.0"

@dataclass(frozen=True)
class WorkloadTimings:
    """How often the reference workload controller looks again without an event
    (seconds). The composition root may override the defaults; tests shrink them."""

    busy_requeue: float = 1.0
    """Look again this soon while a migration waits (for a replacement to be Ready)."""
    idle_requeue: float = 30.0
    """Look again this often when nothing is in progress."""

    def __post_init__(self) -> None:
        if self.busy_requeue <= 0 or self.idle_requeue <= 0:
            raise ValueError("workload timings must be > 0")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(_map(c).get("type") == kind and _map(c).get("status") == "True"
               for c in _map(obj.get("status")).get("conditions") or [])


def _is_schedulable(node: Mapping[str, Any]) -> bool:
    spec = _map(node.get("spec"))
    if spec.get("unschedulable"):
        return False
    return not any(_map(t).get("effect") in ("NoSchedule", "NoExecute")
                   for t in spec.get("taints") or [])


def node_view(node: Mapping[str, Any], zone_key: str) -> NodeView:
    meta = _map(node.get("metadata"))
    return NodeView(str(meta.get("name")), _is_schedulable(node), _condition_true(node, "Ready"),
                    str(_map(meta.get("labels")).get(zone_key) or ""))


def pod_view(pod: Mapping[str, Any]) -> PodView | None:
    """None for pods that are not live instances (terminating, unbound, unlabelled)."""
    meta = _map(pod.get("metadata"))
    instance = _map(meta.get("labels")).get(INSTANCE_LABEL)
    node = _map(pod.get("spec")).get("nodeName")
    if not instance or not node or meta.get("deletionTimestamp"):
        return None
    notes = _map(meta.get("annotations"))
    pinned = notes.get(PINNED_ANNOTATION)
    return PodView(str(meta.get("name")), str(instance), str(node),
                   _condition_true(pod, "Ready"),
                   pinned=None if pinned is None else str(pinned),
                   migration=notes.get(MIGRATION_ANNOTATION),
                   created=str(meta.get("creationTimestamp") or ""))


def request_view(obj: Mapping[str, Any]) -> RequestView:
    meta, spec = _map(obj.get("metadata")), _map(obj.get("spec"))
    release = spec.get("release")
    return RequestView(str(meta.get("name")), str(spec.get("nodeName") or ""),
                       str(meta.get("uid") or meta.get("name")),
                       None if release is None else str(release),
                       str(meta.get("creationTimestamp") or ""))


class _Kube:
    """Every API call of the controller, through the runtime ``Client`` (raw
    dicts; a create that finds the name taken and a delete that finds the
    object gone are done)."""

    def __init__(self, client: Client) -> None:
        self.client = client.with_field_manager(FIELD_MANAGER)

    async def create(self, resource: Resource, body: Mapping[str, Any]) -> None:
        with contextlib.suppress(AlreadyExists):
            await self.client.create(resource, body)

    async def ensure_basics(self) -> Config:
        """The namespace, the ConfigMap (defaults) and the PDB; the config.
        From the cache: each is watched, a create's answer is offered to the
        cache, and a create that finds the name taken is done."""
        client = self.client
        if await client.get(NAMESPACES, None, NAMESPACE) is None:
            await self.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NAMESPACE}})
        data = await client.get(CONFIG_MAPS, NAMESPACE, CONFIG_MAP)
        if data is not None:
            config = Config.from_data(_map(data.get("data")))
        else:
            config = Config()
            await self.create(CONFIG_MAPS, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
                "data": config.as_data()})
        if await client.get(PDBS, NAMESPACE, PDB_NAME) is None:
            await self.create(PDBS, {
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": PDB_NAME, "namespace": NAMESPACE},
                "spec": {"maxUnavailable": 1,
                         "selector": {"matchLabels": {APP_LABEL: APP}}}})
        return config


class ReferenceWorkloads:
    """The reconciler (one key: the whole service); see the module docstring."""

    def __init__(self, api_client: Any, *, logger: Any = None,
                 timings: WorkloadTimings | None = None,
                 plane: ClusterPlane | None = None) -> None:
        self.timings = timings if timings is not None else WorkloadTimings()
        self.management = as_client(api_client)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.management)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.emulator.workloads")

    async def read_world(self, kube: _Kube) -> tuple[World, dict[str, dict[str, Any]],
                                                     dict[str, Any] | None]:
        """The world, the raw node locks by node, and the raw cluster lock."""
        client = kube.client
        config = await kube.ensure_basics()
        nodes = [node_view(n, config.zone_key) for n in await client.list(NODES)]
        requests = tuple(request_view(r) for r in await client.list(NMRS))
        cmrs = sorted((request_view(r) for r in await client.list(CMRS)),
                      key=lambda r: (r.created, r.name))
        raw_locks: dict[str, dict[str, Any]] = {}
        # The locks from the cache: their names are fixed (a create that
        # finds one taken is done) and a stale status write is a Conflict
        # the runtime requeues.
        for lock in await client.list(NODE_LOCKS, copy=False):  # read only; others skipped
            if _own(lock) and str(_map(lock.get("metadata")).get("name")).startswith(
                    LOCK_PREFIX):
                raw_locks[str(_map(lock.get("spec")).get("nodeName"))] = lock
        cluster_lock = await client.get(CLUSTER_LOCKS, None, CONTROLLER_NAME)
        # The pods live: a pod's name is generated (a stale read missing a
        # pod just created would make a second), and a deletion is not in
        # the cache until its watch event comes.
        pods = [v for p in await client.list(PODS, NAMESPACE, labels=INSTANCE_LABEL, live=True)
                if (v := pod_view(p)) is not None]
        world = World(config, tuple(nodes), requests, cmrs[0] if cmrs else None,
                      {n: LockStatus.from_status(_map(raw.get("status")))
                       for n, raw in raw_locks.items()}, tuple(pods))
        return world, raw_locks, cluster_lock

    async def reconcile(self, key: ObjectKey) -> Result:
        """One cluster's service (``key``: the cluster; :data:`KEY` in a
        SharedPlane's one API)."""
        cluster = None if key == KEY else key
        client = await self.plane.client(cluster if cluster is not None else key)
        if client is None:
            raise ClusterUnavailable(key)
        kube = _Kube(client)
        log = self.log.bind(cluster=str(cluster)) if cluster is not None else self.log
        world, raw_locks, cluster_lock = await self.read_world(kube)
        acts = plan(world)
        await _Apply(kube, log).apply(acts, raw_locks, cluster_lock)
        t = self.timings
        return RequeueAfter(t.busy_requeue if acts.busy else t.idle_requeue)


@dataclass
class _Apply:
    """Writes one reconcile's actions in one cluster."""

    kube: _Kube
    log: Any

    async def apply(self, acts: Actions, raw_locks: dict[str, dict[str, Any]],
                    cluster_lock: dict[str, Any] | None) -> None:
        kube, log = self.kube, self.log
        await self._cluster_lock(acts.cluster_lock, cluster_lock)
        for node in acts.create_locks:
            body: Any = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeWorkloadLock",
                         "metadata": {"name": lock_name(node)},
                         "spec": {"controllerName": CONTROLLER_NAME, "nodeName": node}}
            await kube.create(NODE_LOCKS, body)
            log.info("node lock created", lock=lock_name(node))
        for pod in acts.create_pods:
            await self._create_pod(pod)
        for name in acts.delete_pods:
            if await kube.client.delete(PODS, NAMESPACE, name):
                log.info("instance pod deleted", pod=name)
        for node, status in sorted(acts.lock_status.items()):
            await self._write_status(NODE_LOCKS, lock_name(node), status,
                                     LockStatus.from_status(
                                         _map(_map(raw_locks.get(node)).get("status"))))
        for node in acts.delete_locks:
            if await kube.client.delete(NODE_LOCKS, None, str(
                    _map(raw_locks[node].get("metadata")).get("name"))):
                log.info("node lock deleted (node gone)", node=node)

    async def _cluster_lock(self, want: LockStatus, raw: dict[str, Any] | None) -> None:
        if raw is None:
            body: Any = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterWorkloadLock",
                         "metadata": {"name": CONTROLLER_NAME},
                         "spec": {"controllerName": CONTROLLER_NAME}}
            await self.kube.create(CLUSTER_LOCKS, body)
            self.log.info("cluster lock created", lock=CONTROLLER_NAME)
        have = LockStatus.from_status(_map(_map(raw).get("status"))) if raw else None
        if have != want or raw is None or not _map(raw).get("status"):
            await self._write_status(CLUSTER_LOCKS, CONTROLLER_NAME, want, have)

    async def _write_status(self, resource: Resource, name: str, want: LockStatus,
                            have: LockStatus | None) -> None:
        """Replace the lock's status (status subresource) with ``want``: a
        lock gone is left alone; a lost race (Conflict) is requeued by the
        runtime and the next reconcile decides again."""
        client = self.kube.client
        obj = await client.get(resource, None, name)
        if obj is None:
            return
        obj["status"] = want.as_status()
        try:
            await client.update_status(resource, obj)
        except NotFound:
            return
        if have is None or have.state != want.state:
            self.log.info("lock state", lock=name, old=have.state if have else None,
                          new=want.state, error=want.error_message, release=want.release)

    async def _create_pod(self, pod: CreatePod) -> None:
        notes: dict[str, str] = {}
        if pod.migration is not None:
            notes[MIGRATION_ANNOTATION] = pod.migration
        if pod.migrated_from is not None:
            notes[MIGRATED_FROM_ANNOTATION] = pod.migrated_from
        name = f"{pod.instance}-{secrets.token_hex(3)}"
        body: Any = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": notes,
                         "labels": {APP_LABEL: APP, INSTANCE_LABEL: pod.instance}},
            "spec": {"nodeName": pod.node, "restartPolicy": "Always",
                     "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "instance", "image": IMAGE}]},
        }
        await self.kube.create(PODS, body)
        self.log.info("instance pod created", pod=name, instance=pod.instance, node=pod.node,
                      migrated_from=pod.migrated_from)


def _service_key(_obj: Mapping[str, Any]) -> list[ObjectKey]:
    return [KEY]


def _of(base: Mapper) -> ClusterMapper:
    """``base`` in a SharedPlane's one API; in a cluster's own API, the
    cluster's key for what ``base`` would wake."""
    def factory(cluster: ObjectKey | None, _client: Any) -> Mapper:
        if cluster is None:
            return base

        def mapper(obj: Mapping[str, Any]) -> list[ObjectKey]:
            return [cluster] if base(obj) else []
        return mapper
    return factory


def _own(lock: Mapping[str, Any]) -> bool:
    return _map(lock.get("spec")).get("controllerName") == CONTROLLER_NAME


def _own_lock_key(lock: Mapping[str, Any]) -> list[ObjectKey]:
    """The service's key for this controller's locks; other controllers' locks
    (watched by the same shared informer) wake nothing."""
    return [KEY] if _own(lock) else []


def _namespace_key(namespace: Mapping[str, Any]) -> list[ObjectKey]:
    return [KEY] if _map(namespace.get("metadata")).get("name") == NAMESPACE else []


def reference_workloads_controller(api_client: Any, *, workers: int = 1,
                                   clock: Clock | None = None,
                                   logger: Any = None,
                                   timings: WorkloadTimings | None = None,
                                   plane: ClusterPlane | None = None) -> Controller:
    """The reference workload controller as a runtime ``Controller`` (see the
    module docstring). Every watched kind — Nodes, NodeMaintenanceRequests,
    ClusterMaintenanceRequests, this controller's locks, its Pods, its
    ConfigMap, its PodDisruptionBudget and its namespace — enqueues the one
    key of the service; ``workers`` is accepted for symmetry with the other
    controllers, but one key is never reconciled by two workers at once.
    ``timings``: how often it looks again without events (None: the
    defaults). ``plane``: the clusters it serves, one service in each
    cluster's own API, keyed by the Cluster (None: the one service of the
    management API)."""
    clock = clock if clock is not None else SystemClock()
    reconciler = ReferenceWorkloads(api_client, logger=logger, timings=timings, plane=plane)
    p = reconciler.plane
    sources: list[Any] = [
        p.source(NODES, _of(_service_key)), p.source(NMRS, _of(_service_key)),
        p.source(CMRS, _of(_service_key)),
        p.source(NODE_LOCKS, _of(_own_lock_key)),
        p.source(CLUSTER_LOCKS, _of(_own_lock_key)),
        p.source(PODS, _of(_service_key), namespace=NAMESPACE),
        p.source(CONFIG_MAPS, _of(_service_key), namespace=NAMESPACE),
        p.source(PDBS, _of(_service_key), namespace=NAMESPACE),
        p.source(NAMESPACES, _of(_namespace_key)),
    ]
    return Controller("reference-workloads", sources, reconciler,
                      workers=workers, clock=clock, logger=logger)


__all__ = ["NAMESPACE", "ReferenceWorkloads", "WorkloadTimings",
           "reference_workloads_controller"]
