"""The GracefulRebootRequest state table: what it refuses, a witness status for every
transition it lists, random requests inside the table, and the controller refusing to
write a phase the table does not list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.maintenance.reboot import (
    DONE,
    GracefulRebootReconciler,
    build_status,
)
from racksmith.controllers.maintenance.reboot_states import REBOOT_PHASES
from racksmith.kinds.lcm import GracefulRebootRequestStatus, MachineProgress
from racksmith.kinds.lcm import PlanPhase as P
from racksmith.planners.maintenance import NodeProgress, NodeState
from racksmith.runtime.statetable import IllegalTransition

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def test_the_table_lists_every_pair_of_its_phases_and_nothing_else(
        illegal_transitions: list[IllegalTransition]) -> None:
    assert REBOOT_PHASES.illegal() == []
    assert set(REBOOT_PHASES.states) == {P.IN_PROGRESS, P.COMPLETED, P.FAILED}
    for never in (P.NOT_STARTED, P.AUTO_PAUSED):
        with pytest.raises(IllegalTransition):
            REBOOT_PHASES.check(P.IN_PROGRESS, never)
        with pytest.raises(IllegalTransition):
            REBOOT_PHASES.check(never, P.IN_PROGRESS)


def done(name: str) -> MachineProgress:
    return MachineProgress(name=name, state=DONE)


def status_in(phase: P | None, *machines: MachineProgress) -> GracefulRebootRequestStatus:
    return GracefulRebootRequestStatus(phase=phase, machines=list(machines))


WITNESS: dict[P, tuple[list[str], list[str], dict[str, MachineProgress]]] = {
    P.IN_PROGRESS: (["a", "b"], [], {"a": done("a")}),
    P.COMPLETED: (["a"], [], {"a": done("a")}),
    P.FAILED: (["a"], ["x"], {"a": done("a")}),
}
"""(order, missing, known) that lead to each phase."""


@pytest.mark.parametrize("t", REBOOT_PHASES.transitions,
                         ids=lambda t: f"{t.source and t.source.value}->{t.target.value}")
def test_every_listed_transition_is_one_build_status_makes(t: Any) -> None:
    order, missing, known = WITNESS[t.target]
    new = build_status(status_in(t.source, *known.values()), order, missing, known, None,
                       None, NOW)
    assert new.phase is t.target


NAMES = ["a", "b", "c"]


@st.composite
def requests(draw: st.DrawFn
             ) -> tuple[GracefulRebootRequestStatus, GracefulRebootRequestStatus]:
    """A request's status before and after one reconcile (of any machines)."""
    order = draw(st.lists(st.sampled_from(NAMES), unique=True))
    missing = draw(st.lists(st.sampled_from(["x", "y"]), unique=True))
    known = {n: done(n) for n in order if draw(st.booleans())}
    rest = [n for n in order if n not in known]
    current = draw(st.sampled_from(rest)) if rest and draw(st.booleans()) else None
    progress = None
    if current is not None:
        progress = NodeProgress(draw(st.sampled_from(list(NodeState))), "m", 50, 1.0)
    old = status_in(draw(st.sampled_from([None, P.IN_PROGRESS, P.COMPLETED, P.FAILED])),
                    *known.values())
    return old, build_status(old, order, missing, known, current, progress, NOW)


@settings(max_examples=300, deadline=None)
@given(requests())
def test_in_any_request_the_phase_is_a_legal_transition(
        drawn: tuple[GracefulRebootRequestStatus, GracefulRebootRequestStatus]) -> None:
    old, new = drawn
    assert new.phase is not None
    assert REBOOT_PHASES.is_allowed(old.phase, new.phase)


class Recording:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def write(*args: Any, **kw: Any) -> bool:
            self.writes.append(name)
            return True
        return write


async def test_the_controller_refuses_a_phase_the_table_does_not_list(
        illegal_transitions: list[IllegalTransition]) -> None:
    # A status edited to a plan's phase: the next write would move it NotStarted → InProgress.
    client = ApiClient()
    try:
        reconciler = GracefulRebootReconciler(client)
        kube = Recording()
        reconciler.kube = kube  # type: ignore[assignment]
        with pytest.raises(IllegalTransition):
            await reconciler._write({"metadata": {"name": "demo"}}, status_in(P.NOT_STARTED),
                                    ["a"], [], {}, "a",
                                    NodeProgress(NodeState.DRAINING, "", 30, 1.0), NOW)
    finally:
        await client.close()
    assert kube.writes == []
    assert [(e.source, e.target) for e in illegal_transitions] == [(P.NOT_STARTED,
                                                                    P.IN_PROGRESS)]


def test_the_last_machine_done_is_not_completed_while_its_maintenance_is_held() -> None:
    # The last machine's Done is written before its NodeMaintenanceRequest is deleted:
    # the request stays InProgress until a reconcile finds no maintenance held.
    finished = NodeProgress(NodeState.READY_TO_FINISH, "maintenance done", 100, 0.0)
    held = build_status(status_in(P.IN_PROGRESS, done("a")), ["a", "b"], [],
                        {"a": done("a")}, "b", finished, NOW)
    assert [m.state for m in held.machines] == [DONE, DONE]
    assert held.phase is P.IN_PROGRESS
    released = build_status(held, ["a", "b"], [], {m.name: m for m in held.machines},
                            None, None, NOW)
    assert released.phase is P.COMPLETED
    failed = build_status(status_in(P.IN_PROGRESS, done("a")), ["a"], ["x"], {}, "a",
                          finished, NOW)
    assert failed.phase is P.IN_PROGRESS
