"""The ClusterUpdatePlan state table: what it refuses, a witness status for every
transition it lists, random observations of a plan inside the table, and the controller
refusing to write (or finish anything for) a plan that would leave Completed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.update import plan as decide
from racksmith.controllers.update.controller import UpdateReconciler, World
from racksmith.controllers.update.plan import MachineView, Observed
from racksmith.controllers.update.states import PLAN_PHASES
from racksmith.kinds.lcm import ClusterUpdatePlan, ClusterUpdatePlanStatus, MachineProgress
from racksmith.kinds.lcm import PlanPhase as P
from racksmith.planners.maintenance import NodeProgress, NodeState
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.statetable import IllegalTransition
from tests.unit.controllers.test_update_plan import (
    NOW,
    a_plan,
    cluster_machines,
    groups,
    observed,
    schedule_of,
)
from tests.unit.controllers.test_update_wiring import Flow
from tests.unit.machine import builders as machine_builders

MACHINES = cluster_machines(workers=2, masters=1)
NAMES = [m.name for m in MACHINES]
SCHEDULE = schedule_of(MACHINES)


def test_the_table_refuses_exactly_leaving_completed(
        illegal_transitions: list[IllegalTransition]) -> None:
    assert set(PLAN_PHASES.illegal()) == {(P.COMPLETED, t) for t in P
                                         if t not in (P.COMPLETED, P.FAILED)}
    assert P.FAILED not in PLAN_PHASES.states
    with pytest.raises(IllegalTransition, match="Completed → InProgress"):
        PLAN_PHASES.check(P.COMPLETED, P.IN_PROGRESS)


def plan_in(phase: P | None, *, commence: bool = False, began: bool = False
            ) -> ClusterUpdatePlan:
    status = None
    if phase is not None or began:
        status = ClusterUpdatePlanStatus(phase=phase, machines=[
            MachineProgress(name="m0", started_at=NOW - timedelta(minutes=1))] if began else [])
    return a_plan(SCHEDULE, commence=commence, status=status)


def reaching(target: P) -> tuple[dict[str, Any], Observed]:
    """How to decide ``target``: the plan's commence and what the reconcile saw."""
    return {
        P.NOT_STARTED: ({}, observed(SCHEDULE)),
        P.IN_PROGRESS: ({"commence": True}, observed(SCHEDULE)),
        P.AUTO_PAUSED: ({}, observed(SCHEDULE, firing=["KubeAPIDown"])),
        P.COMPLETED: ({}, observed(SCHEDULE, done=frozenset(NAMES))),
    }[target]


@pytest.mark.parametrize("t", PLAN_PHASES.transitions,
                         ids=lambda t: f"{t.source and t.source.value}->{t.target.value}")
def test_every_listed_transition_is_one_plan_status_makes(t: Any) -> None:
    kw, obs = reaching(t.target)
    assert decide.plan_status(plan_in(t.source, **kw), obs).phase is t.target


@st.composite
def observations(draw: st.DrawFn) -> tuple[ClusterUpdatePlan, Observed]:
    """A plan that is still driven (any phase but Completed) and what one reconcile saw."""
    phase = draw(st.sampled_from([None, P.NOT_STARTED, P.IN_PROGRESS, P.AUTO_PAUSED]))
    began = draw(st.lists(st.sampled_from(NAMES), unique=True))
    status = ClusterUpdatePlanStatus(phase=phase, machines=[
        MachineProgress(name=n, started_at=NOW - timedelta(minutes=5)) for n in began])
    plan = a_plan(SCHEDULE, status=status if phase is not None or began else None)
    commenced = draw(st.lists(st.booleans(), min_size=len(plan.spec.steps),
                              max_size=len(plan.spec.steps)))
    steps = [s.model_copy(update={"commence": c}) for s, c in zip(plan.spec.steps, commenced,
                                                                   strict=True)]
    plan = plan.model_copy(update={"spec": plan.spec.model_copy(update={"steps": steps})})
    done = frozenset(draw(st.lists(st.sampled_from(NAMES), unique=True)))
    rest = [n for n in NAMES if n not in done]
    busy = draw(st.lists(st.sampled_from(rest), unique=True)) if rest else []
    advanced = {n: NodeProgress(draw(st.sampled_from(list(NodeState))), "", 50, 1.0)
                for n in busy}
    finished = {n: NOW for n in advanced if draw(st.booleans())}
    started = {n: NOW for n in advanced if draw(st.booleans())}
    firing = draw(st.sampled_from([[], ["KubeAPIDown"]]))
    return plan, observed(SCHEDULE, done=done, advanced={
        n: p for n, p in advanced.items() if n not in finished}, finished=finished,
        started=started, firing=firing, remaining=600.0)


@settings(max_examples=400, deadline=None)
@given(observations())
def test_in_any_reconcile_the_phase_is_a_legal_transition(
        seen: tuple[ClusterUpdatePlan, Observed]) -> None:
    plan, obs = seen
    current = plan.status.phase if plan.status else None
    new = decide.plan_status(plan, obs).phase
    assert new is not None
    assert PLAN_PHASES.is_allowed(current, new), (current, new)


# --- the controller refuses ------------------------------------------------------------


class Recording:
    """A Client double: nothing listed, nothing found; records the writes."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    async def list(self, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        return []

    async def get(self, *args: Any, **kw: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        async def write(*args: Any, **kw: Any) -> None:
            self.writes.append(name)
        return write


class Finishing(Flow):
    def __init__(self) -> None:
        self.finished: list[str] = []

    async def finish(self, job: Any) -> None:
        self.finished.append(job.machine)


async def test_a_completed_plan_is_never_written_back_to_in_progress(
        illegal_transitions: list[IllegalTransition]) -> None:
    # A Completed plan is not driven; were it driven while a machine is back at the old
    # release (an earlier step began), its status would say InProgress: refused.
    machines = [MachineView(m.name, m.group, m.roles, release="rel-2") for m in MACHINES]
    machines[-1] = MachineView(MACHINES[-1].name, MACHINES[-1].group, release="rel-1")
    plan = plan_in(P.COMPLETED, began=True)
    client = ApiClient()
    try:
        flow = Finishing()
        reconciler = UpdateReconciler(client, flow)
        kube = Recording()
        reconciler.client = kube  # type: ignore[assignment]
        world = World(machine_builders.cluster(), machines, groups(), [], {},
                      kube)  # type: ignore[arg-type]
        raw = plan.model_dump(mode="json", by_alias=True, exclude_none=True)
        with pytest.raises(IllegalTransition):
            await reconciler._drive(ObjectKey("default", "demo"), world, raw, plan)
    finally:
        await client.close()
    assert kube.writes == [] and flow.finished == []
    assert [(e.source, e.target) for e in illegal_transitions] == [(P.COMPLETED, P.IN_PROGRESS)]
