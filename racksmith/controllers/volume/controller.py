"""The Volume controller: reconciler and runtime wiring.

Owns ``VolumeReconciler`` (read the Volume, its StorageClass, Node and
PersistentVolume into ``Observed``, ask ``plan.decide`` for the next step,
hand it to the committer) and ``volume_controller``, which builds the
runtime ``Controller``. It talks to the API through the runtime
``Client``: it watches (shared informers) Volumes (the agent's result
annotation is a Volume event), PersistentVolumes (mapped to their owning
Volume), StorageClasses and Nodes (mapped, through two indexes of the
Volume informer, to the Volumes that name them and are not yet deployed:
``status.phase`` unset or ``Failed``, so Node heartbeats do not wake
Volumes at rest); it reads them from the cache and writes Volumes (object
and status) and PersistentVolumes (see ``commit``). A write that lost a
race raises ``Conflict``, which the runtime requeues.

One step per reconcile; a step that wrote something asks to be reconciled
again at once, so a controller killed at any moment picks up from the
world: the job in ``status.job``, the result annotation, the PV.

Events (core v1, about the Volume, in ``default`` since Volumes are
cluster-scoped, component ``racksmith-volume``, through the runtime's
``EventRecorder``): a Normal one named after each new phase, a Warning
when Ready turns False (its reason: ``CreationError``...), and the
actions' own (``JobStarted``, ``PersistentVolumeCreated``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.volume import names as n
from racksmith.controllers.volume.commit import Committer, Raw
from racksmith.controllers.volume.observed import Observed, PVView, StorageClassView
from racksmith.controllers.volume.plan import decide
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.kinds.storage import GROUP, Volume
from racksmith.kinds.volumejobs import Job, JobOp, JobResult, new_job
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import Mapper, ObjectKey, key_of, owner_keys, self_keys
from racksmith.runtime.planes import (
    ClusterMapper,
    ClusterPlane,
    ClusterUnavailable,
    SharedPlane,
    in_cluster_key,
    qualified,
    split_key,
)
from racksmith.runtime.resources import NODES, PVS, STORAGE_CLASSES, VOLUMES
from racksmith.runtime.result import Done, Result

CONTROLLER_NAME = "volume"
ACCESS = (watches(VOLUMES, PVS, NODES, STORAGE_CLASSES)
          + writes(VOLUMES, "update") + writes(VOLUMES, "update", subresource="status")
          + writes(PVS, "create", "update", "delete")
          + writes(PVS, "update", subresource="status") + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""

#: Volume informer indexes: the StorageClass / Node a not-yet-deployed Volume names.
WAITING_ON_CLASS = "waiting-on-storage-class"
WAITING_ON_NODE = "waiting-on-node"


def _waiting(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The spec of a Volume that may be waiting for its StorageClass or Node."""
    status = obj.get("status")
    if isinstance(status, Mapping) and status.get("phase") not in (None, "Failed"):
        return None
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else None


def _waiting_on_class(obj: Mapping[str, Any]) -> list[str]:
    spec = _waiting(obj)
    return [str(spec["storageClassName"])] if spec and spec.get("storageClassName") else []


def _waiting_on_node(obj: Mapping[str, Any]) -> list[str]:
    spec = _waiting(obj)
    return [str(spec["nodeName"])] if spec and spec.get("nodeName") else []


def _indexed(client: Client) -> Client:
    """``client`` with the indexes the controller's mappers read (idempotent)."""
    client.add_index(VOLUMES, WAITING_ON_CLASS, _waiting_on_class)
    client.add_index(VOLUMES, WAITING_ON_NODE, _waiting_on_node)
    return client


def _waiting_keys(index: str) -> ClusterMapper:
    """The Volumes of a cluster waiting on the object (their index ``index``)."""
    def factory(cluster: ObjectKey | None, client: Client) -> Mapper:
        inside = _indexed(client)

        def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
            return sorted(in_cluster_key(cluster, key_of(v).name)
                          for v in inside.indexed(VOLUMES, index, key_of(obj).name))
        return keys
    return factory


