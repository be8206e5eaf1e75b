"""The Volume controller's planner: from what is observed, the one next step.

Owns the actions (plain data, one per kind of write), ``Step`` (an action
plus what the Ready condition and the status fields should say) and
``decide``, which follows the MetalK8s reconcile order ("The Volume
controller" in ``docs/design/volume-contracts.md``): marked for deletion →
finalize; valid? (StorageClass, Node); a running job → wait for it; a failed
job → stop (terminal); no finalizer → add it; PV exists → mirror its
health; no PV → create it from the job's result, or start the prepare job.
Pure: no I/O, no clock, no randomness (the committer draws job ids).

Choices the contracts leave open, made here:

- A Volume being deleted is not validated: releasing the device needs
  neither the StorageClass nor (to be decided) the Node; a missing Node is
  named in the Terminating message instead.
- "Failed" (terminal) means a job failed: ``status.job`` still names it and
  its result says ``ok: false``. A validation failure is reported the same
  way (``Ready=False``/``CreationError``) but is re-checked on every
  reconcile, so a Volume applied before its StorageClass or Node recovers.
- A PV that vanished while the Volume is prepared (``status.deviceName``
  and ``size`` known, no job) is created again from the status, without a
  new prepare (which would find its own file system and refuse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from racksmith.controllers.volume.names import FINALIZER, READY
from racksmith.controllers.volume.observed import Observed, PVView
from racksmith.controllers.volume.pv import pv_manifest, size_quantity
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.storage import Volume, VolumeReason
from racksmith.kinds.volumejobs import Job, JobOp, JobResult
from racksmith.runtime.conditions import ConditionSpec, EventSpec, find

R = VolumeReason

# --- actions --------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Write nothing but the status; look again after ``seconds`` (None: on events)."""

    seconds: float | None = None


@dataclass(frozen=True)
class AddFinalizer:
    """Add the volume-protection finalizer to the Volume (before any job)."""


@dataclass(frozen=True)
class StartJob:
    """Record a new job of ``op`` in ``status.job`` (with Ready), optimistically."""

    op: JobOp


@dataclass(frozen=True)
class CreatePV:
    """Create this PersistentVolume (an existing one means: decide again)."""

    manifest: dict[str, object] = field(compare=False)


@dataclass(frozen=True)
class DeletePV:
    """Request deletion of the Volume's PersistentVolume."""


@dataclass(frozen=True)
class RemovePVFinalizer:
    """Drop the volume-protection finalizer from the (deleted, unbound) PV."""


@dataclass(frozen=True)
class RemoveFinalizer:
    """The device is released: let the Volume go."""


Action = Wait | AddFinalizer | StartJob | CreatePV | DeletePV | RemovePVFinalizer | RemoveFinalizer


@dataclass(frozen=True)
class Step:
    """An action and the status that goes with it.

    ``ready`` None: leave the status alone. ``clear_job``: the job's result
    is consumed. ``device_name``/``size``: set when not None.
    """

    action: Action
    ready: ConditionSpec | None = None
    clear_job: bool = False
    device_name: str | None = None
    size: str | None = None
    events: tuple[EventSpec, ...] = ()


def _cond(status: ConditionStatus, reason: str, message: str) -> ConditionSpec:
    return ConditionSpec(READY, status, reason, message)


def pending(message: str) -> ConditionSpec:
    return _cond(ConditionStatus.UNKNOWN, R.PENDING.value, message)


def terminating(message: str) -> ConditionSpec:
    return _cond(ConditionStatus.UNKNOWN, R.TERMINATING.value, message)


def failed(reason: VolumeReason, message: str) -> ConditionSpec:
    return _cond(ConditionStatus.FALSE, reason.value, message)


def available(message: str) -> ConditionSpec:
    return _cond(ConditionStatus.TRUE, "Available", message)


# --- the checklist ----------------------------------------------------------------


def current_job(volume: Volume) -> Job | None:
    """The job named in ``status.job`` (None: none, or not a job name)."""
    return Job.parse(volume.status.job if volume.status else None)


def result_of(o: Observed, job: Job | None) -> JobResult | None:
    """The agent's result for ``job``; a result for another job is stale."""
    if job is None or o.result is None or o.result.job != str(job):
        return None
    return o.result


def validation_error(o: Observed) -> str | None:
    """Why the Volume cannot be deployed as specified, or None."""
    spec = o.volume.spec
    if o.storage_class is None:
        return f"StorageClass {spec.storage_class_name} not found"
    if not o.node_exists:
        return f"node {spec.node_name} not found"
    return None


