"""Structural defaulting, mirroring apiextensions-apiserver's structuraldefaulting tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from racksmith.apiserver.schema import apply_defaults

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "default": {},
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "auto"},
                "nullableWithDefault": {"type": "string", "nullable": True, "default": "d"},
                "noDefault": {"type": "string"},
                "nested": {"type": "object", "default": {"a": "x"}, "properties": {
                    "a": {"type": "string"}, "b": {"type": "integer", "default": 2}}},
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer", "default": 80}}}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"v": {"type": "string", "default": "z"}}}},
                "ints": {"type": "array", "items": {"type": "integer", "default": 7}},
                "listDefault": {"type": "array", "default": [{"name": "n"}], "items": {
                    "type": "object", "properties": {"name": {"type": "string"},
                                                     "port": {"type": "integer",
                                                              "default": 9}}}},
            },
        },
        "metadata": {"type": "object", "default": {"name": "nope"}},
    },
}

CASES: list[tuple[str, Any, Any]] = [
    ("missing spec is defaulted then defaulted inside", {},
     {"spec": {"replicas": 1, "mode": "auto", "nullableWithDefault": "d",
               "nested": {"a": "x", "b": 2}, "listDefault": [{"name": "n", "port": 9}]}}),
    ("present values kept", {"spec": {"replicas": 5, "mode": "m", "nullableWithDefault": "q",
                                      "nested": {"a": "y", "b": 3}, "listDefault": []}},
     {"spec": {"replicas": 5, "mode": "m", "nullableWithDefault": "q",
               "nested": {"a": "y", "b": 3}, "listDefault": []}}),
    ("null non-nullable with default gets default",
     {"spec": {"replicas": None, "nested": {}, "listDefault": [],
               "nullableWithDefault": "q", "mode": "m"}},
     {"spec": {"replicas": 1, "nested": {"b": 2}, "listDefault": [],
               "nullableWithDefault": "q", "mode": "m"}}),
    ("null nullable is kept", {"spec": {"nullableWithDefault": None, "replicas": 1,
                                        "mode": "m", "nested": {"b": 1}, "listDefault": []}},
     {"spec": {"nullableWithDefault": None, "replicas": 1, "mode": "m", "nested": {"b": 1},
               "listDefault": []}}),
    ("null without default is pruned", {"spec": {"noDefault": None, "replicas": 1,
                                                 "mode": "m", "nullableWithDefault": "q",
                                                 "nested": {"b": 1}, "listDefault": []}},
     {"spec": {"replicas": 1, "mode": "m", "nullableWithDefault": "q", "nested": {"b": 1},
               "listDefault": []}}),
    ("array items and additionalProperties",
     {"spec": {"items": [{"name": "a"}, {"name": "b", "port": 1}], "labels": {"k": {}},
               "ints": [1, None], "replicas": 1, "mode": "m", "nullableWithDefault": "q",
               "nested": {"b": 1}, "listDefault": []}},
     {"spec": {"items": [{"name": "a", "port": 80}, {"name": "b", "port": 1}],
               "labels": {"k": {"v": "z"}}, "ints": [1, 7], "replicas": 1, "mode": "m",
               "nullableWithDefault": "q", "nested": {"b": 1}, "listDefault": []}}),
]


@pytest.mark.parametrize(("name", "given", "want"), CASES, ids=[c[0] for c in CASES])
def test_defaults(name: str, given: Any, want: Any) -> None:
    o = copy.deepcopy(given)
    apply_defaults(SCHEMA, o)
    assert o == want


def test_root_metadata_is_not_defaulted() -> None:
    o: dict[str, Any] = {"apiVersion": "v", "kind": "K", "spec": {}}
    apply_defaults(SCHEMA, o)
    assert "metadata" not in o


def test_defaults_are_deep_copies() -> None:
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    apply_defaults(SCHEMA, a)
    apply_defaults(SCHEMA, b)
    a["spec"]["nested"]["a"] = "changed"
    assert b["spec"]["nested"]["a"] == "x"
    assert SCHEMA["properties"]["spec"]["properties"]["nested"]["default"] == {"a": "x"}


def test_defaulting_is_idempotent() -> None:
    o: dict[str, Any] = {"spec": {"items": [{}]}}
    apply_defaults(SCHEMA, o)
    once = copy.deepcopy(o)
    apply_defaults(SCHEMA, o)
    assert o == once


def test_value_validations_carry_no_defaults() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "allOf": [
        {"properties": {"x": {"default": 1}}}]}}}
    o: dict[str, Any] = {"spec": {}}
    apply_defaults(schema, o)
    assert o == {"spec": {}}


def test_scalars_and_schemaless_values_untouched() -> None:
    for value in (1, "x", None, [1, 2]):
        v = copy.deepcopy(value)
        apply_defaults({"type": "object"}, v)
        assert v == value


def test_a_backup_made_without_a_spec_gets_its_enum_default() -> None:
    """A ControlPlaneBackup created by hand with no spec shows REASON Manual:
    its CRD defaults spec to {} so spec.reason's enum default applies."""
    from racksmith.kinds.crdgen import all_crds

    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == "ControlPlaneBackup")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    obj: dict[str, Any] = {"apiVersion": "lcm.racksmith.io/v1alpha1",
                           "kind": "ControlPlaneBackup", "metadata": {"name": "by-hand"}}
    apply_defaults(schema, obj)
    assert obj["spec"] == {"reason": "Manual"}
