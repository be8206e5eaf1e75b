"""Structural pruning, and the prune-then-validate property."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.apiserver.schema import prune, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                     "properties": {"known": {"type": "object", "properties": {
                         "a": {"type": "string"}}}}},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "properties": {"spec": {"type": "object", "properties": {
                             "x": {"type": "string"}}}}},
            "free": {"type": "object", "additionalProperties": True},
            "untyped": {"type": "array"},
            "listOfPreserved": {"type": "array", "items": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}

CASES: list[tuple[str, Any, Any, list[str]]] = [
    ("unknown top-level field", {"spec": {}, "extra": 1}, {"spec": {}}, ["extra"]),
    ("unknown spec field", {"spec": {"replicas": 1, "foo": {"a": 1}}}, {"spec": {"replicas": 1}},
     ["spec.foo"]),
    ("unknown in array items", {"spec": {"items": [{"name": "a", "bar": 1}, {"baz": 2}]}},
     {"spec": {"items": [{"name": "a"}, {}]}}, ["spec.items[0].bar", "spec.items[1].baz"]),
    ("additionalProperties kept", {"spec": {"labels": {"a": "b", "c": "d"}}},
     {"spec": {"labels": {"a": "b", "c": "d"}}}, []),
    ("preserve-unknown keeps unknown, prunes known", {
        "spec": {"blob": {"anything": {"deep": 1}, "known": {"a": "x", "b": "y"}}}},
     {"spec": {"blob": {"anything": {"deep": 1}, "known": {"a": "x"}}}},
     ["spec.blob.known.b"]),
    ("embedded keeps apiVersion/kind/metadata, prunes meta unknowns", {
        "spec": {"embedded": {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": "p", "bogus": 1},
                              "spec": {"x": "1", "y": "2"}, "zzz": 1}}},
     {"spec": {"embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                            "spec": {"x": "1"}}}},
     ["spec.embedded.metadata.bogus", "spec.embedded.spec.y", "spec.embedded.zzz"]),
    ("additionalProperties true keeps all", {"spec": {"free": {"a": {"b": 1}}}},
     {"spec": {"free": {"a": {"b": 1}}}}, []),
    ("array without items prunes object contents", {"spec": {"untyped": [{"a": 1}, 2]}},
     {"spec": {"untyped": [{}, 2]}}, ["spec.untyped[0].a"]),
    ("preserved items", {"spec": {"listOfPreserved": [{"x": 1}]}},
     {"spec": {"listOfPreserved": [{"x": 1}]}}, []),
    ("status preserved", {"status": {"kopf": {"progress": {}}}},
     {"status": {"kopf": {"progress": {}}}}, []),
]


@pytest.mark.parametrize(("name", "given_", "want", "pruned"), CASES,
                         ids=[c[0] for c in CASES])
def test_prune(name: str, given_: Any, want: Any, pruned: list[str]) -> None:
    o = copy.deepcopy(given_)
    assert sorted(prune(SCHEMA, o)) == sorted(pruned)
    assert o == want


def test_root_meta_kept() -> None:
    o = {"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w", "whatever": 1},
         "spec": {}}
    assert prune({"type": "object", "properties": {"spec": {"type": "object"}}}, o) == []
    assert o["metadata"] == {"name": "w", "whatever": 1}
    assert o["apiVersion"] == "x/v1"


def test_root_preserve_unknown() -> None:
    o = {"apiVersion": "v", "kind": "k", "anything": 1}
    assert prune({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, o) == []
    assert o["anything"] == 1


json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["replicas", "items", "name", "labels", "blob", "x",
                                       "known", "a", "spec"]), inner, max_size=4),
    max_leaves=12,
)


def unknown_field_causes(schema: dict[str, Any], obj: Any) -> list[Any]:
    return [c for c in validate(schema, obj) if "unknown field" in c.message]


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_prune_is_idempotent_and_leaves_nothing_unknown(value: Any) -> None:
    o = {"apiVersion": "x/v1", "kind": "W", "metadata": {}, "spec": value}
    prune(SCHEMA, o)
    assert unknown_field_causes(SCHEMA, o) == []
    again = copy.deepcopy(o)
    assert prune(SCHEMA, again) == []
    assert again == o
