"""State tables: the legal transitions of one status field, declared as data.

Owns ``Transition`` (source → target and when it happens), ``StateTable``
(the states one status field may hold and every transition between them a
controller may write), ``IllegalTransition`` (what ``StateTable.check``
raises for any other pair) and the Mermaid ``stateDiagram-v2`` of a table
that the user guides embed (a unit test keeps each guide's copy equal to
``render_mermaid()``).

Conventions: ``None`` is an object whose status names no state yet (drawn
as ``[*]``); staying in a state is not a transition and is always allowed;
``final`` lists the states from which the object goes away (drawn as
``state --> [*]``). Tables are built by the modules that own a state field
(``racksmith.controllers.machine.states``, ``racksmith.controllers.update.states``,
``racksmith.planners.maintenance_states``, …); the BareMetalHost controller
keeps its richer table of its own (``racksmith.controllers.baremetalhost.states``).

``IllegalTransition`` is a ``TemporaryError``: a reconcile that lets it
propagate writes nothing, is logged and counted by the runtime and is tried
again with the key's exponential backoff (capped, so never a hot loop).
Not a ``PermanentError``: a refusal most often means the decision was made
on a view that was behind the object (a cache after a restart, a write of
another controller in flight), and the next read decides again from where
the object really is; waiting for a watch event instead stalled a plan
after a control-plane SIGKILL (an e2e run of 2026-12-02). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from racksmith.runtime.result import TemporaryError

E = TypeVar("E", bound=Enum)


@dataclass(frozen=True)
class Transition(Generic[E]):
    """``source`` → ``target``; ``when``: what makes the controller write it."""

    source: E | None
    target: E
    when: str


class IllegalTransition(TemporaryError):
    """A controller was about to write a transition its table does not list."""

    def __init__(self, what: str, source: Enum | None, target: Enum) -> None:
        super().__init__(f"{what}: {label(source)} → {label(target)} is not in the state "
                         "table; the status is left as it is")
        self.what = what
        self.source = source
        self.target = target


def label(state: Enum | None) -> str:
    """How a state reads in messages (``""`` for no state)."""
    return '""' if state is None else str(state.value)


def node(state: Enum | None) -> str:
    """The Mermaid id of a state (``[*]`` for no state)."""
    return "[*]" if state is None else state.name.lower()


@dataclass(frozen=True)
class StateTable(Generic[E]):
    """The states of one status field and its legal transitions (see the module docstring).

    ``what`` names the field in messages (e.g. ``Machine status.phase``).
    """

    what: str
    states: tuple[E, ...]
    transitions: tuple[Transition[E], ...]
    final: tuple[tuple[E, str], ...] = ()
    _pairs: frozenset[tuple[E | None, E]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pairs = [(t.source, t.target) for t in self.transitions]
        if len(pairs) != len(set(pairs)):
            raise ValueError(f"{self.what}: a transition is listed twice")
        known = set(self.states)
        for t in self.transitions:
            if t.source == t.target:
                raise ValueError(f"{self.what}: {label(t.source)} → itself is no transition")
            if (t.source is not None and t.source not in known) or t.target not in known:
                raise ValueError(f"{self.what}: {label(t.source)} → {label(t.target)} "
                                 "names a state the table does not list")
            if ":" in t.when or "\n" in t.when:
                raise ValueError(f"{self.what}: 'when' must fit one Mermaid label: {t.when!r}")
        object.__setattr__(self, "_pairs", frozenset(pairs))

    def is_allowed(self, source: E | None, target: E) -> bool:
        """``source`` → ``target`` is listed, or is no change."""
        return source == target or (source, target) in self._pairs

    def check(self, source: E | None, target: E) -> None:
        """Raise ``IllegalTransition`` unless ``is_allowed(source, target)``."""
        if not self.is_allowed(source, target):
            raise IllegalTransition(self.what, source, target)

    def transition(self, source: E | None, target: E) -> Transition[E]:
        """The table entry for ``source`` → ``target``; raises ``IllegalTransition``."""
        found = next((t for t in self.transitions
                      if t.source == source and t.target == target), None)
        if found is None:
            raise IllegalTransition(self.what, source, target)
        return found

    def targets(self, source: E | None) -> list[E]:
        """Every state ``source`` may lead to, in table order."""
        return [t.target for t in self.transitions if t.source == source]

    def illegal(self) -> list[tuple[E | None, E]]:
        """Every pair of distinct states (``None`` first) the table refuses."""
        sources: Iterable[E | None] = (None, *self.states)
        return [(s, t) for s in sources for t in self.states
                if s != t and (s, t) not in self._pairs]

    def render_mermaid(self) -> str:
        """The table as a Mermaid ``stateDiagram-v2`` (for the user guides)."""
        lines = ["stateDiagram-v2"]
        for state in self.states:
            lines.append(f'    state "{label(state)}" as {node(state)}')
        for t in self.transitions:
            lines.append(f"    {node(t.source)} --> {node(t.target)}: {t.when}")
        for state, when in self.final:
            lines.append(f"    {node(state)} --> [*]: {when}")
        return "\n".join(lines) + "\n"
