"""Each state table's Mermaid diagram is in its guide, exactly as the table renders it."""

from __future__ import annotations

import pytest

from tests.harness.statetables import DIAGRAMS, ROOT, Diagram, section


@pytest.mark.parametrize("diagram", DIAGRAMS, ids=lambda d: d.key)
def test_the_guide_holds_the_current_diagram(diagram: Diagram) -> None:
    found = section(diagram, (ROOT / diagram.doc).read_text())
    assert len(found) == 1, f"{diagram.doc} needs one section {diagram.key}: {diagram.begin()}"
    assert found[0] == diagram.block(), (
        f"{diagram.doc}'s {diagram.key} diagram is stale: "
        "run `python -m tests.harness.statetables`")


def test_every_diagram_lists_every_state_and_transition() -> None:
    for diagram in DIAGRAMS:
        table = diagram.table()
        text = table.render_mermaid()
        assert text.startswith("stateDiagram-v2\n")
        for state in table.states:
            assert f'state "{state.value}" as {state.name.lower()}' in text
        assert text.count(" --> ") == len(table.transitions) + len(table.final)


def test_keys_and_tables_are_unique() -> None:
    assert len({d.key for d in DIAGRAMS}) == len(DIAGRAMS)
    assert len({(d.module, d.name) for d in DIAGRAMS}) == len(DIAGRAMS)
