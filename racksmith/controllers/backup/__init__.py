"""Backups of the control plane as Kubernetes objects (ControlPlaneBackup).

Modules: ``controller`` (the reconciler, the schedule, pruning, and the
``Snapshotter`` seam the composition root fills with
``racksmith.backup.service.LocalSnapshotter``). See docs/backup.md.
"""

from racksmith.controllers.backup.cluster import ClusterStore
from racksmith.controllers.backup.controller import (
    ACCESS,
    CONTROLLER_NAME,
    FINALIZER,
    BackupReconciler,
    BackupSchedule,
    Snapshotter,
    backup_controller,
    to_prune,
)
from racksmith.controllers.backup.errors import Snapshot, SnapshotFailed

__all__ = [
    "ACCESS",
    "CONTROLLER_NAME",
    "FINALIZER",
    "BackupReconciler",
    "BackupSchedule",
    "ClusterStore",
    "Snapshot",
    "SnapshotFailed",
    "Snapshotter",
    "backup_controller",
    "to_prune",
]
