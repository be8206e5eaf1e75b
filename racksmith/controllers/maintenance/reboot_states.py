"""The GracefulRebootRequest state table: every transition of ``status.phase`` the
controller may write.

Owns ``REBOOT_PHASES``, the table (``racksmith.runtime.statetable``) derived
from ``reboot.build_status``, and the Mermaid diagram of it that
``docs/maintenance.md`` embeds. ``None`` is a request with no status yet.

``build_status`` takes the phase from the request's machines on every
reconcile: **Completed** when every machine to reboot (``spec.machines``,
or every Machine of the cluster) is recorded Done and no NodeMaintenanceRequest
of the request is held any more (the last machine's is deleted right after its
Done is written), **Failed** when they are and a listed machine does not
exist, else **InProgress**. Nothing is
remembered beyond the per-machine Done, so a finished request opens again
when there is a machine it has not rebooted (one joins the cluster, or
``spec.machines`` is edited) and Failed recovers when the missing machine
is created or unlisted: every pair of the three is a transition. The table
refuses the plan phases a reboot never writes (NotStarted, AutoPaused).

The controller checks the phase against the table before it writes the
status; a refused transition raises ``IllegalTransition`` (a
``TemporaryError``: logged, decided again with backoff from a
fresh read) and the status is not written. Pure.
"""

from __future__ import annotations

from racksmith.kinds.lcm import PlanPhase as P
from racksmith.runtime.statetable import StateTable
from racksmith.runtime.statetable import Transition as _t

_ALL_DONE = "every machine to reboot is Done"
_MISSING = "every existing machine is Done, a listed machine does not exist"
_NEW = "a machine not rebooted yet (joined the cluster or listed)"


REBOOT_PHASES: StateTable[P] = StateTable(
    what="GracefulRebootRequest status.phase",
    states=(P.IN_PROGRESS, P.COMPLETED, P.FAILED),
    transitions=(
        _t(None, P.IN_PROGRESS, "created, machines to reboot"),
        _t(None, P.COMPLETED, "created, no machine to reboot"),
        _t(None, P.FAILED, "created, only machines that do not exist"),
        _t(P.IN_PROGRESS, P.COMPLETED, _ALL_DONE),
        _t(P.IN_PROGRESS, P.FAILED, _MISSING),
        _t(P.COMPLETED, P.IN_PROGRESS, _NEW),
        _t(P.COMPLETED, P.FAILED, "a machine that does not exist is listed"),
        _t(P.FAILED, P.IN_PROGRESS, f"{_NEW}, or the missing one created"),
        _t(P.FAILED, P.COMPLETED, "the missing machine unlisted"),
    ),
)
"""``GracefulRebootRequest status.phase``: the legal transitions (see the module docstring)."""
