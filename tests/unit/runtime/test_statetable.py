"""The generic state table: refuses bad tables, answers pairs, renders Mermaid."""

from __future__ import annotations

from enum import StrEnum

import pytest

from racksmith.runtime.result import TemporaryError
from racksmith.runtime.statetable import IllegalTransition, StateTable, Transition


class S(StrEnum):
    A = "A"
    B_C = "B c"


def table(*transitions: Transition[S]) -> StateTable[S]:
    return StateTable("T status.phase", (S.A, S.B_C), transitions, ((S.B_C, "gone"),))


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        table(Transition(S.A, S.B_C, "x"), Transition(S.A, S.B_C, "y"))
    with pytest.raises(ValueError, match="itself"):
        table(Transition(S.A, S.A, "x"))
    with pytest.raises(ValueError, match="one Mermaid label"):
        table(Transition(S.A, S.B_C, "x: y"))
    with pytest.raises(ValueError, match="does not list"):
        StateTable("T", (S.A,), (Transition(S.A, S.B_C, "x"),))


def test_pairs(illegal_transitions: list[IllegalTransition]) -> None:
    t = table(Transition(None, S.A, "new"), Transition(S.A, S.B_C, "on"))
    assert t.is_allowed(S.A, S.B_C) and t.is_allowed(S.B_C, S.B_C)
    assert not t.is_allowed(S.B_C, S.A)
    assert t.targets(None) == [S.A] and t.targets(S.B_C) == []
    assert t.illegal() == [(None, S.B_C), (S.B_C, S.A)]
    assert t.transition(S.A, S.B_C).when == "on"
    with pytest.raises(IllegalTransition) as err:
        t.check(S.B_C, S.A)
    assert isinstance(err.value, TemporaryError)
    assert err.value.message.startswith("T status.phase: B c → A is not in the state table")
    with pytest.raises(IllegalTransition, match='"" → B c'):
        t.check(None, S.B_C)
    assert len(illegal_transitions) == 2


def test_mermaid() -> None:
    t = table(Transition(None, S.A, "new"), Transition(S.A, S.B_C, "on"))
    assert t.render_mermaid() == (
        'stateDiagram-v2\n    state "A" as a\n    state "B c" as b_c\n'
        "    [*] --> a: new\n    a --> b_c: on\n    b_c --> [*]: gone\n")