class VolumeReconciler:
    """Reconciles one Volume per call (see the module docstring)."""

    def __init__(self, api_client: Any, *, clock: Clock | None = None, logger: Any = None,
                 job_factory: Callable[[JobOp], Job] = new_job,
                 timings: VolumeTimings | None = None,
                 recorder: EventRecorder | None = None,
                 plane: ClusterPlane | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timings = timings if timings is not None else VolumeTimings()
        self.client: Client = as_client(api_client).with_field_manager(n.FIELD_MANAGER)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.recorder = component_recorder(recorder, self.client, n.COMPONENT, clock=self.clock)
        self.committer = Committer(self.client, self.clock, job_factory, timings=self.timings,
                                   recorder=self.recorder)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.volume")

    async def reconcile(self, key: ObjectKey) -> Result:
        cluster, name = split_key(key)
        client = await self.plane.client(cluster) if cluster is not None else self.client
        if client is None:
            raise ClusterUnavailable(cluster or key)
        inside = client.with_field_manager(n.FIELD_MANAGER)
        raw_volume = await inside.get(VOLUMES, None, name)
        if raw_volume is None:
            return Done()
        log = self.log.bind(kind="Volume", name=name)
        if cluster is not None:
            log = log.bind(cluster=str(cluster))
        try:
            volume = Volume.model_validate(raw_volume)
        except ValidationError as exc:
            # The schema refuses such objects at admission; nothing can be acted on.
            log.error("volume does not validate", errors=exc.error_count())
            return Done()
        observed, raw = await self._observe(inside, volume, raw_volume)
        step = decide(observed)
        recorder = self.recorder.for_component(n.COMPONENT, client=inside) \
            if cluster is not None else None
        try:
            return await self.committer.commit(volume, raw, step, log, inside, recorder)
        except NotFound:
            return Done()  # the Volume went away under us

    async def _observe(self, inside: Client, volume: Volume, raw_volume: dict[str, Any]
                       ) -> tuple[Observed, Raw]:
        spec, name = volume.spec, volume.metadata.name or ""
        raw = Raw(volume=raw_volume, pv=await inside.get(PVS, None, name))
        raw_class = await inside.get(STORAGE_CLASSES, None, spec.storage_class_name)
        observed = Observed(
            volume=volume,
            storage_class=StorageClassView.from_raw(raw_class) if raw_class else None,
            node_exists=await inside.get(NODES, None, spec.node_name) is not None,
            pv=PVView.from_raw(raw.pv) if raw.pv is not None else None,
            result=JobResult.from_annotations(volume.metadata.annotations),
            timings=self.timings,
        )
        return observed, raw


def volume_controller(api_client: Any, *, clock: Clock | None = None, workers: int = 2,
                      logger: Any = None, timings: VolumeTimings | None = None,
                      recorder: EventRecorder | None = None,
                      plane: ClusterPlane | None = None) -> Controller:
    """The runtime Controller for Volumes (see the module docstring).

    ``timings``: how often it looks again without events (None: the defaults).
    ``recorder``: the process's EventRecorder (None: one of its own).
    ``plane``: where the Volumes, their PersistentVolumes, StorageClasses and
    Nodes are (each cluster's own API; None: the management API). Its keys
    then name the cluster (``racksmith.runtime.planes.in_cluster_key``).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = VolumeReconciler(api_client, clock=clock, logger=logger, timings=timings,
                                  recorder=recorder, plane=plane)
    plane_ = reconciler.plane
    sources = [
        plane_.source(VOLUMES, qualified(self_keys)),
        plane_.source(PVS, qualified(owner_keys(n.VOLUME_KIND, GROUP, controller_only=True))),
        plane_.source(STORAGE_CLASSES, _waiting_keys(WAITING_ON_CLASS)),
        plane_.source(NODES, _waiting_keys(WAITING_ON_NODE)),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock,
                      logger=logger)
