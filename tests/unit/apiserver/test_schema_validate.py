"""Table-driven tests of CRD schema validation against kube-apiserver's wording."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.apiserver.errors import Cause
from racksmith.apiserver.schema import validate


def spec_schema(spec: dict[str, Any], **root: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}, **root}


def obj(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}, "spec": spec}


def triples(causes: list[Cause]) -> list[tuple[str, str, str]]:
    return [(c.field, c.message, c.reason) for c in causes]


TI, INV, REQ, NS = ("FieldValueTypeInvalid", "FieldValueInvalid", "FieldValueRequired",
                    "FieldValueNotSupported")

INT_SPEC = {"type": "object", "properties": {"replicas": {"type": "integer"}}}

CASES: list[tuple[str, dict[str, Any], Any, list[tuple[str, str, str]]]] = [
    ("valid integer", INT_SPEC, {"replicas": 3}, []),
    ("string for integer", INT_SPEC, {"replicas": "3"}, [
        ("spec.replicas", 'Invalid value: "string": spec.replicas in body must be of type '
         'integer: "string"', TI)]),
    ("float for integer", INT_SPEC, {"replicas": 1.5}, [
        ("spec.replicas", 'Invalid value: "number": spec.replicas in body must be of type '
         'integer: "number"', TI)]),
    ("bool is not an integer", INT_SPEC, {"replicas": True}, [
        ("spec.replicas", 'Invalid value: "boolean": spec.replicas in body must be of type '
         'integer: "boolean"', TI)]),
    ("null not nullable", INT_SPEC, {"replicas": None}, [
        ("spec.replicas", 'Invalid value: "null": spec.replicas in body must be of type '
         'integer: "null"', TI)]),
    ("null nullable", {"type": "object", "properties": {
        "replicas": {"type": "integer", "nullable": True}}}, {"replicas": None}, []),
    ("int accepted as number", {"type": "object", "properties": {"r": {"type": "number"}}},
     {"r": 3}, []),
    ("float number", {"type": "object", "properties": {"r": {"type": "number"}}},
     {"r": 3.25}, []),
    ("bool not a number", {"type": "object", "properties": {"r": {"type": "number"}}},
     {"r": False}, [("spec.r", 'Invalid value: "boolean": spec.r in body must be of type '
                     'number: "boolean"', TI)]),
    ("object for string", {"type": "object", "properties": {"s": {"type": "string"}}},
     {"s": {}}, [("spec.s", 'Invalid value: "object": spec.s in body must be of type '
                  'string: "object"', TI)]),
    ("array for object", {"type": "object"}, [1],
     [("spec", 'Invalid value: "array": spec in body must be of type object: "array"', TI)]),
    ("boolean ok", {"type": "object", "properties": {"b": {"type": "boolean"}}},
     {"b": False}, []),
    ("required missing", {"type": "object", "required": ["a", "b"],
                          "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
     {"a": "x"}, [("spec.b", "Required value", REQ)]),
    ("required present null is a type error", {
        "type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
     {"a": None}, [("spec.a", 'Invalid value: "null": spec.a in body must be of type '
                    'string: "null"', TI)]),
    ("enum ok", {"type": "string", "enum": ["a", "b"]}, "a", []),
    ("enum bad", {"type": "string", "enum": ["a", "b"]}, "x",
     [("spec", 'Unsupported value: "x": supported values: "a", "b"', NS)]),
    ("enum of ints", {"type": "integer", "enum": [1, 2]}, 3,
     [("spec", 'Unsupported value: 3: supported values: "1", "2"', NS)]),
    ("enum int matches", {"type": "integer", "enum": [1]}, 1, []),
    ("enum true is not 1", {"x-kubernetes-preserve-unknown-fields": True, "enum": [1]}, True,
     [("spec", 'Unsupported value: true: supported values: "1"', NS)]),
    ("pattern ok", {"type": "string", "pattern": "^[a-z]+$"}, "abc", []),
    ("pattern bad", {"type": "string", "pattern": "^[a-z]+$"}, "ABC",
     [("spec", "Invalid value: \"ABC\": spec in body should match '^[a-z]+$'", INV)]),
    ("pattern unanchored", {"type": "string", "pattern": "[0-9]"}, "a1b", []),
    ("minimum", {"type": "integer", "minimum": 1}, 0,
     [("spec", "Invalid value: 0: spec in body should be greater than or equal to 1", INV)]),
    ("minimum equal ok", {"type": "integer", "minimum": 1}, 1, []),
    ("exclusive minimum", {"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 1,
     [("spec", "Invalid value: 1: spec in body should be greater than 1", INV)]),
    ("maximum", {"type": "number", "maximum": 2.5}, 3,
     [("spec", "Invalid value: 3: spec in body should be less than or equal to 2.5", INV)]),
    ("exclusive maximum", {"type": "number", "maximum": 2, "exclusiveMaximum": True}, 2.0,
     [("spec", "Invalid value: 2: spec in body should be less than 2", INV)]),
    ("multipleOf", {"type": "integer", "multipleOf": 5}, 7,
     [("spec", "Invalid value: 7: spec in body should be a multiple of 5", INV)]),
    ("maxLength", {"type": "string", "maxLength": 3}, "abcd",
     [("spec", "Too long: may not be more than 3 bytes", "FieldValueTooLong")]),
    ("minLength", {"type": "string", "minLength": 3}, "ab",
     [("spec", 'Invalid value: "ab": spec in body should be at least 3 chars long', INV)]),
    ("minLength counts characters", {"type": "string", "maxLength": 2}, "éé", []),
    ("maxItems", {"type": "array", "items": {"type": "integer"}, "maxItems": 1}, [1, 2],
     [("spec", "Too many: 2: must have at most 1 items", "FieldValueTooMany")]),
    ("minItems", {"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1],
     [("spec", "Invalid value: [1]: spec in body should have at least 2 items", INV)]),
    ("maxProperties", {"type": "object", "additionalProperties": {"type": "string"},
                       "maxProperties": 1}, {"a": "1", "b": "2"},
     [("spec", "Too many: 2: must have at most 1 items", "FieldValueTooMany")]),
    ("minProperties", {"type": "object", "minProperties": 1}, {},
     [("spec", "Invalid value: {}: spec in body should have at least 1 properties", INV)]),
    ("uniqueItems", {"type": "array", "uniqueItems": True, "items": {"type": "integer"}},
     [1, 2, 1], [("spec", "Invalid value: [1,2,1]: spec in body shouldn't contain "
                  "duplicates", INV)]),
    ("array item path", {"type": "object", "properties": {"items": {
        "type": "array", "items": {"type": "object", "required": ["name"],
                                   "properties": {"name": {"type": "string"}}}}}},
     {"items": [{"name": "a"}, {}]}, [("spec.items[1].name", "Required value", REQ)]),
    ("additionalProperties path", {"type": "object", "additionalProperties": {
        "type": "integer"}}, {"a": 1, "b": "x"},
     [("spec[b]", 'Invalid value: "string": spec[b] in body must be of type integer: '
       '"string"', TI)]),
    ("unknown fields are not validation errors", INT_SPEC, {"replicas": 1, "other": "x"}, []),
    ("int-or-string int", {"x-kubernetes-int-or-string": True}, 80, []),
    ("int-or-string string", {"x-kubernetes-int-or-string": True}, "http", []),
    ("int-or-string bool", {"x-kubernetes-int-or-string": True}, True,
     [("spec", 'Invalid value: "boolean": spec in body must be of type integer,string: '
       '"boolean"', TI)]),
    ("preserve unknown without type accepts anything",
     {"x-kubernetes-preserve-unknown-fields": True}, [1, {"a": None}], []),
    ("format date-time ok", {"type": "string", "format": "date-time"},
     "2024-01-02T03:04:05Z", []),
    ("format date-time bad", {"type": "string", "format": "date-time"}, "yesterday",
     [("spec", 'Invalid value: "yesterday": spec in body must be of type date-time: '
       '"yesterday"', TI)]),
    ("format applies to strings only", {"type": "integer", "format": "date-time"}, 5, []),
    ("unknown format ignored", {"type": "string", "format": "flavour"}, "x", []),
    ("quantity ok", {"type": "string", "format": "quantity"}, "1.5Gi", []),
    ("quantity bad", {"type": "string", "format": "quantity"}, "1.5GiB",
     [("spec", 'Invalid value: "1.5GiB": spec in body must be of type quantity: '
       '"1.5GiB"', TI)]),
    ("list-type set duplicates", {"type": "array", "x-kubernetes-list-type": "set",
                                  "items": {"type": "string"}}, ["a", "b", "a"],
     [("spec[2]", 'Duplicate value: "a"', "FieldValueDuplicate")]),
    ("list-type map duplicates", {
        "type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                   "v": {"type": "integer"}}}},
     [{"name": "a", "v": 1}, {"name": "b"}, {"name": "a", "v": 2}],
     [("spec[2]", 'Duplicate value: {"name":"a"}', "FieldValueDuplicate")]),
    ("list-type map multi keys ok", {
        "type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port", "protocol"],
        "items": {"type": "object", "properties": {"port": {"type": "integer"},
                                                   "protocol": {"type": "string"}}}},
     [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}], []),
    ("allOf", {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 3}]}, 5,
     [("spec", "Invalid value: 5: spec in body should be less than or equal to 3", INV)]),
    ("anyOf pass", {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
     {"b": 1}, []),
    ("anyOf fail", {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
     {}, [("spec", "Invalid value: {}: spec in body must validate at least one schema "
           "(anyOf)", INV), ("spec.a", "Required value", REQ)]),
    ("oneOf two match", {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}, 5,
     [("spec", "Invalid value: 5: spec in body must validate one and only one schema "
       "(oneOf)", INV)]),
    ("oneOf one match", {"type": "integer", "oneOf": [{"minimum": 6}, {"maximum": 4}]}, 3, []),
    ("not", {"type": "string", "not": {"enum": ["forbidden"]}}, "forbidden",
     [("spec", 'Invalid value: "forbidden": spec in body must not validate the schema '
       "(not)", INV)]),
    ("embedded resource ok", {"type": "object", "x-kubernetes-embedded-resource": True,
                              "x-kubernetes-preserve-unknown-fields": True},
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}, []),
    ("embedded resource missing kind", {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "properties": {"spec": {"type": "object"}}},
     {"apiVersion": "v1"}, [("spec.kind", "Required value: must not be empty", REQ)]),
    ("nested paths", {"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "array", "items": {"type": "object", "properties": {
            "c": {"type": "integer", "minimum": 0}}}}}}}},
     {"a": {"b": [{"c": 1}, {"c": -1}]}},
     [("spec.a.b[1].c", "Invalid value: -1: spec.a.b[1].c in body should be greater than or "
       "equal to 0", INV)]),
]


@pytest.mark.parametrize(("name", "spec", "value", "want"), CASES, ids=[c[0] for c in CASES])
def test_validate(name: str, spec: dict[str, Any], value: Any,
                  want: list[tuple[str, str, str]]) -> None:
    assert triples(validate(spec_schema(spec), obj(value))) == want


def test_root_meta_fields_are_not_validated() -> None:
    schema = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
              "properties": {"metadata": {"type": "string"}, "kind": {"type": "integer"},
                             "spec": {"type": "object"}}}
    assert validate(schema, {"apiVersion": 1, "kind": "W", "metadata": {"name": "x"},
                             "spec": {}}) == []
    assert triples(validate(schema, {"apiVersion": "v1", "kind": "W", "metadata": {}})) == [
        ("spec", "Required value", REQ)]


def test_root_type_error() -> None:
    assert triples(validate({"type": "object"}, [])) == [
        ("", 'Invalid value: "array": body must be of type object: "array"', TI)]


def test_cause_joins_like_kube() -> None:
    (c,) = validate(spec_schema(INT_SPEC), obj({"replicas": "x"}))
    assert f"{c.field}: {c.message}" == (
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type '
        'integer: "string"')


def test_multiple_errors_are_all_reported() -> None:
    schema = spec_schema({"type": "object", "required": ["a"], "properties": {
        "b": {"type": "string", "maxLength": 1}, "c": {"type": "integer"}}})
    got = triples(validate(schema, obj({"b": "xx", "c": "y"})))
    assert [g[0] for g in got] == ["spec.a", "spec.b", "spec.c"]


def test_float_bounds_render_like_go() -> None:
    schema = spec_schema({"type": "number", "minimum": 1000000})
    (c,) = validate(schema, obj(0.5))
    assert c.message == ("Invalid value: 0.5: spec in body should be greater than or equal "
                         "to 1e+06")
