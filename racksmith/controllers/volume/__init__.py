"""The Volume controller and the pre-bound claim binder (local persistent volumes).

Modules: ``plan`` (the pure planner: observed objects → the next step),
``observed`` (what a reconcile sees; the task protocol's jobs and results
are ``racksmith.kinds.volumejobs``, shared with the agent), ``pv`` (the
PersistentVolume of a Volume), ``status`` (a step applied to the status),
``states`` (the phase's state table), ``commit`` (performs a step,
through the runtime ``Client``), ``controller`` (reconciler and runtime
wiring), ``binder`` (the pre-bound claim binder), ``timings`` (the
controller's waits), ``names``. The contracts are in
``docs/design/volume-contracts.md``.
"""

from racksmith.controllers.volume.binder import ClaimBinder, bind_step, claim_binder_controller
from racksmith.controllers.volume.controller import (
    CONTROLLER_NAME,
    VolumeReconciler,
    volume_controller,
)
from racksmith.controllers.volume.names import FINALIZER
from racksmith.controllers.volume.plan import Step, decide
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.kinds.volumejobs import JOB_RESULT_ANNOTATION, Job, JobOp, JobResult

__all__ = [
    "CONTROLLER_NAME",
    "FINALIZER",
    "JOB_RESULT_ANNOTATION",
    "ClaimBinder",
    "Job",
    "JobOp",
    "JobResult",
    "Step",
    "VolumeReconciler",
    "VolumeTimings",
    "bind_step",
    "claim_binder_controller",
    "decide",
    "volume_controller",
]
