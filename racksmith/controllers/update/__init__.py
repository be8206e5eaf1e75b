"""The LCM update controller: UpdateGroups, ClusterUpdatePlans, AutoPause.

Modules: ``plan`` (the pure decisions: plan contents, what starts, the
status), ``states`` (the plan phase's state table), ``events`` (the Events
a plan's status change is worth), ``controller`` (reconciler and runtime
wiring, through the runtime ``Client``), ``alerts`` (alert sources for
UpdateAutoPause), ``flow`` (the
seam to the per-node maintenance flow, which the composition root injects),
``timings`` (its waits), ``names``. The contract is in
``docs/design/maintenance-contracts.md`` ("The LCM update controller").
"""

from racksmith.controllers.update.alerts import AlertmanagerSource, AlertSource, NoAlerts
from racksmith.controllers.update.controller import UpdateReconciler, update_controller
from racksmith.controllers.update.flow import NodeFlow, NodeFlowFactory
from racksmith.controllers.update.names import CONTROLLER_NAME
from racksmith.controllers.update.timings import UpdateTimings

__all__ = [
    "CONTROLLER_NAME",
    "AlertSource",
    "AlertmanagerSource",
    "NoAlerts",
    "NodeFlow",
    "NodeFlowFactory",
    "UpdateReconciler",
    "UpdateTimings",
    "update_controller",
]
