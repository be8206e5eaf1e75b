"""The Cluster controller: a Cluster's status from its Machines (status only).

Modules: ``summary`` (the pure status computation), ``events`` (the Events
a status change is worth: ``ClusterReady``, ``ClusterNotReady``,
``ReleaseNotFound``, ``MultipleBootstrap``), ``controller`` (reconciler and
runtime wiring). The contracts are in
``docs/design/cluster-contracts.md`` ("The Cluster controller").
"""

from racksmith.controllers.cluster.controller import (
    CONTROLLER_NAME,
    ClusterReconciler,
    cluster_controller,
)
from racksmith.controllers.cluster.summary import summarize

__all__ = ["CONTROLLER_NAME", "ClusterReconciler", "cluster_controller", "summarize"]
