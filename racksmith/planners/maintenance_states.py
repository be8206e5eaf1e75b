"""The node maintenance state table: which flow state may follow which within one walk.

Owns ``NODE_FLOW``, the table (``racksmith.runtime.statetable``) of the
node flow's states (``planners.maintenance.NodeState``, what the owners
record in ``status.machines[].state`` of a ClusterUpdatePlan or a
GracefulRebootRequest), and the Mermaid diagram of it that
``docs/maintenance.md`` embeds.

``NodeMaintenance.advance`` walks the flow: it decides, performs the
decision's write, and decides again from a fresh read, until the planner
waits. A transition is a decision that follows the write of the one before
it in the same walk, so the table lists where each write can lead: on along
the checklist (``decide`` returns the first state not satisfied, so a walk
may skip states that are already satisfied), or to ``WaitingForNode`` when
the Node is gone or not Ready. States whose decision only waits
(``WaitingForOther``, ``WaitingForLocks``, ``LockFailed``,
``WaitingForNode``, ``ReadyToFinish``) end a walk and have no successor. A
walk starts where the world is (the flow's memory is on the objects), so
its first decision is any state and is not checked; the world may also have
moved back meanwhile (a lock active again, the LCMMachine re-applying).

What the table refuses: a walk that goes back, i.e. a write followed by a
decision the write cannot lead to (another owner, locks, the drain again
after it was done, …) — the world moved under the walk. ``advance`` then
stops the walk without acting, logs the refusal and reports the state it
was in with the refusal in the message; the next walk starts afresh. Pure.
"""

from __future__ import annotations

from racksmith.planners.maintenance import NodeState as N
from racksmith.runtime.statetable import StateTable, Transition
from racksmith.runtime.statetable import Transition as _t

_NODE = "the Node is gone or not Ready"


def _on(source: N, done: str) -> tuple[Transition[N], ...]:
    """From ``source``, once ``done``: each later state of the checklist."""
    later = {
        N.DRAINING: (N.APPLYING, N.REBOOTING),
        N.BLOCKED: (N.APPLYING, N.REBOOTING),
        N.APPLYING: (N.REBOOTING,),
    }[source]
    whens = {N.APPLYING: "release to apply", N.REBOOTING: "reboot due"}
    return (
        *(_t(source, target, f"{done}, {whens[target]}") for target in later),
        _t(source, N.WAITING_FOR_NODE, f"{done}, {_NODE}"),
        _t(source, N.UNCORDONING, f"{done}, nothing else due"),
        _t(source, N.READY_TO_FINISH, f"{done}, the node was cordoned before"),
    )


NODE_FLOW: StateTable[N] = StateTable(
    what="node maintenance state",
    states=tuple(N),
    transitions=(
        _t(N.REQUESTED, N.WAITING_FOR_OTHER, "another owner created its request first"),
        _t(N.REQUESTED, N.WAITING_FOR_LOCKS, "request created, a NodeWorkloadLock is active"),
        _t(N.REQUESTED, N.LOCK_FAILED, "request created, a NodeWorkloadLock failed"),
        _t(N.REQUESTED, N.DRAINING, "request created, locks inactive"),
        _t(N.REQUESTED, N.WAITING_FOR_NODE, "the Node is gone"),
        _t(N.DRAINING, N.BLOCKED, "drain timeout passed, pods remain"),
        *_on(N.DRAINING, "drained"),
        *_on(N.BLOCKED, "drained"),
        *_on(N.APPLYING, "release applied"),
        _t(N.REBOOTING, N.WAITING_FOR_NODE, _NODE),
        _t(N.REBOOTING, N.UNCORDONING, "booted again, the reboot key released"),
        _t(N.REBOOTING, N.READY_TO_FINISH,
           "booted again, the reboot key released, the node was cordoned before"),
        _t(N.UNCORDONING, N.READY_TO_FINISH, "uncordoned"),
        _t(N.UNCORDONING, N.WAITING_FOR_NODE, _NODE),
    ),
    final=((N.READY_TO_FINISH, "the owner records Done and deletes the request"),),
)
"""The node flow within one walk (see the module docstring)."""
