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


def test_kind_roles_name_every_kind_and_no_wildcard() -> None:
    """racksmith:kinds:view and :edit aggregate into view and edit with each
    kind's resources by name (and its status, for view), never ``*``."""
    from racksmith.kinds.crdgen import kind_roles

    view, edit = kind_roles()
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    seen = {(g, r) for rule in view["rules"] for g in rule["apiGroups"]
            for r in rule["resources"]}
    for kind_cls in ALL_KINDS:
        assert (kind_cls.info.group, kind_cls.info.plural) in seen, kind_cls.info.kind
    for role in (view, edit):
        for rule in role["rules"]:
            assert "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    assert all(set(rule["verbs"]) == {"get", "list", "watch"} for rule in view["rules"])
