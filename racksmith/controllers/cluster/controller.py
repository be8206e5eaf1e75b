"""The Cluster controller: keeps each Cluster's status in line with its Machines.

Owns ``ClusterReconciler`` (read the Cluster, the Machines of its namespace
and its ClusterRelease, ask ``summary.summarize`` for the status, write it
through the status subresource when it changed) and ``cluster_controller``:
a list+watch of Clusters, of Machines mapped to their cluster through
``spec.clusterName``, and of ClusterReleases mapped to the clusters that
run them. Status only: it never changes a Machine.

Events (core v1, about the Cluster, component ``racksmith-cluster``, through
the runtime's ``EventRecorder``), on transitions of the status it writes
only (``events.status_events``): ``ClusterReady`` (Normal) when Ready turns
True, ``ClusterNotReady`` (Warning) when it turns False from True,
``ReleaseNotFound`` and ``MultipleBootstrap`` (Warning) when ReleaseFound or
BootstrapUnique turns False.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from racksmith.controllers.cluster.events import status_events
from racksmith.controllers.cluster.summary import members, summarize
from racksmith.kinds.cluster import Cluster, ClusterStatus, Machine
from racksmith.runtime.clock import Clock, SystemClock
from racksmith.runtime.controller import Controller
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import CLUSTERS, MACHINES, RELEASES
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import KubeSource

CONTROLLER_NAME = "cluster"
FIELD_MANAGER = "racksmith-cluster"
COMPONENT = "racksmith-cluster"


def machine_cluster_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for Machine events: the Machine's Cluster (same namespace)."""
    name = (obj.get("spec") or {}).get("clusterName")
    if not name:
        return []
    return [ObjectKey(key_of(obj).namespace, str(name))]


class ReleaseIndex:
    """Which release each Cluster runs, to map ClusterRelease events to Clusters."""

    def __init__(self) -> None:
        self._release: dict[ObjectKey, str] = {}

    def record(self, key: ObjectKey, release: str) -> None:
        self._release[key] = release

    def forget(self, key: ObjectKey) -> None:
        self._release.pop(key, None)

    def cluster_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        name = key_of(obj).name
        return sorted(k for k, r in self._release.items() if r == name)


class ClusterReconciler:
    """Reconciles one Cluster's status per call (see the module docstring)."""

    def __init__(self, api_client: Any, clock: Clock | None = None, *,
                 logger: Any = None, recorder: EventRecorder | None = None) -> None:
        self.custom = CustomObjectsApi(api_client)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = (recorder if recorder is not None else EventRecorder(
            api_client, COMPONENT, clock=self.clock)).for_component(COMPONENT)
        self.index = ReleaseIndex()
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.cluster")

    async def reconcile(self, key: ObjectKey) -> Result:
        raw = await self._get(key)
        if raw is None:
            self.index.forget(key)
            return Done()
        cluster = Cluster.model_validate(raw)
        self.index.record(key, cluster.spec.release)
        listed = await self.custom.list_namespaced_custom_object(
            MACHINES.group, MACHINES.version, key.namespace, MACHINES.plural)
        machines: list[Machine] = []
        for item in listed.get("items") or []:
            try:
                machines.append(Machine.model_validate(item))
            except ValidationError:
                continue
        release_found = await self._release_exists(cluster.spec.release)
        status = summarize(cluster, members(cluster, machines), release_found,
                           now=self.clock.wall().replace(microsecond=0))
        if cluster.status is not None and _same(cluster.status, status):
            return Done()
        raw["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            written = await self.custom.replace_namespaced_custom_object_status(
                CLUSTERS.group, CLUSTERS.version, key.namespace, CLUSTERS.plural, key.name,
                raw, field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 404:
                return Done()
            if exc.status == 409:
                return RequeueAfter(0.0)
            raise
        self.log.info("cluster status", kind="Cluster", namespace=key.namespace,
                      name=key.name, ready=status.machines_ready, total=status.machines_total,
                      release=status.release)
        await self.recorder.record_all(written if isinstance(written, dict) else raw,
                                       status_events(cluster.status, status))
        return Done()

    async def _get(self, key: ObjectKey) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                CLUSTERS.group, CLUSTERS.version, key.namespace, CLUSTERS.plural, key.name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def _release_exists(self, name: str) -> bool:
        try:
            await self.custom.get_cluster_custom_object(
                RELEASES.group, RELEASES.version, RELEASES.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _same(a: ClusterStatus, b: ClusterStatus) -> bool:
    def plain(s: ClusterStatus) -> dict[str, Any]:
        out = s.model_dump(mode="json")
        for cond in out.get("conditions") or []:
            cond.pop("last_transition_time", None)
        return out
    return plain(a) == plain(b)


def cluster_controller(
    api_client: Any,
    *,
    clock: Clock | None = None,
    workers: int = 1,
    namespace: str | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for Clusters (see the module docstring).

    ``namespace``: watch one namespace only (None: all). ``recorder``: the
    process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = ClusterReconciler(api_client, clock, logger=logger, recorder=recorder)
    sources = [
        KubeSource(api_client, CLUSTERS, namespace=namespace, clock=clock),
        KubeSource(api_client, MACHINES, namespace=namespace, clock=clock,
                   mapper=machine_cluster_keys),
        KubeSource(api_client, RELEASES, clock=clock, mapper=reconciler.index.cluster_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
