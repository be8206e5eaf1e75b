"""The Volume planner: a table of observed worlds and the one step each leads to."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from racksmith.controllers.volume.observed import Observed
from racksmith.controllers.volume.plan import (
    Action,
    AddFinalizer,
    CreatePV,
    DeletePV,
    RemoveFinalizer,
    RemovePVFinalizer,
    StartJob,
    Wait,
    decide,
)
from racksmith.controllers.volume.status import phase_of
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.storage import Volume, VolumePhase
from racksmith.kinds.volumejobs import JobOp
from racksmith.runtime.conditions import ConditionSpec, set_condition
from tests.unit.volume import builders as b
from tests.unit.volume.builders import PREP, UNPREP

JOB_POLL, RESYNC = VolumeTimings().job_poll, VolumeTimings().resync


@dataclass(frozen=True)
class Case:
    name: str
    observed: Observed
    action: Action
    phase: VolumePhase | None  # None: the status is left alone
    reason: str | None = None
    message: str | None = None  # a substring of the Ready message
    clear_job: bool = False


V = b.volume
CASES = [
    # Validation, before anything is started.
    Case("unknown storage class", b.observed(V(finalizer=False), sc=None), Wait(None),
         VolumePhase.FAILED, "CreationError", "StorageClass local not found"),
    Case("unknown node", b.observed(V(finalizer=False), node=False), Wait(None),
         VolumePhase.FAILED, "CreationError", "node n1 not found"),
    Case("invalid while a job runs: the job is kept", b.observed(V(job=PREP), sc=None),
         Wait(None), VolumePhase.FAILED, "CreationError", "StorageClass local not found"),
    # Deploy.
    Case("new: finalizer first", b.observed(V(finalizer=False)), AddFinalizer(), None),
    Case("finalizer: start prepare", b.observed(V()), StartJob(JobOp.PREPARE),
         VolumePhase.PENDING, "Pending", "prepare job started on node n1"),
    Case("prepare running", b.observed(V(job=PREP)), Wait(JOB_POLL), VolumePhase.PENDING,
         "Pending", f"prepare job {PREP} running"),
    Case("a stale result is not consumed", b.observed(V(job=PREP), result=b.ok("prepare:ffffffff")),
         Wait(JOB_POLL), VolumePhase.PENDING, "Pending"),
    Case("prepare done: create the PV", b.observed(V(job=PREP), result=b.ok()),
         CreatePV({}), VolumePhase.AVAILABLE, "Available", "created", clear_job=True),
    Case("prepare failed: terminal", b.observed(V(job=PREP), result=b.failure()), Wait(None),
         VolumePhase.FAILED, "CreationError", "DeviceInUse: signature found"),
    Case("prepare done without a size", b.observed(V(job=PREP), result=b.ok(size=None)),
         Wait(None), VolumePhase.FAILED, "CreationError", "without a device name and size"),
    Case("PV vanished: created again from the status",
         b.observed(V(device="loop3", size="1Gi")), CreatePV({}), VolumePhase.AVAILABLE,
         "Available", "created again"),
    # Mirror the PV.
    Case("killed after the PV was created", b.observed(V(job=PREP), pv_=b.pv(), result=b.ok()),
         Wait(RESYNC), VolumePhase.AVAILABLE, "Available", "is Available", clear_job=True),
    Case("PV bound", b.observed(V(), pv_=b.pv(phase="Bound", claim="default/data")),
         Wait(RESYNC), VolumePhase.AVAILABLE, "Available", "is Bound"),
    Case("PV failed", b.observed(V(), pv_=b.pv(phase="Failed", message="disk gone")),
         Wait(RESYNC), VolumePhase.FAILED, "UnavailableError", "is Failed: disk gone"),
    Case("PV deleted by someone while unused", b.observed(V(), pv_=b.pv(deleting=True)),
         RemovePVFinalizer(), VolumePhase.FAILED, "UnavailableError", "being deleted"),
    Case("PV deleted by someone while bound",
         b.observed(V(), pv_=b.pv(deleting=True, phase="Bound", claim="default/data")),
         Wait(None), VolumePhase.FAILED, "UnavailableError", "being deleted"),
    Case("PV of someone else", b.observed(V(), pv_=b.pv(owner="other")), Wait(None),
         VolumePhase.FAILED, "CreationError", "belongs to another owner"),
    # Finalize.
    Case("deleted, never deployed", b.observed(V(finalizer=False, deleting=True)), Wait(None),
         None),
    Case("deleted mid-creation: wait for the prepare",
         b.observed(V(job=PREP, deleting=True)), Wait(JOB_POLL), VolumePhase.TERMINATING,
         "Terminating", f"waiting for prepare job {PREP} to finish"),
    Case("deleted after prepare, before the PV: unprepare",
         b.observed(V(job=PREP, deleting=True), result=b.ok()), StartJob(JobOp.UNPREPARE),
         VolumePhase.TERMINATING, "Terminating", "unprepare job started"),
    Case("deleted while invalid: no validation", b.observed(V(deleting=True), sc=None),
         StartJob(JobOp.UNPREPARE), VolumePhase.TERMINATING, "Terminating"),
    Case("deleted, node gone: said so", b.observed(V(job=UNPREP, deleting=True), node=False),
         Wait(JOB_POLL), VolumePhase.TERMINATING, "Terminating", "node n1 is not registered"),
    Case("deleted: delete the PV", b.observed(V(deleting=True), pv_=b.pv()), DeletePV(),
         VolumePhase.TERMINATING, "Terminating", "deleting PersistentVolume v1"),
    Case("deleted, PV bound: wait for the claim",
         b.observed(V(deleting=True), pv_=b.pv(deleting=True, phase="Bound",
                                               claim="default/data")),
         Wait(None), VolumePhase.TERMINATING, "Terminating",
         "PersistentVolume v1 is bound to claim default/data"),
    Case("deleted, PV released: drop its finalizer",
         b.observed(V(deleting=True), pv_=b.pv(deleting=True, phase="Released")),
         RemovePVFinalizer(), VolumePhase.TERMINATING, "Terminating"),
    Case("deleted, PV held by another finalizer",
         b.observed(V(deleting=True), pv_=b.pv(deleting=True, finalizer=False)), Wait(None),
         VolumePhase.TERMINATING, "Terminating", "waiting for PersistentVolume v1"),
    Case("deleted, PV of someone else: left alone",
         b.observed(V(deleting=True), pv_=b.pv(owner="other")), StartJob(JobOp.UNPREPARE),
         VolumePhase.TERMINATING, "Terminating"),
    Case("unprepare running", b.observed(V(job=UNPREP, deleting=True)), Wait(JOB_POLL),
         VolumePhase.TERMINATING, "Terminating", f"unprepare job {UNPREP} running"),
    Case("unprepare done: let go", b.observed(V(job=UNPREP, deleting=True),
                                              result=b.ok(UNPREP)), RemoveFinalizer(), None),
    Case("unprepare failed: terminal",
         b.observed(V(job=UNPREP, deleting=True), result=b.failure(UNPREP)), Wait(None),
         VolumePhase.FAILED, "DestructionError", "DeviceInUse: signature found"),
    Case("failed prepare, then deleted: unprepare",
         b.observed(V(job=PREP, deleting=True), result=b.failure()),
         StartJob(JobOp.UNPREPARE), VolumePhase.TERMINATING, "Terminating"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decide(case: Case) -> None:
    step = decide(case.observed)
    if isinstance(case.action, CreatePV):
        assert isinstance(step.action, CreatePV)
    else:
        assert step.action == case.action
    if case.phase is None:
        assert step.ready is None
        return
    assert step.ready is not None
    assert phase_of(step.ready) is case.phase
    assert step.ready.reason == case.reason
    if case.message is not None:
        assert case.message in step.ready.message
    assert step.clear_job is case.clear_job


def test_consumed_prepare_records_device_and_size() -> None:
    step = decide(b.observed(b.volume(job=PREP), result=b.ok(size=3 * 2**30)))
    assert isinstance(step.action, CreatePV)
    assert (step.device_name, step.size) == ("loop3", "3Gi")
    assert step.action.manifest["spec"]["capacity"] == {"storage": "3Gi"}  # type: ignore[index]
    assert [e.reason for e in step.events] == ["PersistentVolumeCreated"]


def test_decide_is_stable() -> None:
    """Deciding twice on the same world gives the same step (level-based)."""
    for case in CASES:
        assert decide(case.observed) == decide(case.observed), case.name


def test_waits_come_from_the_timings_of_the_input() -> None:
    fast = VolumeTimings(job_poll=0.1, resync=0.2)
    running = replace(b.observed(V(job=PREP)), timings=fast)
    assert decide(running).action == Wait(0.1)
    at_rest = replace(b.observed(V(), pv_=b.pv(phase="Bound", claim="default/data")),
                      timings=fast)
    assert decide(at_rest).action == Wait(0.2)
    going = replace(b.observed(V(job=UNPREP, deleting=True)), timings=fast)
    assert decide(going).action == Wait(0.1)


def _available(message: str) -> Volume:
    """A deployed Volume whose Ready condition is True with ``message``."""
    vol = b.volume(device="loop3", size="1Gi")
    assert vol.status is not None
    vol.status.conditions = set_condition([], ConditionSpec(
        "Ready", ConditionStatus.TRUE, "Available", message), datetime(2024, 1, 1, tzinfo=UTC), 1)
    vol.status.phase = VolumePhase.AVAILABLE
    return vol


@pytest.mark.parametrize("pv_phase", [None, "Pending", "Available"])
def test_a_new_pv_on_its_way_to_available_is_not_news(pv_phase: str | None) -> None:
    """Ready says the PV was created; the PV becoming Available changes nothing
    (no status write per Volume for it)."""
    step = decide(b.observed(_available("PersistentVolume v1 created"), pv_=b.pv(phase=pv_phase)))
    assert step.action == Wait(RESYNC)
    assert step.ready is None


def test_a_created_pv_that_is_bound_is_told() -> None:
    step = decide(b.observed(_available("PersistentVolume v1 created"),
                             pv_=b.pv(phase="Bound", claim="default/data")))
    assert step.ready is not None and "is Bound" in step.ready.message


def test_an_other_message_follows_the_pv() -> None:
    """Only the creation message stands for a new PV: after "is Released", an
    Available PV is told again."""
    step = decide(b.observed(_available("PersistentVolume v1 is Released"), pv_=b.pv()))
    assert step.ready is not None and "is Available" in step.ready.message
