"""docs/api-reference.md is generated and current."""

from __future__ import annotations

from pathlib import Path

from racksmith.kinds.docgen import render_reference
from racksmith.kinds.registry import ALL_KINDS

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "api-reference.md"


def test_reference_is_up_to_date() -> None:
    assert REFERENCE.read_text() == render_reference(), (
        "docs/api-reference.md is stale: run "
        "`.venv/bin/python -m racksmith.kinds.docgen > docs/api-reference.md`"
    )


def test_reference_covers_every_kind() -> None:
    text = render_reference()
    for kind_cls in ALL_KINDS:
        assert f"\n### {kind_cls.info.kind}\n" in text
    assert "| `.spec.nodeName` | string |  | yes |" in text
    assert '| `.spec.mode` | enum | `"Filesystem"` |' in text
    assert "| `.spec.sparseLoopDevice.size` | quantity |" in text
    assert "exactly one of: `sparseLoopDevice`; `rawBlockDevice`; `lvmLogicalVolume`" in text
    assert "SIZE" in text and "NODE *(wide)*" not in text
