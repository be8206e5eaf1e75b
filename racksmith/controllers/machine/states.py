"""The Machine state table: every transition of ``status.phase`` the controller may write.

Owns ``PHASES``, the table (``racksmith.runtime.statetable``) derived from
what the planner (``plan.decide``) can decide, and the Mermaid diagram of it
that ``docs/cluster.md`` embeds. ``None`` is a Machine with no phase yet.

The planner takes the phase from the world on every reconcile (the
checklist stops at the first thing not as it should be), so a phase may go
back as well as forward: a Ready machine whose LCMMachine gets a new
generation is Deploying again, one whose host lost its image is Pending,
and any phase may be written first when the status was lost while the
world moved on. A missing Cluster or ClusterRelease keeps the recorded
phase, so that a machine past Pending is never claimed a second host. What
the table refuses: **Failed** (the claimed host vanished) for a machine
that never got past Pending (it claims another host instead), and leaving
**Deleting** (a deletion is never undone).

The committer checks every step that writes the status against the table
before it performs the step's action; a refused transition raises
``IllegalTransition`` (a ``TemporaryError``: logged, decided again with backoff from a
fresh read) and nothing is written. Pure.
"""

from __future__ import annotations

from racksmith.kinds.cluster import MachinePhase as P
from racksmith.runtime.statetable import StateTable
from racksmith.runtime.statetable import Transition as _t

_MISSING = "the claimed host no longer carries the image"
_GONE = "the claimed host is gone or names another machine"
_DELETED = "deletion requested"


PHASES: StateTable[P] = StateTable(
    what="Machine status.phase",
    states=(P.PENDING, P.PROVISIONING, P.DEPLOYING, P.READY, P.FAILED, P.DELETING),
    transitions=(
        _t(None, P.PENDING, "new machine, finding the Cluster, release and a host"),
        _t(None, P.PROVISIONING, "first status, the claimed host already carries the image"),
        _t(None, P.DEPLOYING, "first status, the claimed host is already provisioned"),
        _t(None, P.READY, "first status, everything already in place"),
        _t(None, P.DELETING, "deleted before any status"),
        _t(P.PENDING, P.PROVISIONING, "image, user data and online set on the host"),
        _t(P.PENDING, P.DEPLOYING, "the claimed host is already provisioned"),
        _t(P.PENDING, P.READY, "everything already in place"),
        _t(P.PENDING, P.DELETING, _DELETED),
        _t(P.PROVISIONING, P.PENDING, _MISSING),
        _t(P.PROVISIONING, P.DEPLOYING, "host provisioned"),
        _t(P.PROVISIONING, P.READY, "host provisioned, agent and Node Ready"),
        _t(P.PROVISIONING, P.FAILED, _GONE),
        _t(P.PROVISIONING, P.DELETING, _DELETED),
        _t(P.DEPLOYING, P.PENDING, _MISSING),
        _t(P.DEPLOYING, P.PROVISIONING, "the host is provisioning again"),
        _t(P.DEPLOYING, P.READY, "agent Ready at the current generation, Node Ready"),
        _t(P.DEPLOYING, P.FAILED, _GONE),
        _t(P.DEPLOYING, P.DELETING, _DELETED),
        _t(P.READY, P.PENDING, _MISSING),
        _t(P.READY, P.PROVISIONING, "the host is provisioning again"),
        _t(P.READY, P.DEPLOYING, "new LCMMachine generation, or the Node not Ready"),
        _t(P.READY, P.FAILED, _GONE),
        _t(P.READY, P.DELETING, _DELETED),
        _t(P.FAILED, P.PENDING, "the host is back without the image"),
        _t(P.FAILED, P.PROVISIONING, "the host names this machine again, provisioning"),
        _t(P.FAILED, P.DEPLOYING, "the host names this machine again, provisioned"),
        _t(P.FAILED, P.READY, "the host names this machine again, everything in place"),
        _t(P.FAILED, P.DELETING, _DELETED),
    ),
    final=((P.DELETING, "everything released, finalizer removed"),),
)
"""``Machine status.phase``: the legal transitions (see the module docstring)."""
