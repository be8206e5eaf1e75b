"""The ControlPlaneBackup controller: takes the backups asked for, keeps the schedule.

Owns ``BackupReconciler`` and ``backup_controller``. A ControlPlaneBackup
(cluster-scoped) is asked for by a user (``kubectl create``, reason Manual),
by the schedule (``racksmith up --backup-every``, reason Scheduled) or by the
update controller before the first step of a plan (reason PreUpdate). For
each, the controller

1. adds its finalizer (so deleting the object removes its file);
2. writes phase Running, asks the injected :class:`Snapshotter` for the
   backup (the composition root's writes and verifies a file of the data
   dir: :mod:`racksmith.backup.service`), and writes phase Completed with
   the file, size, sha256, resourceVersion, object count and ``verifiedAt``
   — or Failed with the reason (never a secret: the snapshotter's errors
   name files and parts only);
3. prunes: of the Scheduled backups it keeps the newest ``keep``
   (``BackupSchedule.keep``), never the newest Completed one; Manual and
   PreUpdate backups stay until someone deletes them.

A backup found Running after a restart is taken again (the snapshotter
writes under a temporary name, so no half file is left; a file already
written under the backup's name is verified and kept, so nothing is taken
twice). The schedule is a singleton key (``@schedule``): it creates
``scheduled-<time>`` when the newest Scheduled backup is ``every`` seconds
old (or there is none), then waits until the next one is due.

Watches ControlPlaneBackups. Writes ControlPlaneBackups (create: the
schedule; update: the finalizer; status; delete: pruning) and Events
(``BackupCompleted``, ``BackupFailed``, component ``racksmith-backup``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.backup.cluster import cluster_store
from racksmith.kinds.lcm import (
    BackupPhase,
    BackupReason,
    ControlPlaneBackup,
)
from racksmith.runtime.access import EVENTS, reads, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import AlreadyExists
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import BACKUPS, CLUSTERS, MACHINES, SECRETS
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import StaticSource
from racksmith.snapshots import SnapshotFailed, Snapshotter

_MIN = datetime.min.replace(tzinfo=UTC)
CONTROLLER_NAME = "backup"
COMPONENT = "racksmith-backup"
FIELD_MANAGER = "racksmith-backup"
FINALIZER = "lcm.racksmith.io/backup-file"
SCHEDULE_KEY = ObjectKey("", "@schedule")
API_VERSION = ControlPlaneBackup.info.api_version
ACCESS = (watches(BACKUPS) + writes(BACKUPS, "create", "update", "delete")
          + writes(BACKUPS, "update", subresource="status")
          + reads(CLUSTERS, MACHINES, SECRETS) + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""


@dataclass(frozen=True)
class BackupSchedule:
    """``every``: seconds between scheduled backups (None: no schedule);
    ``keep``: scheduled backups kept (at least 1)."""

    every: float | None = None
    keep: int = 7

    def __post_init__(self) -> None:
        if self.every is not None and self.every <= 0:
            raise ValueError("the backup interval must be > 0")
        if self.keep < 1:
            raise ValueError("at least one backup must be kept")


def to_prune(backups: Sequence[ControlPlaneBackup], keep: int) -> list[str]:
    """The Scheduled backups beyond the newest ``keep`` (finished ones only),
    never the newest Completed backup of all. Pure."""
    finished = [b for b in backups if b.spec.reason == BackupReason.SCHEDULED and b.status
                and b.status.phase in (BackupPhase.COMPLETED, BackupPhase.FAILED)
                and b.metadata.deletion_timestamp is None]
    finished.sort(key=lambda b: (b.metadata.creation_timestamp or _MIN,
                                 b.metadata.name or ""), reverse=True)
    completed = [b for b in backups if b.status and b.status.phase == BackupPhase.COMPLETED]
    newest = max(completed, key=lambda b: (b.status.completed_at if b.status and
                                           b.status.completed_at else _MIN,
                                           b.metadata.name or ""), default=None)
    keep_name = newest.metadata.name if newest is not None else None
    return [b.metadata.name or "" for b in finished[keep:] if b.metadata.name != keep_name]


class BackupReconciler:
    """See the module docstring."""

    def __init__(self, api_client: Any, snapshotter: Snapshotter, *,
                 schedule: BackupSchedule | None = None, clock: Clock | None = None,
                 recorder: EventRecorder | None = None, logger: Any = None,
                 reach: Callable[[str], str] | None = None) -> None:
        self.reach = reach
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.snapshotter = snapshotter
        self.schedule = schedule if schedule is not None else BackupSchedule()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.backup")

    async def reconcile(self, key: ObjectKey) -> Result:
        if key == SCHEDULE_KEY:
            return await self._scheduled()
        raw = await self.client.get(BACKUPS, None, key.name)
        if raw is None:
            return Done()
        try:
            backup = ControlPlaneBackup.model_validate(raw)
        except ValidationError:
            return Done()
        meta = backup.metadata
        if meta.deletion_timestamp is not None:
            if FINALIZER in meta.finalizers:
                if backup.status and backup.status.file:
                    await self.snapshotter.remove(backup.status.file)
                body = copy.deepcopy(raw)
                body["metadata"]["finalizers"] = [f for f in meta.finalizers if f != FINALIZER]
                await self.client.update(BACKUPS, body)
            return Done()
        if FINALIZER not in meta.finalizers:
            body = copy.deepcopy(raw)
            body["metadata"]["finalizers"] = [*meta.finalizers, FINALIZER]
            await self.client.update(BACKUPS, body)
            return Done()
        phase = backup.status.phase if backup.status else None
        if phase in (None, BackupPhase.PENDING, BackupPhase.RUNNING):
            await self._take(raw, backup)
        await self._prune()
        return Done()

    async def _take(self, raw: dict[str, Any], backup: ControlPlaneBackup) -> None:
        name = backup.metadata.name or ""
        now = self.clock.wall().replace(microsecond=0)
        raw = copy.deepcopy(raw)
        raw["status"] = {"phase": BackupPhase.RUNNING.value, "startedAt": _stamp(now)}
        raw = await self.client.update_status(BACKUPS, raw)
        log = self.log.bind(kind="ControlPlaneBackup", name=name)
        try:
            target = backup.spec.cluster
            if target is None:
                snap = await self.snapshotter.take(name)
            else:
                store = await cluster_store(self.client, target.namespace, target.name,
                                            self.reach)
                snap = await self.snapshotter.take_cluster(name, store)
        except SnapshotFailed as exc:
            raw["status"] = {**raw["status"], "phase": BackupPhase.FAILED.value,
                             "message": str(exc)[:1000],
                             "completedAt": _stamp(self.clock.wall().replace(microsecond=0))}
            written = await self.client.update_status(BACKUPS, raw)
            log.warning("backup failed", error=str(exc))
            await self.recorder.record(written, "Warning", "BackupFailed", str(exc))
            return
        raw["status"] = {**raw["status"], "phase": BackupPhase.COMPLETED.value,
                         "file": snap.file, "size": snap.size, "sha256": snap.sha256,
                         "resourceVersion": snap.resource_version, "objects": snap.objects,
                         "encrypted": snap.encrypted,
                         "completedAt": _stamp(self.clock.wall().replace(microsecond=0)),
                         "verifiedAt": _stamp(snap.verified_at.replace(microsecond=0))}
        written = await self.client.update_status(BACKUPS, raw)
        log.info("backup completed", file=snap.file, size=snap.size,
                 resource_version=snap.resource_version)
        await self.recorder.record(written, "Normal", "BackupCompleted",
                                   f"{snap.file}: {snap.objects} objects at resourceVersion "
                                   f"{snap.resource_version}, {snap.size} bytes")

    async def _all(self) -> list[ControlPlaneBackup]:
        out: list[ControlPlaneBackup] = []
        for raw in await self.client.list(BACKUPS, copy=False):
            try:
                out.append(ControlPlaneBackup.model_validate(raw))
            except ValidationError:
                continue
        return out

    async def _prune(self) -> None:
        for name in to_prune(await self._all(), self.schedule.keep):
            self.log.info("pruning a scheduled backup", kind="ControlPlaneBackup", name=name)
            await self.client.delete(BACKUPS, None, name)

    async def _scheduled(self) -> Result:
        every = self.schedule.every
        if every is None:
            return Done()
        now = self.clock.wall()
        scheduled = [b.metadata.creation_timestamp for b in await self._all()
                     if b.spec.reason == BackupReason.SCHEDULED and b.metadata.creation_timestamp]
        newest = max(scheduled, default=None)
        if newest is not None:
            left = every - (now - newest).total_seconds()
            if left > 0:
                return RequeueAfter(left)
        name = f"scheduled-{now.strftime('%Y%m%d-%H%M%S')}"
        try:
            await self.client.create(BACKUPS, {
                "apiVersion": API_VERSION, "kind": "ControlPlaneBackup",
                "metadata": {"name": name}, "spec": {"reason": BackupReason.SCHEDULED.value}})
        except AlreadyExists:
            pass
        self.log.info("scheduled backup asked for", kind="ControlPlaneBackup", name=name)
        return RequeueAfter(every)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def backup_controller(api_client: Any, snapshotter: Snapshotter, *,
                      schedule: BackupSchedule | None = None, clock: Clock | None = None,
                      recorder: EventRecorder | None = None, logger: Any = None,
                      reach: Callable[[str], str] | None = None) -> Controller:
    """The runtime Controller of ControlPlaneBackups (see the module docstring);
    one worker: backups are taken one at a time. ``reach``: where the
    management plane connects for a cluster member's address (None: itself)."""
    clock = clock if clock is not None else SystemClock()
    reconciler = BackupReconciler(api_client, snapshotter, schedule=schedule, clock=clock,
                                  recorder=recorder, logger=logger, reach=reach)
    sources: list[Any] = [reconciler.client.source(BACKUPS), StaticSource(SCHEDULE_KEY)]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=1, clock=clock)
