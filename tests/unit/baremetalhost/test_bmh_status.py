"""The committer's pure core: applying proposals, conditions, back-off, the
call budget, and merging proposals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from racksmith.controllers.baremetalhost.calls import BudgetExhausted, CallBudget
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.states import IllegalTransition
from racksmith.controllers.baremetalhost.status import apply_proposal, error_delay
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.metal import (
    BareMetalHostStatus,
    ErrorType,
    OperationalStatus,
    ProvisioningState,
)
from racksmith.runtime import FakeClock, ObjectKey
from racksmith.runtime.conditions import ConditionSpec, EventSpec

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
S = ProvisioningState


def at(state: S | None) -> BareMetalHostStatus:
    return BareMetalHostStatus.model_validate(
        {"provisioning": {"state": state.value}} if state else {})


def test_transition_times_operations() -> None:
    new = apply_proposal(None, Proposal(next_state=S.REGISTERING), now=T0, generation=1)
    assert new.provisioning is not None and new.provisioning.state is S.REGISTERING
    assert new.operation_history is not None
    assert new.operation_history.register_ is not None
    assert new.operation_history.register_.start == T0
    assert new.operation_history.register_.end is None
    newer = apply_proposal(new, Proposal(next_state=S.INSPECTING), now=T1, generation=1)
    assert newer.operation_history is not None
    assert newer.operation_history.register_ is not None
    assert newer.operation_history.register_.end == T1
    assert newer.operation_history.inspect is not None
    assert newer.operation_history.inspect.start == T1


def test_illegal_transition_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        apply_proposal(at(S.AVAILABLE), Proposal(next_state=S.DELETING), now=T0, generation=1)


def test_errors_count_and_clear() -> None:
    status = at(S.REGISTERING)
    for n in (1, 2, 3):
        status = apply_proposal(status, Proposal(error=(ErrorType.REGISTRATION, "refused")),
                                now=T0, generation=1)
        assert status.error_count == n
        assert status.operational_status is OperationalStatus.ERROR
    status = apply_proposal(status, Proposal(clear_error=True), now=T0, generation=1)
    assert (status.error_type, status.error_message, status.error_count) == (None, None, 0)
    assert status.operational_status is OperationalStatus.OK


@pytest.mark.parametrize(("state", "expected"), [
    (None, OperationalStatus.DISCOVERED),
    (S.UNMANAGED, OperationalStatus.DISCOVERED),
    (S.AVAILABLE, OperationalStatus.OK),
])
def test_operational_status_is_derived(state: S | None, expected: OperationalStatus) -> None:
    assert apply_proposal(at(state), Proposal(), now=T0, generation=1
                          ).operational_status is expected


def test_detached_sticks_until_cleared() -> None:
    status = apply_proposal(at(S.PROVISIONED), Proposal(
        operational_status=OperationalStatus.DETACHED, forget_registration=True),
        now=T0, generation=1)
    assert status.operational_status is OperationalStatus.DETACHED
    assert status.provisioning is not None and status.provisioning.id is None
    status = apply_proposal(status, Proposal(), now=T0, generation=1)
    assert status.operational_status is OperationalStatus.DETACHED
    status = apply_proposal(status, Proposal(clear_detached=True), now=T0, generation=1)
    assert status.operational_status is OperationalStatus.OK


def test_condition_transition_time_moves_only_with_its_status() -> None:
    spec = ConditionSpec("ProfileValid", ConditionStatus.FALSE, "ProfileDoesNotFit", "a")
    status = apply_proposal(at(S.AVAILABLE), Proposal(conditions=[spec]), now=T0, generation=1)
    again = ConditionSpec("ProfileValid", ConditionStatus.FALSE, "ProfileDoesNotFit", "b")
    status = apply_proposal(status, Proposal(conditions=[again]), now=T1, generation=2)
    (cond,) = status.conditions
    assert cond.last_transition_time == T0 and cond.message == "b"
    assert cond.observed_generation == 2
    fits = ConditionSpec("ProfileValid", ConditionStatus.TRUE, "ProfileFits", "ok")
    status = apply_proposal(status, Proposal(conditions=[fits]), now=T1, generation=2)
    assert status.conditions[0].last_transition_time == T1


def test_error_backoff_doubles_and_is_capped() -> None:
    settings = BareMetalHostSettings(error_backoff_base=10, error_backoff_cap=600, jitter=0.1,
                                     poll_floor=1)
    middle = [error_delay(n, settings, lambda: 0.5) for n in range(1, 10)]
    assert middle[:4] == [10, 20, 40, 80]
    assert max(middle) == 600 and middle[-1] == 600
    assert error_delay(100, settings, lambda: 0.999) <= 600
    assert error_delay(1, settings, lambda: 0.0) == pytest.approx(9.0)


async def test_call_budget_is_a_sliding_minute() -> None:
    clock = FakeClock()
    budget = CallBudget(clock, per_minute=3)
    key = ObjectKey("ns", "h")
    for _ in range(3):
        budget.spend(key)
    with pytest.raises(BudgetExhausted) as raised:
        budget.spend(key)
    assert raised.value.retry_after == pytest.approx(60.0)
    budget.spend(ObjectKey("ns", "other"))  # per host
    await clock.advance(30)
    with pytest.raises(BudgetExhausted) as raised:
        budget.spend(key)
    assert raised.value.retry_after == pytest.approx(30.0)
    await clock.advance(30)
    budget.spend(key)


def test_merge_keeps_false_values_and_combines_lists() -> None:
    a = Proposal(powered_on=True, events=[EventSpec("Normal", "A", "a")],
                 remove_annotations=("x",))
    b = Proposal(powered_on=False, events=[EventSpec("Normal", "B", "b")],
                 remove_annotations=("y",), next_state=S.AVAILABLE)
    merged = a.merged(b)
    assert merged.powered_on is False
    assert [e.reason for e in merged.events] == ["A", "B"]
    assert merged.remove_annotations == ("x", "y")
    assert merged.next_state is S.AVAILABLE
    assert a.merged(Proposal()).powered_on is True


async def test_reference_index_maps_secrets_and_profiles_to_hosts() -> None:
    from racksmith.controllers.baremetalhost.index import HostReferences
    from racksmith.kinds.hostannotations import PROFILE
    from racksmith.runtime.client import Client
    from racksmith.runtime.resources import HOSTS
    from tests.unit.baremetalhost.doubles import ListWatchApi

    def host(name: str, secret: str, profile: str | None, rv: str = "1") -> dict[str, Any]:
        return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv,
                             "annotations": {PROFILE: profile} if profile else {}},
                "spec": {"bmc": {"address": "ipmi://x", "credentialsName": secret},
                         "userData": {"name": "ud"}}}

    api = ListWatchApi([host("a", "s1", "p"), host("b", "s1", None)])
    client = Client(api)  # type: ignore[arg-type]  # a stand-in ApiClient
    index = HostReferences(client)
    informer = client.informer(HOSTS)
    a, b = ObjectKey("ns", "a"), ObjectKey("ns", "b")
    secret = {"metadata": {"namespace": "ns", "name": "s1"}}
    assert index.secret_keys(secret) == []  # no cache yet: nothing to answer from

    async def until(check: Callable[[], bool]) -> None:
        async with asyncio.timeout(5):
            while not check():
                await asyncio.sleep(0)

    informer.acquire()
    try:
        await until(lambda: informer.has_synced)
        assert index.secret_keys(secret) == [a, b]
        assert index.secret_keys({"metadata": {"namespace": "ns", "name": "ud"}}) == [a, b]
        assert index.secret_keys({"metadata": {"namespace": "other", "name": "s1"}}) == []
        assert index.profile_keys({"metadata": {"namespace": "ns", "name": "p"}}) == [a]
        api.send("MODIFIED", host("a", "s2", None, rv="2"))
        await until(lambda: index.secret_keys(secret) == [b])
        assert index.secret_keys(secret) == [b]
        assert index.profile_keys({"metadata": {"namespace": "ns", "name": "p"}}) == []
        api.send("DELETED", host("b", "s1", None, rv="3"))
        await until(lambda: not index.secret_keys(secret))
        assert index.secret_keys(secret) == []
    finally:
        await informer.release()


def test_all_controllers_includes_the_host_controller_with_a_provisioner() -> None:
    from racksmith.controllers import all_controllers
    from tests.harness.fixture_provisioner import FixtureProvisioner

    assert all_controllers(object(), workers=2) == []
    controller, firmware = all_controllers(object(), workers=2, provisioner=FixtureProvisioner())
    assert controller.name == "baremetalhost" and controller.workers == 2
    assert [str(s.resource) for s in controller.sources] == [  # type: ignore[attr-defined]
        "baremetalhosts.metal3.io", "secrets",
        "baremetalhostprofiles.metal.racksmith.io", "hardwaredata.metal3.io",
        "hostfirmwaresettings.metal3.io"]
    assert firmware.name == "firmware"
    assert [str(s.resource) for s in firmware.sources] == [  # type: ignore[attr-defined]
        "baremetalhosts.metal3.io", "hostfirmwaresettings.metal3.io"]
