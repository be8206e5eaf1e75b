"""The Volume state table: what it refuses, a witness world for every transition it
lists, the planner's decisions (its table tests and random worlds) inside it, and the
committer refusing an illegal transition before it writes anything."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.clock import FakeClock
from racksmith.controllers.volume.commit import Committer, Raw
from racksmith.controllers.volume.observed import Observed
from racksmith.controllers.volume.plan import decide
from racksmith.controllers.volume.states import PHASES
from racksmith.controllers.volume.status import phase_of
from racksmith.kinds.storage import Volume
from racksmith.kinds.storage import VolumePhase as P
from racksmith.runtime.result import TemporaryError
from racksmith.runtime.statetable import IllegalTransition
from tests.harness.statetables import Recording
from tests.unit.volume import builders as b
from tests.unit.volume.builders import PREP, UNPREP
from tests.unit.volume.test_volume_plan import CASES


def test_the_table_refuses_exactly_leaving_terminating_but_to_failed(
        illegal_transitions: list[IllegalTransition]) -> None:
    assert set(PHASES.illegal()) == {(P.TERMINATING, P.PENDING), (P.TERMINATING, P.AVAILABLE)}
    with pytest.raises(IllegalTransition) as err:
        PHASES.check(P.TERMINATING, P.AVAILABLE)
    assert isinstance(err.value, TemporaryError)
    assert "Volume status.phase: Terminating → Available" in err.value.message


def with_phase(volume: Volume, phase: P | None) -> Volume:
    status = volume.status.model_copy(update={"phase": phase}) if volume.status else None
    return volume.model_copy(update={"status": status})


def witness(source: P | None, target: P) -> Observed:
    """A world in which a Volume in ``source`` is decided into ``target``."""
    deleting = source is P.TERMINATING or target is P.TERMINATING
    if target is P.PENDING:
        return b.observed(with_phase(b.volume(), source))
    if target is P.AVAILABLE:
        return b.observed(with_phase(b.volume(job=PREP), source), result=b.ok())
    if target is P.FAILED and deleting:
        return b.observed(with_phase(b.volume(job=UNPREP, deleting=True), source),
                          result=b.failure(UNPREP))
    if target is P.FAILED:
        return b.observed(with_phase(b.volume(), source), sc=None)
    return b.observed(with_phase(b.volume(deleting=True), source))


@pytest.mark.parametrize("t", PHASES.transitions,
                         ids=lambda t: f"{t.source and t.source.value}->{t.target.value}")
def test_every_listed_transition_is_one_the_planner_makes(t: Any) -> None:
    step = decide(witness(t.source, t.target))
    assert step.ready is not None
    assert phase_of(step.ready) is t.target


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_planner_table_cases_are_legal(case: Any) -> None:
    status = case.observed.volume.status
    step = decide(case.observed)
    if step.ready is not None:
        assert PHASES.is_allowed(status.phase if status else None, phase_of(step.ready))


# --- random worlds ------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> Observed:
    """A random world around Volume v1; only what Kubernetes guarantees holds: a Volume
    is Terminating only once its deletionTimestamp is set (never cleared)."""
    phase = draw(st.sampled_from([None, *P]))
    deleting = phase is P.TERMINATING or draw(st.booleans())
    prepared = draw(st.booleans())
    volume = b.volume(job=draw(st.sampled_from([None, PREP, UNPREP, "garbage"])),
                      finalizer=draw(st.booleans()), deleting=deleting,
                      device="loop3" if prepared else None, size="1Gi" if prepared else None)
    pv = draw(st.sampled_from([
        None, b.pv(), b.pv(phase="Bound", claim="default/data"), b.pv(phase="Failed"),
        b.pv(deleting=True), b.pv(deleting=True, phase="Bound", claim="default/data"),
        b.pv(deleting=True, finalizer=False), b.pv(owner="other")]))
    result = draw(st.sampled_from([
        None, b.ok(), b.ok(size=None), b.failure(), b.ok(UNPREP), b.failure(UNPREP),
        b.ok("prepare:ffffffff")]))
    return b.observed(with_phase(volume, phase),
                      sc=draw(st.sampled_from([b.SC, None])), node=draw(st.booleans()),
                      pv_=pv, result=result)


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_in_any_world_the_planned_phase_is_a_legal_transition(world: Observed) -> None:
    status = world.volume.status
    step = decide(world)
    if step.ready is not None:
        current = status.phase if status else None
        assert PHASES.is_allowed(current, phase_of(step.ready)), (current, step)


# --- the committer refuses ------------------------------------------------------------------


class _Log:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: None


async def test_the_committer_refuses_an_illegal_transition_before_any_write(
        illegal_transitions: list[IllegalTransition]) -> None:
    # A status that says Terminating on a Volume that is not being deleted (edited by
    # hand): the planner prepares it again, the table refuses Terminating → Pending.
    volume = with_phase(b.volume(), P.TERMINATING)
    step = decide(b.observed(volume))
    assert step.ready is not None and phase_of(step.ready) is P.PENDING
    kube = Recording()
    committer = Committer(kube, FakeClock())  # type: ignore[arg-type]
    raw = volume.model_dump(mode="json", by_alias=True, exclude_none=True)
    with pytest.raises(IllegalTransition):
        await committer.commit(volume, Raw(volume=raw), step, log=_Log())
    assert kube.calls == []
    assert [(e.source, e.target) for e in illegal_transitions] == [(P.TERMINATING, P.PENDING)]
