"""The Volume state table: every transition of ``status.phase`` the controller may write.

Owns ``PHASES``, the table (``racksmith.runtime.statetable``) derived from
what the planner (``plan.decide``) can decide, and the Mermaid diagram of it
that ``docs/volumes.md`` embeds. The phase summarizes the Ready condition
(``status.phase_of``); ``None`` is a Volume with no phase yet.

The planner decides from the world on every reconcile, so a phase may go
back: an Available Volume whose StorageClass, Node or PersistentVolume
fails is Failed, and one that failed only validation recovers. What the
table refuses: leaving **Terminating** for anything but Failed (the
unprepare job failed), since a deletion is never undone.

The committer checks every step that writes the Ready condition against the
table before it performs the step's action; a refused transition raises
``IllegalTransition`` (a ``TemporaryError``: logged, decided again with backoff from a
fresh read) and nothing is written. Pure.
"""

from __future__ import annotations

from racksmith.kinds.storage import VolumePhase as P
from racksmith.runtime.statetable import StateTable
from racksmith.runtime.statetable import Transition as _t

_DELETED = "deletion requested"


PHASES: StateTable[P] = StateTable(
    what="Volume status.phase",
    states=(P.PENDING, P.AVAILABLE, P.FAILED, P.TERMINATING),
    transitions=(
        _t(None, P.PENDING, "prepare job started"),
        _t(None, P.AVAILABLE, "its PersistentVolume exists already"),
        _t(None, P.FAILED, "StorageClass or Node not found, or the PV belongs to another owner"),
        _t(None, P.TERMINATING, "deleted before any status"),
        _t(P.PENDING, P.AVAILABLE, "prepare job done, PersistentVolume created"),
        _t(P.PENDING, P.FAILED, "prepare job failed, or StorageClass or Node not found"),
        _t(P.PENDING, P.TERMINATING, _DELETED),
        _t(P.AVAILABLE, P.PENDING, "PersistentVolume gone and no device recorded, prepare again"),
        _t(P.AVAILABLE, P.FAILED, "PersistentVolume Failed or deleted, or StorageClass or "
           "Node not found"),
        _t(P.AVAILABLE, P.TERMINATING, _DELETED),
        _t(P.FAILED, P.PENDING, "StorageClass and Node found again, prepare job started"),
        _t(P.FAILED, P.AVAILABLE, "StorageClass and Node found again, PersistentVolume healthy "
           "or created again"),
        _t(P.FAILED, P.TERMINATING, "deletion requested, or another unprepare job"),
        _t(P.TERMINATING, P.FAILED, "unprepare job failed"),
    ),
    final=((P.TERMINATING, "device released, finalizer removed"),),
)
"""``Volume status.phase``: the legal transitions (see the module docstring)."""
