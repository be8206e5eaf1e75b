"""Node maintenance: the per-node flow's executor and the graceful reboot controller.

Modules: ``flow`` (``NodeMaintenance``: advance/finish/sweep over the pure
state table of ``racksmith.planners.maintenance``), ``drain`` (evictions
with back-off, naming the PodDisruptionBudget that refuses), ``reboot``
(the GracefulRebootRequest controller), ``reboot_states`` (its phase's
state table), ``events`` (the Events about Nodes the flow records:
``Cordoned``, ``DrainStarted``, ``Evicted``, ``EvictionRefused``,
``RebootRequested``, ``Uncordoned``), ``timings`` (its waits); the API
access is the runtime ``Client``.
The contracts are in ``docs/design/maintenance-contracts.md``.
"""

from racksmith.controllers.maintenance.flow import MAX_ACTIONS, NodeMaintenance, OwnersAlive
from racksmith.controllers.maintenance.reboot import (
    CONTROLLER_NAME,
    GracefulRebootReconciler,
    graceful_reboot_controller,
    reboot_order,
)
from racksmith.controllers.maintenance.timings import GracefulRebootTimings
from racksmith.planners.maintenance import (
    MaintenanceTimings,
    NodeJob,
    NodeProgress,
    NodeState,
    RebootPolicy,
)

__all__ = [
    "CONTROLLER_NAME",
    "MAX_ACTIONS",
    "GracefulRebootReconciler",
    "GracefulRebootTimings",
    "MaintenanceTimings",
    "NodeJob",
    "NodeMaintenance",
    "NodeProgress",
    "NodeState",
    "OwnersAlive",
    "RebootPolicy",
    "graceful_reboot_controller",
    "reboot_order",
]
