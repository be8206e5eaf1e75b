"""The ClusterUpdatePlan state table: every transition of ``status.phase`` the
controller may write.

Owns ``PLAN_PHASES``, the table (``racksmith.runtime.statetable``) derived
from ``plan.plan_status``, and the Mermaid diagram of it that
``docs/maintenance.md`` embeds. ``None`` is a plan with no status yet (just
created).

``plan_status`` takes the phase from what a reconcile sees: **Completed**
when every machine of the schedule is done, else **AutoPaused** while an
UpdateAutoPause alert fires, else **InProgress** once a machine began or a
step is commenced, else **NotStarted**. So a plan moves between the last
three both ways (the operator may withdraw ``commence`` before any machine
began, an alert auto-pauses and ends); what the table refuses is leaving
**Completed**: a completed plan is never driven again (a new update makes a
new plan). ``PlanPhase.FAILED`` is never written for a plan.

The controller checks the phase against the table before it finishes
machines or writes the status; a refused transition raises
``IllegalTransition`` (a ``TemporaryError``: logged, decided again with backoff from a
fresh read) and the status is not written. Pure.
"""

from __future__ import annotations

from racksmith.kinds.lcm import PlanPhase as P
from racksmith.runtime.statetable import StateTable
from racksmith.runtime.statetable import Transition as _t

_DONE = "every machine of the schedule is done"
_FIRES = "an UpdateAutoPause alert fires"


PLAN_PHASES: StateTable[P] = StateTable(
    what="ClusterUpdatePlan status.phase",
    states=(P.NOT_STARTED, P.IN_PROGRESS, P.AUTO_PAUSED, P.COMPLETED),
    transitions=(
        _t(None, P.NOT_STARTED, "created, no step commenced"),
        _t(None, P.IN_PROGRESS, "created with autoCommence"),
        _t(None, P.AUTO_PAUSED, f"created while {_FIRES}"),
        _t(None, P.COMPLETED, f"created, {_DONE} already"),
        _t(P.NOT_STARTED, P.IN_PROGRESS, "a step commenced"),
        _t(P.NOT_STARTED, P.AUTO_PAUSED, _FIRES),
        _t(P.NOT_STARTED, P.COMPLETED, f"{_DONE} already"),
        _t(P.IN_PROGRESS, P.NOT_STARTED, "every commence withdrawn before a machine began"),
        _t(P.IN_PROGRESS, P.AUTO_PAUSED, _FIRES),
        _t(P.IN_PROGRESS, P.COMPLETED, _DONE),
        _t(P.AUTO_PAUSED, P.NOT_STARTED, "alerts resolved, nothing began or is commenced"),
        _t(P.AUTO_PAUSED, P.IN_PROGRESS, "alerts resolved, a machine began or a step is "
           "commenced"),
        _t(P.AUTO_PAUSED, P.COMPLETED, _DONE),
    ),
    final=((P.COMPLETED, "never driven again"),),
)
"""``ClusterUpdatePlan status.phase``: the legal transitions (see the module docstring)."""
