"""State handlers, table-driven: state and provisioner answers → proposal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from racksmith.controllers.baremetalhost.calls import BudgetExhausted, CallBudget
from racksmith.controllers.baremetalhost.handlers import HANDLERS, decide
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.states import is_allowed
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.hostprofile import BareMetalHostProfileSpec
from racksmith.kinds.metal import ErrorType, OperationalStatus
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.provisioner.base import BackendUnavailable, ErrorKind, Result
from racksmith.runtime import FakeClock
from racksmith.runtime.keys import ObjectKey
from tests.unit.baremetalhost.doubles import (
    IMAGE,
    PASSWORD,
    ScriptedProvisioner,
    make_ctx,
)

WAIT = Result.wait(0.5)  # below the floor (2.0): the floor wins
WAIT_LONG = Result.wait(30.0)
IMAGE_SPEC = {"image": {"url": IMAGE.url}}
NVME_PAIR = BareMetalHostProfileSpec.model_validate(
    {"devices": [{"device": {"type": "nvme"}}, {"device": {"type": "nvme"}}]})
ONE_SSD = BareMetalHostProfileSpec.model_validate(
    {"devices": [{"device": {"type": "ssd"}, "partitions": [{"name": "root"}]}],
     "fileSystems": [{"fileSystem": "ext4", "source": "root", "mountPoint": "/"}]})


def fail(kind: ErrorKind, message: str = "boom") -> Result:
    return Result.fail(kind, message)


@dataclass
class Case:
    name: str
    state: S | None
    answers: dict[str, Any] = field(default_factory=dict)
    ctx: dict[str, Any] = field(default_factory=dict)
    next_state: S | None = None
    error: ErrorType | None = None
    requeue: float | None = None
    ops: list[str] | None = None
    check: Callable[[Proposal], bool] | None = None


CASES = [
    Case("new host with BMC", None, next_state=S.REGISTERING, ops=[]),
    Case("new host without BMC", None, ctx={"spec": {"bmc": None}}, next_state=S.UNMANAGED),
    Case("new host deleted", None, ctx={"deleting": True}, next_state=S.DELETING),
    Case("unmanaged gets BMC", S.UNMANAGED, next_state=S.REGISTERING),
    Case("unmanaged stays", S.UNMANAGED, ctx={"spec": {"bmc": None}}, ops=[]),
    Case("registering done", S.REGISTERING, ctx={"registered": False, "hardware": False},
         next_state=S.INSPECTING, ops=["register"],
         check=lambda p: p.good_credentials is not None and p.provisioning_id == "node-1"),
    Case("registering done, already inspected", S.REGISTERING,
         ctx={"registered": False}, next_state=S.PREPARING),
    Case("registering done, inspection disabled", S.REGISTERING,
         ctx={"registered": False, "hardware": False,
              "annotations": {ann.INSPECT: "disabled"}}, next_state=S.PREPARING),
    Case("registering in progress", S.REGISTERING, {"register": WAIT},
         ctx={"registered": False, "hardware": False}, requeue=2.0,
         check=lambda p: p.tried_credentials is not None and p.good_credentials is None),
    Case("registering honours a longer interval", S.REGISTERING, {"register": WAIT_LONG},
         ctx={"registered": False, "hardware": False}, requeue=30.0),
    Case("wrong credentials", S.REGISTERING,
         {"register": fail(ErrorKind.REGISTRATION, "refused")},
         ctx={"registered": False, "hardware": False}, error=ErrorType.REGISTRATION,
         check=lambda p: p.good_credentials is None and p.tried_credentials is not None),
    Case("missing secret", S.REGISTERING,
         ctx={"registered": False, "credentials_problem": "secret bmc-secret not found"},
         error=ErrorType.REGISTRATION, ops=[],
         check=lambda p: p.error is not None and p.error[1] == "secret bmc-secret not found"),
    Case("registering, externally provisioned", S.REGISTERING,
         ctx={"registered": False, "spec": {"externallyProvisioned": True}},
         next_state=S.EXTERNALLY_PROVISIONED),
    Case("registering deleted", S.REGISTERING, ctx={"deleting": True}, next_state=S.DELETING,
         ops=[]),
    Case("inspection done", S.INSPECTING, next_state=S.PREPARING, ops=["inspect"],
         ctx={"hardware": False},
         check=lambda p: p.hardware is not None and p.inventory is not None),
    Case("inspection in progress", S.INSPECTING, {"inspect": WAIT}, requeue=2.0),
    Case("inspection failed", S.INSPECTING, {"inspect": fail(ErrorKind.INSPECTION)},
         error=ErrorType.INSPECTION),
    Case("inspecting deleted", S.INSPECTING, ctx={"deleting": True},
         next_state=S.POWERING_OFF_BEFORE_DELETE, ops=[]),
    Case("credentials rotated while inspecting", S.INSPECTING, {"register": WAIT},
         ctx={"secret_version": "8", "good_version": "7"}, ops=["register"], requeue=2.0),
    Case("preparing done", S.PREPARING, next_state=S.AVAILABLE, ops=["prepare"]),
    Case("preparing failed", S.PREPARING, {"prepare": fail(ErrorKind.PREPARATION)},
         error=ErrorType.PREPARATION),
    Case("available idle, power as asked", S.AVAILABLE, ops=["power_state"],
         check=lambda p: p.steady and p.powered_on is False),
    Case("available, online: power on", S.AVAILABLE, ctx={"spec": {"online": True}},
         ops=["power_state", "power"], check=lambda p: p.powered_on is True),
    # Ironic's power state None (no reading: fake hardware): the last known one
    # counts (Metal3's rule), a host never seen on is not powered off blind.
    Case("available, power unknown, offline: nothing", S.AVAILABLE, {"power_state": None},
         ops=["power_state"], check=lambda p: p.steady and p.powered_on is None),
    Case("available, power unknown, online: power on", S.AVAILABLE, {"power_state": None},
         ctx={"spec": {"online": True}}, ops=["power_state", "power"],
         check=lambda p: p.powered_on is True),
    Case("available, power unknown, last seen on, offline: power off", S.AVAILABLE,
         {"power_state": None}, ctx={"status": {"poweredOn": True}},
         ops=["power_state", "power"], check=lambda p: p.powered_on is False),
    Case("available, power on in progress", S.AVAILABLE, {"power": WAIT},
         ctx={"spec": {"online": True}}, requeue=2.0),
    Case("available, power failure", S.AVAILABLE, {"power": fail(ErrorKind.POWER)},
         ctx={"spec": {"online": True}}, error=ErrorType.POWER_MANAGEMENT),
    Case("available with image", S.AVAILABLE, ctx={"spec": IMAGE_SPEC},
         next_state=S.PROVISIONING, ops=[],
         check=lambda p: p.record_image is not None and p.record_image.url == IMAGE.url),
    Case("available, profile fits", S.AVAILABLE,
         ctx={"spec": IMAGE_SPEC, "profile": ONE_SSD, "profile_name": "p"},
         next_state=S.PROVISIONING,
         check=lambda p: ann.RENDERED_LAYOUT in p.set_annotations
         and p.conditions[0].status is ConditionStatus.TRUE),
    Case("available, profile does not fit", S.AVAILABLE,
         ctx={"spec": IMAGE_SPEC, "profile": NVME_PAIR, "profile_name": "p"},
         ops=["power_state"],
         check=lambda p: p.conditions[0].reason == "ProfileDoesNotFit"
         and "needs 2 disks of type nvme, host has 0" in p.conditions[0].message),
    Case("available, profile missing", S.AVAILABLE,
         ctx={"spec": IMAGE_SPEC, "profile_name": "gone"},
         check=lambda p: p.conditions[0].reason == "ProfileNotFound"),
    Case("available, re-inspect", S.AVAILABLE, {"inspect": WAIT},
         ctx={"annotations": {ann.INSPECT: ""}}, next_state=S.INSPECTING, ops=["inspect"],
         check=lambda p: p.remove_annotations == (ann.INSPECT,)),
    Case("available, re-inspect refused", S.AVAILABLE,
         {"inspect": fail(ErrorKind.INSPECTION)}, ctx={"annotations": {ann.INSPECT: ""}},
         error=ErrorType.INSPECTION, check=lambda p: not p.remove_annotations),
    Case("available, adopt", S.AVAILABLE, ctx={"spec": {"externallyProvisioned": True}},
         next_state=S.EXTERNALLY_PROVISIONED, ops=["adopt"]),
    Case("available deleted", S.AVAILABLE, ctx={"deleting": True},
         next_state=S.POWERING_OFF_BEFORE_DELETE),
    Case("available, reboot", S.AVAILABLE, ctx={"annotations": {ann.REBOOT: ""}},
         ops=["power"], requeue=0.0,
         check=lambda p: p.remove_annotations == (ann.REBOOT,) and p.powered_on is False),
    Case("provisioned, keyed reboot: off and held off, the key kept", S.PROVISIONED,
         ctx={"spec": IMAGE_SPEC, "annotations": {f"{ann.REBOOT}/remediation": ""}},
         ops=["adopt", "power"],
         check=lambda p: not p.remove_annotations and p.powered_on is False and p.steady),
    Case("available, soft reboot asked", S.AVAILABLE,
         ctx={"annotations": {ann.REBOOT: '{"mode": "soft"}'}}, ops=["power"], requeue=0.0,
         check=lambda p: p.remove_annotations == (ann.REBOOT,)),
    Case("provisioning done", S.PROVISIONING, ctx={"spec": IMAGE_SPEC},
         next_state=S.PROVISIONED, ops=["provision"]),
    Case("provisioning in progress", S.PROVISIONING, {"provision": WAIT},
         ctx={"spec": IMAGE_SPEC}, requeue=2.0),
    Case("bad image URL", S.PROVISIONING,
         {"provision": fail(ErrorKind.PROVISIONING, "image download failed: 404")},
         ctx={"spec": IMAGE_SPEC}, error=ErrorType.PROVISIONING),
    Case("deploy still failing after its back-off: deprovision, then retry", S.PROVISIONING,
         {"provision": fail(ErrorKind.PROVISIONING, "deploy failed: callback timeout")},
         ctx={"spec": IMAGE_SPEC, "status": {"errorType": "provisioning error",
                                             "errorMessage": "deploy failed", "errorCount": 1}},
         next_state=S.DEPROVISIONING, ops=["provision"],
         check=lambda p: p.error is None and "retrying a failed deploy" in p.detail),
    Case("a first deploy failure is recorded, not retried", S.PROVISIONING,
         {"provision": fail(ErrorKind.PROVISIONING, "deploy failed")},
         ctx={"spec": IMAGE_SPEC, "status": {"errorType": "power management error",
                                             "errorMessage": "x", "errorCount": 1}},
         error=ErrorType.PROVISIONING),
    Case("image changed while provisioning", S.PROVISIONING,
         ctx={"spec": {"image": {"url": "http://images.example/other.qcow2"}}},
         next_state=S.DEPROVISIONING, ops=[]),
    Case("provisioning deleted", S.PROVISIONING, ctx={"spec": IMAGE_SPEC, "deleting": True},
         next_state=S.DEPROVISIONING),
    Case("provisioned steady", S.PROVISIONED, ctx={"spec": {**IMAGE_SPEC, "online": False}},
         ops=["adopt", "power_state"], check=lambda p: p.steady),
    Case("provisioned, image removed", S.PROVISIONED, next_state=S.DEPROVISIONING, ops=[]),
    Case("provisioned deleted", S.PROVISIONED, ctx={"spec": IMAGE_SPEC, "deleting": True},
         next_state=S.DEPROVISIONING),
    Case("provisioned, adoption failed", S.PROVISIONED,
         {"adopt": fail(ErrorKind.PROVISIONING)}, ctx={"spec": IMAGE_SPEC},
         error=ErrorType.PROVISIONING),
    Case("externally provisioned, released", S.EXTERNALLY_PROVISIONED,
         next_state=S.PREPARING, ops=[]),
    Case("externally provisioned steady", S.EXTERNALLY_PROVISIONED,
         ctx={"spec": {"externallyProvisioned": True}}, ops=["adopt", "power_state"]),
    Case("deprovisioning done", S.DEPROVISIONING, next_state=S.AVAILABLE,
         ops=["deprovision"], check=lambda p: p.clear_image),
    Case("deprovisioning cleans (metadata)", S.DEPROVISIONING, next_state=S.AVAILABLE,
         check=lambda p: True),
    Case("deprovisioning for deletion", S.DEPROVISIONING, ctx={"deleting": True},
         next_state=S.POWERING_OFF_BEFORE_DELETE),
    Case("deprovisioning failed", S.DEPROVISIONING, {"deprovision": fail(ErrorKind.PROVISIONING)},
         error=ErrorType.PROVISIONING),
    Case("deprovisioning failed again while deleting: go on", S.DEPROVISIONING,
         {"deprovision": fail(ErrorKind.PROVISIONING)},
         ctx={"deleting": True, "status": {"errorCount": 2}},
         next_state=S.POWERING_OFF_BEFORE_DELETE,
         check=lambda p: p.events[0].type == "Warning"),
    Case("powered off", S.POWERING_OFF_BEFORE_DELETE, ctx={"deleting": True},
         next_state=S.DELETING, ops=["power"]),
    Case("power off failed", S.POWERING_OFF_BEFORE_DELETE, {"power": fail(ErrorKind.POWER)},
         ctx={"deleting": True}, error=ErrorType.POWER_MANAGEMENT),
    Case("deleted from the backend", S.DELETING, ctx={"deleting": True}, ops=["delete"],
         check=lambda p: p.remove_finalizer),
    Case("deleting in progress", S.DELETING, {"delete": WAIT}, ctx={"deleting": True},
         requeue=2.0, check=lambda p: not p.remove_finalizer),
    Case("detach", S.PROVISIONED, ctx={"annotations": {ann.DETACHED: ""}}, ops=["detach"],
         check=lambda p: p.operational_status is OperationalStatus.DETACHED
         and p.forget_registration and not p.remove_finalizer),
    Case("detached and deleted", S.PROVISIONED,
         ctx={"annotations": {ann.DETACHED: ""}, "deleting": True,
              "status": {"operationalStatus": "detached"}},
         ops=[], check=lambda p: p.remove_finalizer),
    Case("re-attached", S.PROVISIONED, ctx={"status": {"operationalStatus": "detached"}},
         ops=[], requeue=0.0, check=lambda p: p.clear_detached and not p.conditions),
    Case("deployed after the restored backup: detached, said so", S.AVAILABLE,
         ctx={"annotations": {ann.DETACHED: "x", ann.DEPLOYED_AFTER_BACKUP: "2026-12-04"}},
         ops=["detach"], check=lambda p: p.conditions[0].type == ann.RECORD_MATCHES_HARDWARE
         and p.conditions[0].reason == "DeployedAfterBackup"
         and any(e.reason == "DeployedAfterBackup" for e in p.events)),
    Case("deployed after the backup, still detached: the condition stays", S.AVAILABLE,
         ctx={"annotations": {ann.DETACHED: "x", ann.DEPLOYED_AFTER_BACKUP: "2026-12-04"},
              "status": {"operationalStatus": "detached"}},
         ops=[], check=lambda p: p.conditions[0].status.value == "False"),
    Case("checked and attached again: the condition turns True", S.AVAILABLE,
         ctx={"status": {"operationalStatus": "detached", "conditions": [
             {"type": ann.RECORD_MATCHES_HARDWARE, "status": "False",
              "reason": "DeployedAfterBackup", "message": "m",
              "lastTransitionTime": "2026-12-04T10:00:00Z"}]}},
         ops=[], requeue=0.0, check=lambda p: p.clear_detached
         and p.conditions[0].status.value == "True"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_handler(case: Case) -> None:
    provisioner = ScriptedProvisioner(case.answers)
    ctx = make_ctx(case.state, provisioner, **case.ctx)
    proposal = await decide(ctx)
    assert proposal.next_state == case.next_state, proposal
    if case.next_state is not None:
        assert is_allowed(case.state, case.next_state)
    assert (proposal.error[0] if proposal.error else None) == case.error, proposal
    if case.requeue is not None:
        assert proposal.requeue_after == case.requeue
    if case.ops is not None:
        assert provisioner.ops() == case.ops
    if case.check is not None:
        assert case.check(proposal), proposal
    assert PASSWORD not in repr(proposal)


def test_every_state_has_a_handler() -> None:
    assert set(HANDLERS) == {None, *S}


async def test_credentials_changed_is_passed_when_the_secret_changed() -> None:
    provisioner = ScriptedProvisioner({"register": fail(ErrorKind.REGISTRATION, "refused")})
    ctx = make_ctx(S.REGISTERING, provisioner, registered=False, secret_version="9",
                   status={"triedCredentials": {"credentials": {"name": "bmc-secret"},
                                                "credentialsVersion": "8"}})
    await decide(ctx)
    assert provisioner.calls == [("register", {"credentials_changed": True})]
    provisioner = ScriptedProvisioner({"register": fail(ErrorKind.REGISTRATION, "refused")})
    ctx = make_ctx(S.REGISTERING, provisioner, registered=False, secret_version="9",
                   status={"triedCredentials": {"credentials": {"name": "bmc-secret"},
                                                "credentialsVersion": "9"}})
    await decide(ctx)
    assert provisioner.calls == [("register", {"credentials_changed": False})]


async def test_a_backend_echoing_the_password_is_redacted() -> None:
    provisioner = ScriptedProvisioner(
        {"register": fail(ErrorKind.REGISTRATION, f"login admin:{PASSWORD} refused")})
    proposal = await decide(make_ctx(S.REGISTERING, provisioner, registered=False))
    assert proposal.error is not None
    assert PASSWORD not in proposal.error[1] and "***" in proposal.error[1]


async def test_deprovision_cleans_only_in_metadata_mode() -> None:
    for mode, clean in (("metadata", True), ("disabled", False)):
        provisioner = ScriptedProvisioner()
        await decide(make_ctx(S.DEPROVISIONING, provisioner,
                              spec={"automatedCleaningMode": mode}))
        assert provisioner.calls == [("deprovision", {"clean": clean})]


async def test_the_rendered_layout_rides_in_the_deploy_request() -> None:
    provisioner = ScriptedProvisioner()
    ctx = make_ctx(S.PROVISIONING, provisioner, spec=IMAGE_SPEC, profile=ONE_SSD,
                   profile_name="p")
    proposal = await decide(ctx)
    assert proposal.next_state is S.PROVISIONED
    (_op, kw), = provisioner.calls
    request = kw["request"]
    assert request.image.url == IMAGE.url
    layout = request.meta_data["racksmith_disk_layout"]
    assert layout["devices"][0]["name"] == "/dev/sda"
    assert layout["fileSystems"][0]["mountPoint"] == "/"


async def test_backend_unavailable_propagates_to_the_reconciler() -> None:
    provisioner = ScriptedProvisioner({"delete": BackendUnavailable("down")})
    with pytest.raises(BackendUnavailable):
        await decide(make_ctx(S.DELETING, provisioner, deleting=True))


async def test_call_budget_bounds_calls_per_host() -> None:
    clock = FakeClock()
    settings = BareMetalHostSettings(calls_per_minute=2)
    provisioner = ScriptedProvisioner({"inspect": WAIT})
    for _ in range(2):
        await decide(make_ctx(S.INSPECTING, provisioner, clock=clock, settings=settings))
    # The budget lives in the context's CallBudget; share one across reconciles.
    ctx = make_ctx(S.INSPECTING, provisioner, clock=clock, settings=settings)
    budget = ctx.calls._budget
    await decide(ctx)
    await decide(ctx)
    with pytest.raises(BudgetExhausted) as raised:
        await decide(ctx)
    assert 0 < raised.value.retry_after <= 60
    assert budget.per_minute == 2
    await clock.advance(60.0)
    await decide(ctx)


async def test_a_spent_budget_never_livelocks_the_steady_state() -> None:
    """A provisioned host that used its whole budget while deploying, run as
    the reconciler runs it (``calls.admit()``, then ``decide``; a
    ``BudgetExhausted`` waits its ``retry_after``). Before admission the one
    call freed each time went to ``adopt`` and ``power_state`` ran out: the
    host adopted every 1-2 s for ever and never reached its steady poll
    (seen on a site). Now one reconcile is cut short, the next waits until
    both of its calls are free and settles."""
    clock = FakeClock()
    settings = BareMetalHostSettings(calls_per_minute=30)
    provisioner = ScriptedProvisioner({"power_state": True})
    ctx = make_ctx(S.PROVISIONED, provisioner, spec={**IMAGE_SPEC, "online": True},
                   status={"poweredOn": True}, clock=clock, settings=settings)
    for _ in range(30):  # the deploy's polls, spread over the last minute
        ctx.calls._budget.spend(ctx.calls._key)
        await clock.advance(2.0)
    settled = False
    for _ in range(100):  # bounded: the old behaviour never settles
        ctx.calls.made = 0  # a new reconcile
        try:
            ctx.calls.admit()
            settled = (await decide(ctx)).steady
        except BudgetExhausted as exhausted:
            await clock.advance(exhausted.retry_after)
            continue
        if settled:
            break
    assert settled
    assert provisioner.ops() == ["adopt", "adopt", "power_state"]


async def test_admission_after_a_reconcile_cut_short() -> None:
    clock = FakeClock()
    budget = CallBudget(clock, per_minute=4)
    key = ObjectKey("ns", "h")
    budget.admit(key)  # nothing ran out: admitted
    for _ in range(4):
        budget.spend(key)
        await clock.advance(10.0)
    budget.admit(key)  # a reconcile that runs out on its first call needs none
    budget.ran_out(key, 0)
    budget.admit(key)
    # At 60 s the call of 0 s leaves; a reconcile spends its place, then runs out.
    await clock.advance(20.0)
    budget.spend(key)
    budget.ran_out(key, 1)
    with pytest.raises(BudgetExhausted) as raised:
        budget.admit(key)  # needs 2 left: the calls of 10 s and 20 s must leave
    assert raised.value.retry_after == pytest.approx(20.0)
    await clock.advance(20.0)
    budget.admit(key)  # admitted: the need is used up
    budget.spend(key)
    budget.spend(key)
    budget.admit(key)  # no need recorded any more
    budget.ran_out(key, 3)
    budget.forget(key)  # a host gone forgets its need with its calls
    budget.admit(key)


@pytest.mark.parametrize(("recorded", "reading", "event"), [
    (False, True, "PowerOn"),   # the reboot's power-on, done after its call returned
    (True, False, "PowerOff"),  # spec.online false, powered off asynchronously
    (True, True, None),         # nothing changed
    (None, True, None),         # a first reading is no news
])
async def test_a_power_change_seen_later_gets_its_event(
        recorded: bool | None, reading: bool, event: str | None) -> None:
    status = {} if recorded is None else {"poweredOn": recorded}
    ctx = make_ctx(S.AVAILABLE, ScriptedProvisioner({"power_state": reading}),
                   spec={"online": reading}, status=status)
    proposal = await decide(ctx)
    assert proposal.steady and proposal.powered_on is reading
    assert [e.reason for e in proposal.events] == ([event] if event else [])
