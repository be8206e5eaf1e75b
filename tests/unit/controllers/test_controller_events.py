"""The Events the Cluster, Subnet, update and node maintenance controllers tell:
transitions only, never one per reconcile of an unchanged state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from racksmith.controllers.cluster.events import status_events as cluster_events
from racksmith.controllers.ipam.events import status_events as subnet_events
from racksmith.controllers.maintenance.events import action_events, node_ref
from racksmith.controllers.update.events import plan_events
from racksmith.kinds.cluster import ClusterStatus
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.ipam import SubnetStatus
from racksmith.kinds.lcm import (
    ClusterUpdatePlan,
    ClusterUpdatePlanStatus,
    MachineProgress,
    PlanPhase,
    StepPhase,
    StepStatus,
)
from racksmith.kinds.maintenance import MaintenanceScope
from racksmith.planners.maintenance import (
    Cordon,
    CreateRequest,
    Evict,
    NodeJob,
    RecordReboot,
    RequestReboot,
    SetRelease,
    StartDrain,
    Uncordon,
)
from racksmith.runtime.conditions import EventSpec

NOW = datetime(2025, 1, 1, tzinfo=UTC)
T, F = ConditionStatus.TRUE, ConditionStatus.FALSE


def cond(type_: str, status: ConditionStatus, reason: str, message: str = "") -> Condition:
    return Condition(type=type_, status=status, reason=reason, message=message or reason,
                     last_transition_time=NOW)


def reasons(events: list[EventSpec]) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in events]


# --- Cluster ---------------------------------------------------------------------------


def cluster(*conds: Condition) -> ClusterStatus:
    return ClusterStatus(conditions=list(conds))


RELEASE_OK = cond("ReleaseFound", T, "Found")
UNIQUE = cond("BootstrapUnique", T, "Unique")


def test_a_cluster_turning_ready_is_told_and_only_then() -> None:
    waiting = cluster(RELEASE_OK, UNIQUE, cond("Ready", F, "MachinesNotReady", "1/2 Ready"))
    ready = cluster(RELEASE_OK, UNIQUE, cond("Ready", T, "Ready", "2/2 machines Ready"))
    assert cluster_events(None, waiting) == []  # a new cluster not Ready yet: no news
    assert cluster_events(waiting, waiting) == []
    assert cluster_events(waiting, ready) == [
        EventSpec("Normal", "ClusterReady", "2/2 machines Ready")]
    assert cluster_events(ready, ready) == []
    assert cluster_events(ready, waiting) == [
        EventSpec("Warning", "ClusterNotReady", "1/2 Ready")]
    assert cluster_events(None, ready) == [
        EventSpec("Normal", "ClusterReady", "2/2 machines Ready")]


def test_a_missing_release_and_two_bootstraps_are_warnings_once() -> None:
    ok = cluster(RELEASE_OK, UNIQUE, cond("Ready", F, "NoMachines"))
    bad = cluster(cond("ReleaseFound", F, "NotFound", "ClusterRelease rel-9 not found"),
                  cond("BootstrapUnique", F, "MultipleBootstrap", "m1 and m2 bootstrap"),
                  cond("Ready", F, "NoMachines"))
    assert reasons(cluster_events(ok, bad)) == [
        ("Warning", "ReleaseNotFound"), ("Warning", "MultipleBootstrap")]
    assert cluster_events(None, bad)[0].message == "ClusterRelease rel-9 not found"
    assert cluster_events(bad, bad) == []
    assert cluster_events(bad, ok) == []


# --- Subnet ----------------------------------------------------------------------------


def subnet(status: ConditionStatus, reason: str, message: str = "") -> SubnetStatus:
    return SubnetStatus(conditions=[cond("Ready", status, reason, message)])


def test_subnet_events_follow_the_ready_reason() -> None:
    ready = subnet(T, "Ready", "10 of 13 addresses free")
    fuller = subnet(T, "Ready", "2 of 13 addresses free")
    full = subnet(F, "Exhausted", "all 13 addresses are allocated")
    assert subnet_events(None, ready) == []  # usable from the start: no news
    assert subnet_events(ready, fuller) == []  # the free count moves with every claim
    assert subnet_events(fuller, full) == [
        EventSpec("Warning", "Exhausted", "all 13 addresses are allocated")]
    assert subnet_events(full, full) == []
    assert subnet_events(full, ready) == [
        EventSpec("Normal", "Ready", "10 of 13 addresses free")]
    invalid = subnet(F, "InvalidSpec", "spec.gateway: outside the cidr")
    assert subnet_events(None, invalid) == [
        EventSpec("Warning", "InvalidSpec", "spec.gateway: outside the cidr")]
    assert reasons(subnet_events(invalid, subnet(F, "Overlapping", "older"))) == [
        ("Warning", "Overlapping")]
    assert subnet_events(None, SubnetStatus()) == []


# --- ClusterUpdatePlan -------------------------------------------------------------------


def plan(status: ClusterUpdatePlanStatus | None) -> ClusterUpdatePlan:
    body: dict[str, Any] = {
        "apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "ClusterUpdatePlan",
        "metadata": {"name": "demo-rel-2", "namespace": "default"},
        "spec": {"cluster": "demo", "source": "rel-1", "target": "rel-2", "steps": [
            {"id": "control-plane", "name": "Update the control plane"},
            {"id": "group-w", "name": "Update group w"}]},
        "status": status.model_dump(by_alias=True, mode="json") if status else None}
    return ClusterUpdatePlan.model_validate(body)


def plan_status(cp: StepPhase, w: StepPhase, *, phase: PlanPhase = PlanPhase.IN_PROGRESS,
                machines: tuple[MachineProgress, ...] = (),
                conditions: tuple[Condition, ...] = ()) -> ClusterUpdatePlanStatus:
    return ClusterUpdatePlanStatus(
        phase=phase, steps=[StepStatus(id="control-plane", phase=cp, message="1/1 done"),
                            StepStatus(id="group-w", phase=w)],
        machines=list(machines), conditions=list(conditions))


NS, SC, IP, DONE = (StepPhase.NOT_STARTED, StepPhase.SCHEDULED, StepPhase.IN_PROGRESS,
                    StepPhase.COMPLETED)


def test_steps_commenced_and_completed_are_told_once() -> None:
    first = plan_status(NS, NS, phase=PlanPhase.NOT_STARTED)
    assert plan_events(plan(None), first) == []
    commenced = plan_status(SC, SC)
    assert plan_events(plan(first), commenced) == [
        EventSpec("Normal", "StepCommenced",
                  "step control-plane (Update the control plane) commenced"),
        EventSpec("Normal", "StepCommenced", "step group-w (Update group w) commenced")]
    running = plan_status(IP, SC)
    assert plan_events(plan(commenced), running) == []  # scheduled → running: no news
    assert plan_events(plan(running), running) == []
    cp_done = plan_status(DONE, IP)
    assert plan_events(plan(running), cp_done) == [
        EventSpec("Normal", "StepCompleted",
                  "step control-plane (Update the control plane) completed: 1/1 done")]
    done = plan_status(DONE, DONE, phase=PlanPhase.COMPLETED)
    assert reasons(plan_events(plan(cp_done), done)) == [
        ("Normal", "StepCompleted"), ("Normal", "PlanCompleted")]
    assert plan_events(plan(cp_done), done)[-1].message == \
        "every machine of cluster demo runs release rel-2"
    assert plan_events(plan(done), done) == []
    # An auto-commenced plan: its steps commence with its first status.
    assert reasons(plan_events(plan(None), plan_status(SC, SC))) == [
        ("Normal", "StepCommenced")] * 2


def test_auto_pause_is_a_warning_once() -> None:
    paused_cond = cond("AutoPaused", T, "AlertsFiring", "firing: KubeAPIDown")
    clear = plan_status(IP, SC, conditions=(cond("AutoPaused", F, "NoAlerts"),))
    paused = plan_status(IP, StepPhase.AUTO_PAUSED, phase=PlanPhase.AUTO_PAUSED,
                         conditions=(paused_cond,))
    [event] = plan_events(plan(clear), paused)
    assert (event.type, event.reason) == ("Warning", "AutoPaused")
    assert "firing: KubeAPIDown" in event.message
    assert plan_events(plan(paused), paused) == []
    # The alert resolved and the step commenced again by hand: that is told, no pause.
    assert reasons(plan_events(plan(paused), clear)) == [("Normal", "StepCommenced")]


def test_machines_blocked_and_lock_failed_are_warnings_on_entry() -> None:
    def with_machines(**states: str) -> ClusterUpdatePlanStatus:
        return plan_status(IP, NS, machines=tuple(
            MachineProgress(name=n, state=s, message=f"{n} is {s}") for n, s in states.items()))
    before = with_machines(w0="Draining", w1="WaitingForLocks")
    stuck = with_machines(w0="Blocked", w1="LockFailed")
    assert plan_events(plan(before), stuck) == [
        EventSpec("Warning", "MachineBlocked", "machine w0: w0 is Blocked"),
        EventSpec("Warning", "MachineLockFailed", "machine w1: w1 is LockFailed")]
    assert plan_events(plan(stuck), stuck) == []
    assert plan_events(plan(stuck), before) == []


def test_a_failed_cluster_lock_is_told_when_new() -> None:
    message = "ClusterWorkloadLock ref (ref) failed: pinned"
    calm = plan_status(IP, NS, conditions=(cond("LockFailed", F, "NoFailedLock"),))
    failing = plan_status(IP, NS, conditions=(cond("LockFailed", T, "LockFailed", message),))
    assert plan_events(plan(calm), failing, cluster_lock_failed=message) == [
        EventSpec("Warning", "ClusterLockFailed", message)]
    assert plan_events(plan(failing), failing, cluster_lock_failed=message) == []
    other = "ClusterWorkloadLock ref (ref) failed: another reason"
    assert reasons(plan_events(plan(failing), failing, cluster_lock_failed=other)) == [
        ("Warning", "ClusterLockFailed")]


# --- node maintenance --------------------------------------------------------------------


JOB = NodeJob(namespace="ns1", machine="w0", owner="plan.ns1.demo-rel-2", cluster="demo",
              scope=MaintenanceScope.OS, release="rel-2")


@pytest.mark.parametrize(("action", "reason", "message"), [
    (Cordon(), "Cordoned", "cordoned for maintenance by plan.ns1.demo-rel-2"),
    (StartDrain(NOW), "DrainStarted", "draining for plan.ns1.demo-rel-2"),
    (RequestReboot("h0", NOW), "RebootRequested",
     "reboot requested through BareMetalHost ns1/h0 for plan.ns1.demo-rel-2"),
    (Uncordon(), "Uncordoned", "maintenance by plan.ns1.demo-rel-2 done; uncordoned"),
    (Uncordon(keep_cordoned=True), "Uncordoned",
     "maintenance by plan.ns1.demo-rel-2 done; left cordoned, as it was before"),
])
def test_the_flows_writes_are_told(action: Any, reason: str, message: str) -> None:
    assert action_events(JOB, action) == [EventSpec("Normal", reason, message)]


@pytest.mark.parametrize("action", [
    CreateRequest(was_unschedulable=False), Evict(()), SetRelease("rel-2"),
    RecordReboot("boot-1")])
def test_bookkeeping_writes_are_not(action: Any) -> None:
    assert action_events(JOB, action) == []  # evictions are told per pod by the drainer


def test_events_about_a_node_carry_its_name_as_uid() -> None:
    assert node_ref("w0") == {"apiVersion": "v1", "kind": "Node",
                              "metadata": {"name": "w0", "uid": "w0"}}
