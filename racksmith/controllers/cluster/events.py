"""The Cluster controller's Events: what a status change is worth telling.

Owns ``status_events(old, new)``, pure: the Events (about the Cluster) the
change of its status from ``old`` to ``new`` is worth — transitions only,
since the controller reconciles a cluster on every Machine change:

- ``ClusterReady`` (Normal): the ``Ready`` condition turned True;
- ``ClusterNotReady`` (Warning): ``Ready`` turned False from True (a new
  cluster that is not Ready yet is no news);
- ``ReleaseNotFound`` (Warning): ``ReleaseFound`` turned False;
- ``MultipleBootstrap`` (Warning): ``BootstrapUnique`` turned False.
"""

from __future__ import annotations

from racksmith.controllers.cluster.summary import BOOTSTRAP_UNIQUE, READY, RELEASE_FOUND
from racksmith.kinds.cluster import ClusterStatus
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.runtime.conditions import EventSpec, find

CLUSTER_READY = "ClusterReady"
CLUSTER_NOT_READY = "ClusterNotReady"
RELEASE_NOT_FOUND = "ReleaseNotFound"
MULTIPLE_BOOTSTRAP = "MultipleBootstrap"

_WARNINGS = ((RELEASE_FOUND, RELEASE_NOT_FOUND), (BOOTSTRAP_UNIQUE, MULTIPLE_BOOTSTRAP))


def _status(cond: Condition | None) -> ConditionStatus | None:
    return cond.status if cond is not None else None


def status_events(old: ClusterStatus | None, new: ClusterStatus) -> list[EventSpec]:
    """The Events the change from ``old`` to ``new`` is worth (see the module docstring)."""
    before = old.conditions if old is not None else []
    events: list[EventSpec] = []
    ready, was = find(new.conditions, READY), _status(find(before, READY))
    if ready is not None and ready.status != was:
        if ready.status is ConditionStatus.TRUE:
            events.append(EventSpec("Normal", CLUSTER_READY, ready.message or "Ready"))
        elif was is ConditionStatus.TRUE:
            events.append(EventSpec("Warning", CLUSTER_NOT_READY, ready.message or "not Ready"))
    for type_, reason in _WARNINGS:
        cond = find(new.conditions, type_)
        if cond is not None and cond.status is ConditionStatus.FALSE \
                and _status(find(before, type_)) is not ConditionStatus.FALSE:
            events.append(EventSpec("Warning", reason, cond.message or type_))
    return events
