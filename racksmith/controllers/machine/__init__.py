"""The Machine controller: one bare-metal host becomes one node of a cluster.

Modules: ``plan`` (the pure planner: observed objects → the next step),
``observed`` (what a reconcile sees), ``selection`` (which host a Machine
claims), ``userdata`` (the cloud-config with the agent config),
``addresses`` (the Machine's addresses from its netplan), ``status`` (a step
applied to the status), ``states`` (the phase's state table),
``commit`` (performs a step, through the runtime ``Client``), ``index``
(the informer indexes that map an event to Machines), ``controller`` (reconciler and
runtime wiring), ``timings`` (the controller's waits), ``names``. The
resources it names come from ``racksmith.runtime.resources``, its condition
and Event helpers from ``racksmith.runtime.conditions``. The contracts are in
``docs/design/cluster-contracts.md``.
"""

from racksmith.controllers.machine.controller import (
    CONTROLLER_NAME,
    MachineReconciler,
    machine_controller,
)
from racksmith.controllers.machine.names import FINALIZER
from racksmith.controllers.machine.plan import Step, decide
from racksmith.controllers.machine.timings import MachineTimings

__all__ = [
    "CONTROLLER_NAME",
    "FINALIZER",
    "MachineReconciler",
    "MachineTimings",
    "Step",
    "decide",
    "machine_controller",
]
