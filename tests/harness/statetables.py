"""State tables in the tests: the guard every test runs under, and the docs' diagrams.

Owns:

- ``state_tables_hold`` (autouse, registered by ``tests/conftest.py``): a
  test fails when any code it runs in-process asks a
  ``racksmith.runtime.statetable.StateTable`` for a transition the table
  refuses — so every transition the controllers make in the unit and
  integration tests is checked against its table, whatever the test
  asserts. A test that provokes a refusal on purpose asks for the
  ``illegal_transitions`` fixture (the refusals seen, in order) instead.
- ``Recording``: a client double that records every call, for the tests
  that a refused transition is refused before anything is written.
- ``DIAGRAMS`` and ``section``: where each table's Mermaid diagram lives in
  the user guides, between ``<!-- BEGIN state-diagram KEY ... -->`` and
  ``<!-- END state-diagram KEY -->``; ``tests/unit/test_state_diagrams.py``
  checks each guide holds exactly ``render_mermaid()``'s output, and
  ``python -m tests.harness.statetables`` rewrites the sections.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from racksmith.runtime.statetable import IllegalTransition, StateTable

ROOT = Path(__file__).resolve().parents[2]
_SEEN = pytest.StashKey[list[IllegalTransition]]()
_EXPECTED = pytest.StashKey[bool]()


class Recording:
    """A client double that records every call (none is expected)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return None
        return call


@pytest.fixture(autouse=True)
def state_tables_hold(request: pytest.FixtureRequest,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if a state table refused a transition (see the module docstring)."""
    seen: list[IllegalTransition] = []
    request.node.stash[_SEEN] = seen
    original = StateTable.check

    def check(self: StateTable[Any], source: Any, target: Any) -> None:
        try:
            original(self, source, target)
        except IllegalTransition as exc:
            seen.append(exc)
            raise

    monkeypatch.setattr(StateTable, "check", check)
    yield
    if seen and not request.node.stash.get(_EXPECTED, False):
        pytest.fail("a state table refused a transition: "
                    + "; ".join(exc.message for exc in seen), pytrace=False)


@pytest.fixture
def illegal_transitions(request: pytest.FixtureRequest,
                        state_tables_hold: None) -> list[IllegalTransition]:
    """The transitions refused during this test, which expects some."""
    request.node.stash[_EXPECTED] = True
    return request.node.stash[_SEEN]


# --- the diagrams in the docs ---------------------------------------------------------


@dataclass(frozen=True)
class Diagram:
    """Table ``name`` of module ``module`` is drawn in ``doc`` under ``key``."""

    key: str
    doc: str
    module: str
    name: str

    def table(self) -> StateTable[Any]:
        import importlib

        table: StateTable[Any] = getattr(importlib.import_module(self.module), self.name)
        return table

    def begin(self) -> str:
        return (f"<!-- BEGIN state-diagram {self.key}: generated from "
                f"{self.module}.{self.name}.render_mermaid(), do not edit -->")

    def end(self) -> str:
        return f"<!-- END state-diagram {self.key} -->"

    def block(self) -> str:
        """The whole section as the doc must hold it."""
        return f"{self.begin()}\n```mermaid\n{self.table().render_mermaid()}```\n{self.end()}"


DIAGRAMS = (
    Diagram("machine-phase", "docs/cluster.md", "racksmith.controllers.machine.states",
            "PHASES"),
    Diagram("volume-phase", "docs/volumes.md", "racksmith.controllers.volume.states",
            "PHASES"),
    Diagram("node-maintenance-state", "docs/maintenance.md",
            "racksmith.planners.maintenance_states", "NODE_FLOW"),
    Diagram("update-plan-phase", "docs/maintenance.md", "racksmith.controllers.update.states",
            "PLAN_PHASES"),
    Diagram("graceful-reboot-phase", "docs/maintenance.md",
            "racksmith.controllers.maintenance.reboot_states", "REBOOT_PHASES"),
)


def section(diagram: Diagram, text: str) -> list[str]:
    """Every section of ``diagram`` in ``text`` (markers included)."""
    pattern = (re.escape(f"<!-- BEGIN state-diagram {diagram.key}:") + r".*?"
               + re.escape(diagram.end()))
    return re.findall(pattern, text, re.S)


def rewrite() -> list[str]:
    """Replace every section with the current diagram; the docs changed."""
    changed: list[str] = []
    for diagram in DIAGRAMS:
        path = ROOT / diagram.doc
        text = path.read_text()
        found = section(diagram, text)
        if len(found) != 1:
            raise SystemExit(f"{diagram.doc}: {len(found)} sections {diagram.key}; "
                             f"add one: {diagram.begin()} … {diagram.end()}")
        new = text.replace(found[0], diagram.block())
        if new != text:
            path.write_text(new)
            changed.append(f"{diagram.doc} ({diagram.key})")
    return changed


if __name__ == "__main__":
    print("\n".join(rewrite()) or "every diagram is current")
