"""The Volume controller: reconciler and runtime wiring.

Owns ``VolumeReconciler`` (read the Volume, its StorageClass, Node and
PersistentVolume into ``Observed``, ask ``plan.decide`` for the next step,
hand it to the committer) and ``volume_controller``, which builds the
runtime ``Controller``: a list+watch of Volumes (the agent's result
annotation is a Volume event) plus PersistentVolumes mapped to their
owning Volume and StorageClasses and Nodes mapped to the Volumes waiting
for them. Talks to the API only through ``kube``.

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

from collections.abc import Callable
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.controllers.volume import names as n
from racksmith.controllers.volume.commit import Committer, Raw
from racksmith.controllers.volume.index import VolumeIndex
from racksmith.controllers.volume.jobs import Job, JobOp, JobResult, new_job
from racksmith.controllers.volume.kube import Conflict, Kube
from racksmith.controllers.volume.observed import Observed, PVView, StorageClassView
from racksmith.controllers.volume.plan import decide, validation_error
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.kinds.storage import GROUP, Volume
from racksmith.runtime.clock import Clock, SystemClock
from racksmith.runtime.controller import Controller
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.keys import ObjectKey, owner_keys
from racksmith.runtime.resources import NODES, PVS, STORAGE_CLASSES, VOLUMES
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import KubeSource

CONTROLLER_NAME = "volume"


class VolumeReconciler:
    """Reconciles one Volume per call (see the module docstring)."""

    def __init__(self, api_client: Any, *, clock: Clock | None = None, logger: Any = None,
                 job_factory: Callable[[JobOp], Job] = new_job,
                 timings: VolumeTimings | None = None,
                 recorder: EventRecorder | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timings = timings if timings is not None else VolumeTimings()
        self.kube = Kube(api_client, n.FIELD_MANAGER)
        self.index = VolumeIndex()
        self.recorder = (recorder if recorder is not None else EventRecorder(
            api_client, n.COMPONENT, clock=self.clock)).for_component(n.COMPONENT)
        self.committer = Committer(self.kube, self.clock, job_factory, timings=self.timings,
                                   recorder=self.recorder)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.volume")

    async def reconcile(self, key: ObjectKey) -> Result:
        raw_volume = await self.kube.get_volume(key.name)
        if raw_volume is None:
            self.index.forget(key)
            return Done()
        log = self.log.bind(kind="Volume", name=key.name)
        try:
            volume = Volume.model_validate(raw_volume)
        except ValidationError as exc:
            # The schema refuses such objects at admission; nothing can be acted on.
            log.error("volume does not validate", errors=exc.error_count())
            return Done()
        observed, raw = await self._observe(volume, raw_volume)
        self.index.record(key, volume.spec.storage_class_name, volume.spec.node_name,
                          validation_error(observed) is not None)
        step = decide(observed)
        try:
            return await self.committer.commit(volume, raw, step, log)
        except Conflict:
            log.debug("conflicting write, deciding again")
            return RequeueAfter(0.0)

    async def _observe(self, volume: Volume, raw_volume: dict[str, Any]
                       ) -> tuple[Observed, Raw]:
        spec, name = volume.spec, volume.metadata.name or ""
        raw = Raw(volume=raw_volume, pv=await self.kube.get_pv(name))
        raw_class = await self.kube.get_storage_class(spec.storage_class_name)
        observed = Observed(
            volume=volume,
            storage_class=StorageClassView.from_raw(raw_class) if raw_class else None,
            node_exists=await self.kube.node_exists(spec.node_name),
            pv=PVView.from_raw(raw.pv) if raw.pv is not None else None,
            result=JobResult.from_annotations(volume.metadata.annotations),
            timings=self.timings,
        )
        return observed, raw


def volume_controller(api_client: Any, *, clock: Clock | None = None, workers: int = 2,
                      logger: Any = None, timings: VolumeTimings | None = None,
                      recorder: EventRecorder | None = None) -> Controller:
    """The runtime Controller for Volumes (see the module docstring).

    ``timings``: how often it looks again without events (None: the defaults).
    ``recorder``: the process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = VolumeReconciler(api_client, clock=clock, logger=logger, timings=timings,
                                  recorder=recorder)
    index = reconciler.index
    sources = [
        KubeSource(api_client, VOLUMES, clock=clock),
        KubeSource(api_client, PVS, clock=clock,
                   mapper=owner_keys(n.VOLUME_KIND, GROUP, controller_only=True)),
        KubeSource(api_client, STORAGE_CLASSES, clock=clock, mapper=index.storage_class_keys),
        KubeSource(api_client, NODES, clock=clock, mapper=index.node_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock,
                      logger=logger)
