"""The one place a Volume step is carried out.

Owns, in order: refusing a step whose phase change the state table
(``states.PHASES``) does not list (``IllegalTransition``, before any
write), performing the step's action (each write optimistic, with
the resourceVersion read at the start of the reconcile, so a concurrent
change — the agent's result annotation, another controller — makes it fail
with ``Conflict``, which the runtime requeues, rather than overwrite;
a PersistentVolume already gone or already there is the step done), the Volume status through the
status subresource (only when it changed; a started job is recorded there
before the agent can see it), the Events (through the runtime's
``EventRecorder``: a repeat bumps the count of the Event it repeats; a
Volume is cluster-scoped, so they go to ``default``), the log line, and the runtime
result: after a write, decide again at once; while a job runs, poll; after
a wait, what the planner asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from racksmith.clock import Clock
from racksmith.controllers.volume.names import COMPONENT, FINALIZER
from racksmith.controllers.volume.plan import (
    AddFinalizer,
    CreatePV,
    DeletePV,
    RemoveFinalizer,
    RemovePVFinalizer,
    StartJob,
    Step,
    Wait,
)
from racksmith.controllers.volume.states import PHASES
from racksmith.controllers.volume.status import (
    apply_step,
    phase_of,
    same_status,
    status_events,
)
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.jsoncopy import json_copy
from racksmith.kinds.storage import Volume
from racksmith.kinds.volumejobs import Job, JobOp, new_job
from racksmith.runtime.client import Client
from racksmith.runtime.conditions import EventSpec
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.resources import PVS, VOLUMES
from racksmith.runtime.result import Done, RequeueAfter, Result


@dataclass
class Raw:
    """The objects of a reconcile as read (dicts with their resourceVersion)."""

    volume: dict[str, Any]
    pv: dict[str, Any] | None = None


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _without(finalizers: Any, name: str) -> list[str]:
    return [str(f) for f in finalizers or [] if f != name]


class Committer:
    """Performs steps (see the module docstring)."""

    def __init__(self, client: Client, clock: Clock,
                 job_factory: Callable[[JobOp], Job] = new_job, *,
                 timings: VolumeTimings | None = None,
                 recorder: EventRecorder | None = None) -> None:
        self.client = client
        self.clock = clock
        self.recorder = recorder if recorder is not None else EventRecorder(
            client.api_client, COMPONENT, clock=clock)
        self.job_factory = job_factory
        self.timings = timings if timings is not None else VolumeTimings()

    def now(self) -> datetime:
        return self.clock.wall().replace(microsecond=0)

    async def commit(self, volume: Volume, raw: Raw, step: Step, log: Any,
                     inside: Client | None = None, recorder: EventRecorder | None = None
                     ) -> Result:
        """Carry out ``step`` for ``volume``; raises ``Conflict`` on a lost race,
        ``NotFound`` when the Volume is gone, and ``IllegalTransition`` (before
        doing anything) for a phase change the state table does not list.
        ``inside``: the Client of the Volume's cluster (None: ``client``);
        ``recorder``: its Events' recorder there (None: ``recorder``)."""
        client = inside if inside is not None else self.client
        recorder = recorder if recorder is not None else self.recorder
        action = step.action
        if step.ready is not None:
            PHASES.check(volume.status.phase if volume.status else None, phase_of(step.ready))
        name = volume.metadata.name or ""
        events = list(step.events)
        job: Job | None = None
        match action:
            case Wait():
                pass
            case AddFinalizer():
                body = json_copy(raw.volume)
                body["metadata"]["finalizers"] = [
                    *_without(body["metadata"].get("finalizers"), FINALIZER), FINALIZER]
                await client.update(VOLUMES, body)
            case RemoveFinalizer():
                body = json_copy(raw.volume)
                body["metadata"]["finalizers"] = _without(
                    body["metadata"].get("finalizers"), FINALIZER)
                await client.update(VOLUMES, body)
                log.info("volume released", node=volume.spec.node_name)
                return Done()
            case StartJob(op=op):
                job = self.job_factory(op)
                events.append(EventSpec("Normal", "JobStarted",
                                        f"{op.value} job {job} on node {volume.spec.node_name}"))
            case CreatePV(manifest=manifest):
                try:
                    await client.create(PVS, json_copy(dict(manifest)))
                except AlreadyExists:
                    # Made by an earlier life of this reconcile; the cache
                    # has not seen it yet: decide again once it has.
                    return RequeueAfter(self.timings.job_poll)
            case DeletePV():
                await client.delete(PVS, None, name)
            case RemovePVFinalizer():
                if raw.pv is not None:
                    body = json_copy(raw.pv)
                    body["metadata"]["finalizers"] = _without(
                        body["metadata"].get("finalizers"), FINALIZER)
                    with contextlib.suppress(NotFound):
                        await client.update(PVS, body)
        if not isinstance(action, Wait):
            log.info("volume step", action=type(action).__name__,
                     job=str(job) if job is not None else None)
        if step.ready is not None or job is not None:
            old = volume.status
            new = apply_step(old, step, job=str(job) if job is not None else None,
                             now=self.now(), generation=volume.metadata.generation)
            if not same_status(old, new):
                body = json_copy(raw.volume)
                body["status"] = _dump(new)
                await client.update_status(VOLUMES, body)
                events = status_events(old, step, events) + events
                old_phase = old.phase.value if old and old.phase else ""
                if new.phase is not None and old_phase != new.phase.value:
                    log.info("volume phase", old=old_phase, new=new.phase.value)
        await recorder.record_all(raw.volume, events)
        if isinstance(action, Wait):
            return Done() if action.seconds is None else RequeueAfter(action.seconds)
        if isinstance(action, StartJob):
            return RequeueAfter(self.timings.job_poll)
        return RequeueAfter(0.0)
