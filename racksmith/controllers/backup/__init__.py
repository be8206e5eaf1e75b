"""Backups of the control plane as Kubernetes objects (ControlPlaneBackup).

Modules: ``controller`` (the reconciler, the schedule, pruning, and the
``racksmith.snapshots.Snapshotter`` port the composition root fills with
``racksmith.backup.service.LocalSnapshotter``). See docs/backup.md.
"""

from racksmith.controllers.backup.controller import (
    ACCESS,
    CONTROLLER_NAME,
    FINALIZER,
    BackupReconciler,
    BackupSchedule,
    backup_controller,
    to_prune,
)
from racksmith.snapshots import ClusterStore, Snapshot, SnapshotFailed, Snapshotter

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