def decide(o: Observed) -> Step:
    """The next step for ``o.volume`` (see the module docstring)."""
    v = o.volume
    if v.metadata.deletion_timestamp is not None:
        return _finalize(o)
    problem = validation_error(o)
    if problem is not None:
        return Step(Wait(None), failed(R.CREATION_ERROR, problem))
    assert o.storage_class is not None
    node = v.spec.node_name
    job = current_job(v)
    result = result_of(o, job)
    if job is not None and result is None:
        return Step(Wait(o.timings.job_poll),
                    pending(f"{job.op.value} job {job} running on node {node}"))
    if job is not None and job.op is JobOp.PREPARE and result is not None and not result.ok:
        return Step(Wait(None), failed(R.CREATION_ERROR, result.message))
    if FINALIZER not in v.metadata.finalizers:
        return Step(AddFinalizer())
    name = v.metadata.name or ""
    if o.pv is not None:
        if not o.pv.belongs_to(v):
            return Step(Wait(None), failed(
                R.CREATION_ERROR, f"PersistentVolume {name} exists and belongs to another owner"))
        return _mirror(o.pv, job, result, o.timings.resync, _ready_message(v))
    status = v.status
    if job is not None and job.op is JobOp.PREPARE and result is not None:
        if not result.device_name or result.size_bytes is None or result.size_bytes <= 0:
            return Step(Wait(None), failed(
                R.CREATION_ERROR, f"the agent reported job {job} done without a device "
                "name and size"))
        size = size_quantity(result.size_bytes)
        return Step(CreatePV(pv_manifest(v, o.storage_class, result.device_name, size)),
                    available(_created(name)), clear_job=True,
                    device_name=result.device_name, size=size, events=(EventSpec(
                        "Normal", "PersistentVolumeCreated",
                        f"PersistentVolume {name} ({size}) on node {node}"),))
    if job is None and status is not None and status.device_name and status.size:
        size = str(status.size)
        return Step(CreatePV(pv_manifest(v, o.storage_class, status.device_name, size)),
                    available(_created(name, again=True)), events=(EventSpec(
                        "Normal", "PersistentVolumeCreated",
                        f"PersistentVolume {name} ({size}) on node {node}, created again"),))
    return Step(StartJob(JobOp.PREPARE), pending(f"prepare job started on node {node}"))


def _created(pv_name: str, *, again: bool = False) -> str:
    """The Ready message of a Volume whose PV the controller just created."""
    return f"PersistentVolume {pv_name} created{' again' if again else ''}"


def _ready_message(volume: Volume) -> str | None:
    """The message of the Volume's Ready condition when it is True, else None."""
    cond = find(volume.status.conditions if volume.status else [], READY)
    return cond.message if cond is not None and cond.status is ConditionStatus.TRUE else None


#: PV phases a PersistentVolume just created by the controller goes through.
_NEW_PV_PHASES = (None, "Pending", "Available")


def _mirror(pv: PVView, job: Job | None, result: JobResult | None, resync: float,
            ready_message: str | None = None) -> Step:
    """The PV exists: the Volume's health is the PV's; a consumed job is cleared.

    A Volume whose Ready still says its PV was created (``ready_message``)
    keeps that while the PV is new (no phase, Pending, Available): the
    PV's way to Available is not news, and rewriting the message would be
    one more status write per Volume."""
    done = job is not None and result is not None and result.ok
    device = result.device_name if done and result is not None else None
    size = (size_quantity(result.size_bytes) if done and result is not None
            and result.size_bytes else None)
    clear = job is not None
    if (not clear and pv.phase in _NEW_PV_PHASES and not pv.deleting and ready_message
            and ready_message in (_created(pv.name), _created(pv.name, again=True))):
        return Step(Wait(resync))
    if pv.deleting:
        if pv.is_bound or not pv.has_finalizer:
            return Step(Wait(None), failed(
                R.UNAVAILABLE_ERROR, f"PersistentVolume {pv.name} is being deleted"),
                clear_job=clear, device_name=device, size=size)
        # Deleted by someone while unused: let it go; it is created again.
        return Step(RemovePVFinalizer(), failed(
            R.UNAVAILABLE_ERROR, f"PersistentVolume {pv.name} is being deleted"),
            clear_job=clear, device_name=device, size=size)
    if pv.phase == "Failed":
        why = f": {pv.message}" if pv.message else ""
        return Step(Wait(resync), failed(
            R.UNAVAILABLE_ERROR, f"PersistentVolume {pv.name} is Failed{why}"),
            clear_job=clear, device_name=device, size=size)
    return Step(Wait(resync), available(
        f"PersistentVolume {pv.name} is {pv.phase or 'Available'}"),
        clear_job=clear, device_name=device, size=size)


# --- deletion ---------------------------------------------------------------------


def _finalize(o: Observed) -> Step:
    v = o.volume
    if FINALIZER not in v.metadata.finalizers:
        return Step(Wait(None))
    node = v.spec.node_name
    absent = "" if o.node_exists else f" (node {node} is not registered)"
    job = current_job(v)
    result = result_of(o, job)
    if job is not None and result is None:
        if job.op is JobOp.PREPARE:
            return Step(Wait(o.timings.job_poll), terminating(
                f"waiting for prepare job {job} to finish before releasing the device{absent}"))
        return Step(Wait(o.timings.job_poll), terminating(
            f"unprepare job {job} running on node {node}{absent}"))
    pv = o.pv
    if pv is not None and pv.belongs_to(v):
        if not pv.deleting:
            return Step(DeletePV(), terminating(f"deleting PersistentVolume {pv.name}"))
        if pv.is_bound:
            claim = pv.claim or "an unknown claim"
            return Step(Wait(None), terminating(
                f"PersistentVolume {pv.name} is bound to claim {claim}"))
        if pv.has_finalizer:
            return Step(RemovePVFinalizer(), terminating(f"deleting PersistentVolume {pv.name}"))
        return Step(Wait(None), terminating(
            f"waiting for PersistentVolume {pv.name} to be deleted "
            f"(finalizers: {', '.join(pv.finalizers)})"))
    if job is not None and job.op is JobOp.UNPREPARE and result is not None:
        if result.ok:
            return Step(RemoveFinalizer())
        return Step(Wait(None), failed(R.DESTRUCTION_ERROR, result.message))
    return Step(StartJob(JobOp.UNPREPARE), terminating(
        f"unprepare job started on node {node}{absent}"))
