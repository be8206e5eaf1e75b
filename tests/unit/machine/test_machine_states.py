"""The Machine state table: what it refuses, a witness world for every transition it
lists, the planner's decisions (its table tests and random worlds) inside it, and the
committer refusing an illegal transition before it writes anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racksmith.clock import FakeClock
from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.commit import Committer, Raw, writes_status
from racksmith.controllers.machine.observed import Observed
from racksmith.controllers.machine.plan import decide
from racksmith.controllers.machine.states import PHASES
from racksmith.kinds.cluster import MachinePhase as P
from racksmith.kinds.metal import ProvisioningState
from racksmith.runtime.result import TemporaryError
from racksmith.runtime.statetable import IllegalTransition
from tests.harness.statetables import Recording
from tests.unit.machine import builders as b
from tests.unit.machine.test_machine_plan import CASES, M, lcm_spec, provisioned


def test_the_table_refuses_exactly_failed_before_a_host_and_leaving_deleting(
        illegal_transitions: list[IllegalTransition]) -> None:
    assert set(PHASES.illegal()) == {
        (None, P.FAILED), (P.PENDING, P.FAILED),
        *((P.DELETING, t) for t in P if t is not P.DELETING)}
    assert PHASES.targets(P.DELETING) == []
    with pytest.raises(IllegalTransition) as err:
        PHASES.check(P.DELETING, P.READY)
    assert isinstance(err.value, TemporaryError)
    assert "Machine status.phase: Deleting → Ready" in err.value.message
    PHASES.check(P.READY, P.READY)  # staying is no transition


def _status(phase: P | None) -> dict[str, Any] | None:
    if phase is None:
        return None
    return {"phase": phase.value, "hostRef": {"name": "h1"}}


WITNESS: dict[P, Callable[[P | None], Observed]] = {
    # The claimed host does not carry the image yet (a missing Cluster keeps the phase).
    P.PENDING: lambda s: b.observed(b.machine(status=_status(s)),
                                    hosts=(b.host("h1", consumer=M),)),
    P.PROVISIONING: lambda s: b.observed(
        b.machine(status=_status(s)),
        hosts=(b.host("h1", consumer=M, image=b.IMAGE, user_data="m1-user-data", online=True),),
        ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()), user_data=b.user_data()),
    P.DEPLOYING: lambda s: b.observed(
        b.machine(status=_status(s)), **provisioned(lcm=b.lcm(lcm_spec(), phase="Ready"))),
    P.READY: lambda s: b.observed(
        b.machine(status=_status(s)), **provisioned(lcm=b.lcm(lcm_spec(), phase="Ready")),
        node=b.node(labels={"node-role.kubernetes.io/node": ""})),
    P.FAILED: lambda s: b.observed(b.machine(status=_status(s))),
    P.DELETING: lambda s: b.observed(b.machine(status=_status(s), deleting=True),
                                     **provisioned()),
}
"""A world that leads to each phase from (almost) any phase."""


@pytest.mark.parametrize("t", PHASES.transitions,
                         ids=lambda t: f"{t.source and t.source.value}->{t.target.value}")
def test_every_listed_transition_is_one_the_planner_makes(t: Any) -> None:
    step = decide(WITNESS[t.target](t.source))
    assert writes_status(step.action)
    assert step.phase is t.target


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_planner_table_cases_are_legal(case: Any) -> None:
    world = case.world()
    status = world.machine.status
    step = decide(world)
    if writes_status(step.action):
        assert PHASES.is_allowed(status.phase if status else None, step.phase)


# --- random worlds ------------------------------------------------------------------------

STATES = [s.value for s in ProvisioningState]


def pick(good: Any, *others: Any) -> st.SearchStrategy[Any]:
    """``good`` (what a deployed machine sees) half the time, else one of ``others``."""
    return st.one_of(st.just(good), st.sampled_from(others))


@st.composite
def worlds(draw: st.DrawFn) -> Observed:
    """A random world around Machine m1, each object as a deployed machine sees it
    half the time; only what Kubernetes guarantees holds: a Machine is Deleting
    only once its deletionTimestamp is set (never cleared)."""
    phase = draw(st.sampled_from([None, *P]))
    deleting = phase is P.DELETING or draw(st.booleans())
    status: dict[str, Any] | None = None
    if phase is not None or draw(st.booleans()):
        status = {"phase": phase.value if phase else None}
        if draw(st.booleans()):
            status["hostRef"] = {"name": "h1"}
        if draw(st.booleans()):
            status["conditions"] = [{"type": n.DRAINED, "status": "True", "reason": "Drained"}]
    m = b.machine(status=status, deleting=deleting, finalizer=draw(pick(True, False)))
    hosts = []
    if draw(pick(True, False)):
        consumer = draw(pick(m, b.machine("m2", uid="uid-m2"), None))
        carries = draw(pick(True, False))
        hosts.append(b.host("h1", state=draw(st.one_of(
            st.sampled_from(["provisioned", "provisioning", "available"]),
            st.sampled_from(STATES))), consumer=consumer,
            image=b.IMAGE if carries else None,
            user_data="m1-user-data" if carries else None, online=carries,
            error=draw(st.sampled_from([None, "boom"]))))
    if draw(st.booleans()):
        hosts.append(b.host("h2", state=draw(st.sampled_from(STATES))))
    spec = lcm_spec()
    lcm = draw(pick(b.lcm(spec, phase="Ready"), None, b.lcm(spec),
                    b.lcm({**spec, "release": "old"}), b.lcm(spec, phase="Deploying"),
                    b.lcm(spec, phase="Ready", generation=2),
                    b.lcm(spec, phase="Ready", deleting=True)))
    node = draw(pick(b.node(labels={"node-role.kubernetes.io/node": ""}), None, b.node(),
                     b.node(ready=False), b.node(unschedulable=True)))
    return b.observed(
        m,
        cluster=draw(pick(b.cluster(), None)),
        release=draw(pick(b.release(), None, b.release(os_image=None))),
        hosts=tuple(hosts),
        ipamhost=draw(pick(b.ipamhost(), None, b.ipamhost("Pending"),
                           b.ipamhost("Error", messages=["bad"]), b.ipamhost(deleting=True))),
        lcm=lcm, node=node,
        pods=tuple(draw(st.lists(st.sampled_from([
            b.pod("web"), b.pod("ds", daemonset=True), b.pod("old", terminating=True)]),
            max_size=2, unique_by=lambda p: p.name))),
        user_data=draw(pick(b.user_data(), None, "stale")),
        agent=draw(pick(b.AGENT, "agent Secret missing")),
        default_image=draw(st.sampled_from([None, b.IMAGE])),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_in_any_world_the_planned_phase_is_a_legal_transition(world: Observed) -> None:
    status = world.machine.status
    step = decide(world)
    if writes_status(step.action):
        current = status.phase if status else None
        assert PHASES.is_allowed(current, step.phase), (current, step.phase, step.action)


# --- the committer refuses ------------------------------------------------------------------


async def test_the_committer_refuses_an_illegal_transition_before_any_write(
        illegal_transitions: list[IllegalTransition]) -> None:
    # A status that says Deleting on a Machine that is not being deleted (edited by hand):
    # the planner walks the checklist again, the table refuses Deleting → Pending.
    m = b.machine(status={"phase": "Deleting"})
    step = decide(b.observed(m, hosts=(b.host("h1", consumer=M),)))
    assert step.phase is P.PENDING and writes_status(step.action)
    kube = Recording()
    committer = Committer(kube, FakeClock())  # type: ignore[arg-type]
    raw = m.model_dump(mode="json", by_alias=True, exclude_none=True)
    with pytest.raises(IllegalTransition):
        await committer.commit(m, Raw(machine=raw), step, log=_Log())
    assert kube.calls == []
    assert [(e.source, e.target) for e in illegal_transitions] == [(P.DELETING, P.PENDING)]


class _Log:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: None
