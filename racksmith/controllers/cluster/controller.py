"""The Cluster controller: keeps each Cluster's status in line with its Machines.

Owns ``ClusterReconciler`` (read the Cluster, the Machines of its namespace
and its ClusterRelease, ask ``summary.summarize`` for the status, write it
through the status subresource when it changed) and ``cluster_controller``:
watching (shared informers of the runtime ``Client``) Clusters, Machines
mapped to their cluster through ``spec.clusterName``, and ClusterReleases
mapped to the clusters that run them (an index of the Cluster informer by
``spec.release``). Every read comes from those caches; the one write is the
Cluster's status (PUT with the resourceVersion read: a stale read ends in a
``Conflict`` the runtime requeues). Status only: it never changes a Machine.

Events (core v1, about the Cluster, component ``racksmith-cluster``, through
the runtime's ``EventRecorder``), on transitions of the status it writes
only (``events.status_events``): ``ClusterReady`` (Normal) when Ready turns
True, ``ClusterNotReady`` (Warning) when it turns False from True,
``ReleaseNotFound`` and ``MultipleBootstrap`` (Warning) when ReleaseFound or
BootstrapUnique turns False.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.cluster.controlplane import ControlPlaneData
from racksmith.controllers.cluster.events import status_events
from racksmith.controllers.cluster.summary import members, summarize
from racksmith.controlplane.pki import CLUSTER_NAME_LABEL
from racksmith.kinds.cluster import Cluster, Machine
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.conditions import same_but_times, set_condition
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.informer import field_index, field_index_name
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import CLUSTERS, MACHINES, RELEASES, SECRETS
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import Source

CONTROLLER_NAME = "cluster"
ACCESS = (watches(CLUSTERS, MACHINES, RELEASES, SECRETS)
          + writes(CLUSTERS, "update", subresource="status")
          + writes(SECRETS, "create", "update") + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""
FIELD_MANAGER = "racksmith-cluster"
COMPONENT = "racksmith-cluster"


def machine_cluster_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for Machine events: the Machine's Cluster (same namespace)."""
    name = (obj.get("spec") or {}).get("clusterName")
    if not name:
        return []
    return [ObjectKey(key_of(obj).namespace, str(name))]


def secret_cluster_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for Secret events: the Cluster a control-plane Secret belongs to
    (Cluster API's ``cluster.x-k8s.io/cluster-name`` label)."""
    name = ((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME_LABEL)
    return [ObjectKey(key_of(obj).namespace, str(name))] if name else []


VIP_INDEX = field_index_name("spec.apiServer.vip")
"""The Cluster informer's index by VIP: a change of one cluster wakes every
other cluster naming the same VIP (the one refused may now hold it)."""


def vip_peer_keys(client: Client, namespace: str | None) -> Any:
    """Mapper for Cluster events: the Cluster and every other naming its VIP."""

    def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
        own = key_of(obj)
        vip = ((obj.get("spec") or {}).get("apiServer") or {}).get("vip")
        peers = client.indexed(CLUSTERS, VIP_INDEX, str(vip), namespace) if vip else []
        return sorted({own, *(key_of(c) for c in peers)})

    return keys


RELEASE_INDEX = field_index_name("spec.release")
"""The Cluster informer's index by ``spec.release`` (ClusterRelease events → Clusters)."""


def release_cluster_keys(client: Client, namespace: str | None) -> Any:
    """Mapper for ClusterRelease events: the Clusters (of ``namespace``, None:
    all) that run it, from the Cluster informer's index."""

    def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
        name = key_of(obj).name
        return sorted(key_of(c) for c in client.indexed(CLUSTERS, RELEASE_INDEX, name, namespace))

    return keys


class ClusterReconciler:
    """Reconciles one Cluster's status per call (see the module docstring)."""

    def __init__(self, api_client: Any, clock: Clock | None = None, *,
                 logger: Any = None, recorder: EventRecorder | None = None,
                 namespace: str | None = None, clusters: ClusterClients | None = None,
                 identities: tuple[str, ...] = (),
                 reach: Callable[[str], str] | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.client.add_index(CLUSTERS, RELEASE_INDEX, field_index("spec.release"), namespace)
        self.client.add_index(CLUSTERS, VIP_INDEX, field_index("spec.apiServer.vip"), namespace)
        self.control_plane = ControlPlaneData(self.client, namespace, clusters, identities,
                                              now=lambda: self.clock.wall(), reach=reach)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.cluster")

    async def reconcile(self, key: ObjectKey) -> Result:
        client = self.client
        raw = await client.get(CLUSTERS, key.namespace, key.name)
        if raw is None:
            await self.control_plane.forget(key.namespace, key.name)
            return Done()
        cluster = Cluster.model_validate(raw)
        machines: list[Machine] = []
        for item in await client.list(MACHINES, key.namespace):
            try:
                machines.append(Machine.model_validate(item))
            except ValidationError:
                continue
        release_found = await client.get(RELEASES, None, cluster.spec.release) is not None
        now = self.clock.wall().replace(microsecond=0)
        mine = members(cluster, machines)
        status = summarize(cluster, mine, release_found, now=now)
        plane = await self.control_plane.reconcile(raw, cluster, mine)
        status.control_plane_endpoint = plane.endpoint
        if plane.router_id is not None:
            status.virtual_router_id = plane.router_id
        for spec in plane.conditions:
            status.conditions = set_condition(status.conditions, spec, now,
                                              cluster.metadata.generation)
        after: Result = Done() if plane.requeue_after is None \
            else RequeueAfter(plane.requeue_after)
        if same_but_times(cluster.status, status):
            await self.recorder.record_all(raw, plane.events)
            return after
        raw["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            written = await client.update_status(CLUSTERS, raw)
        except NotFound:
            return Done()
        self.log.info("cluster status", kind="Cluster", namespace=key.namespace,
                      name=key.name, ready=status.machines_ready, total=status.machines_total,
                      release=status.release)
        await self.recorder.record_all(written, status_events(cluster.status, status)
                                       + plane.events)
        return after


def cluster_controller(
    api_client: Any,
    *,
    clock: Clock | None = None,
    workers: int = 1,
    namespace: str | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
    clusters: ClusterClients | None = None,
    identities: tuple[str, ...] = (),
    reach: Callable[[str], str] | None = None,
) -> Controller:
    """The runtime Controller for Clusters (see the module docstring).

    ``namespace``: watch one namespace only (None: all). ``recorder``: the
    process's EventRecorder (None: one of its own). ``clusters``: the
    per-cluster tracker whose probes set ``ControlPlaneReachable`` (None:
    endpoints are not probed). ``identities``: the controllers that get an
    identity of their own in every cluster. ``reach``: the address the
    management plane connects to for an endpoint's host (None: itself).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = ClusterReconciler(api_client, clock, logger=logger, recorder=recorder,
                                   namespace=namespace, clusters=clusters,
                                   identities=identities, reach=reach)
    client = reconciler.client
    sources: list[Source] = [
        client.source(CLUSTERS, namespace=namespace, mapper=vip_peer_keys(client, namespace)),
        client.source(MACHINES, namespace=namespace, mapper=machine_cluster_keys),
        client.source(RELEASES, mapper=release_cluster_keys(client, namespace)),
        client.source(SECRETS, namespace=namespace, mapper=secret_cluster_keys),
    ]
    if clusters is not None:
        sources.append(clusters.changes)
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
