"""Structural-schema checks of CRD openAPIV3Schema."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.apiserver.schema import check_structural

BASE = "spec.versions[0].schema.openAPIV3Schema"


def root(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("minimal ok", {"type": "object"}, []),
    ("typical ok", root(spec={"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1, "minimum": 0},
        "port": {"x-kubernetes-int-or-string": True,
                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "blob": {"x-kubernetes-preserve-unknown-fields": True},
        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    }}, status={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        metadata={"type": "object", "properties": {"name": {"type": "string",
                                                            "maxLength": 10}}}), []),
    ("root without type", {"properties": {}},
     [(f"{BASE}.type", "Required value: must not be empty at the root")]),
    ("root not object", {"type": "array", "items": {"type": "string"}},
     [(f"{BASE}.type", 'Invalid value: "array": must be object at the root')]),
    ("field without type", root(spec={"properties": {"a": {"type": "string"}}}),
     [(f"{BASE}.properties[spec].type",
       "Required value: must not be empty for specified object fields")]),
    ("items without type", root(spec={"type": "array", "items": {}}),
     [(f"{BASE}.properties[spec].items.type",
       "Required value: must not be empty for specified array items")]),
    ("unknown type", root(spec={"type": "map"}),
     [(f"{BASE}.properties[spec].type",
       'Unsupported value: "map": supported values: "array", "boolean", "integer", '
       '"number", "object", "string"')]),
    ("ref", root(spec={"type": "object", "$ref": "#/definitions/x"}),
     [(f"{BASE}.properties[spec].$ref", "Forbidden: $ref is not supported")]),
    ("properties and additionalProperties", root(spec={
        "type": "object", "properties": {"a": {"type": "string"}},
        "additionalProperties": {"type": "string"}}),
     [(f"{BASE}.properties[spec].additionalProperties",
       "Forbidden: additionalProperties and properties are mutual exclusive")]),
    ("metadata beyond name", root(metadata={"type": "object", "properties": {
        "labels": {"type": "object"}}}),
     [(f"{BASE}.properties[metadata].properties[labels]",
       "Forbidden: must not specify anything other than name and generateName, but metadata "
       "is implicitly specified")]),
    ("metadata name not string", root(metadata={"type": "object", "properties": {
        "name": {"type": "integer"}}}),
     [(f"{BASE}.properties[metadata].properties[name].type",
       'Invalid value: "integer": must be string')]),
    ("default invalid", root(spec={"type": "object", "properties": {
        "replicas": {"type": "integer", "default": "one"}}}),
     [(f"{BASE}.properties[spec].properties[replicas].default",
       'Invalid value: "string": body must be of type integer: "string"')]),
    ("default nested invalid", root(spec={"type": "object", "default": {"a": 0},
                                          "properties": {"a": {"type": "integer",
                                                               "minimum": 1}}}),
     [(f"{BASE}.properties[spec].default.a",
       "Invalid value: 0: a in body should be greater than or equal to 1")]),
    ("default with unknown fields", root(spec={"type": "object", "default": {"zzz": 1},
                                               "properties": {"a": {"type": "integer"}}}),
     [(f"{BASE}.properties[spec].default",
       'Invalid value: {"zzz":1}: must not have unknown fields')]),
    ("bad pattern", root(spec={"type": "string", "pattern": "(["}),
     [(f"{BASE}.properties[spec].pattern",
       'Invalid value: "([": must be a valid regular expression, but isn\'t')]),
    ("int-or-string with type", root(spec={"type": "string",
                                           "x-kubernetes-int-or-string": True}),
     [(f"{BASE}.properties[spec].type",
       'Invalid value: "string": must be empty if x-kubernetes-int-or-string is true')]),
    ("value validation with type", root(spec={"type": "object", "anyOf": [
        {"type": "object", "required": ["a"]}]}),
     [(f"{BASE}.properties[spec].anyOf[0].type", "Forbidden: must be empty to be structural")]),
    ("value validation with default", root(spec={"type": "object", "allOf": [
        {"properties": {"a": {"default": 1}}}]}),
     [(f"{BASE}.properties[spec].allOf[0].properties[a].default",
       "Forbidden: must be empty to be structural")]),
    ("list map without keys", root(spec={"type": "array", "x-kubernetes-list-type": "map",
                                         "items": {"type": "object"}}),
     [(f"{BASE}.properties[spec].x-kubernetes-list-map-keys",
       "Required value: must not be empty if x-kubernetes-list-type is map")]),
    ("list map keys not properties", root(spec={
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
     [(f"{BASE}.properties[spec].x-kubernetes-list-map-keys",
       'Invalid value: ["k"]: entries must all be names of item properties')]),
    ("map keys without map", root(spec={"type": "array", "x-kubernetes-list-map-keys": ["k"],
                                        "items": {"type": "string"}}),
     [(f"{BASE}.properties[spec].x-kubernetes-list-map-keys",
       "Forbidden: must not be set if x-kubernetes-list-type is not map")]),
    ("bad list type", root(spec={"type": "array", "x-kubernetes-list-type": "bag",
                                 "items": {"type": "string"}}),
     [(f"{BASE}.properties[spec].x-kubernetes-list-type",
       'Unsupported value: "bag": supported values: "atomic", "set", "map"')]),
    ("tuple items", root(spec={"type": "array", "items": [{"type": "string"}]}),
     [(f"{BASE}.properties[spec].items",
       "Forbidden: items must be a schema object and not an array")]),
    ("embedded resource not object", root(spec={"type": "string",
                                                "x-kubernetes-embedded-resource": True}),
     [(f"{BASE}.properties[spec].type",
       'Invalid value: "string": must be object if x-kubernetes-embedded-resource is true')]),
]


@pytest.mark.parametrize(("name", "schema", "want"), CASES, ids=[c[0] for c in CASES])
def test_structural(name: str, schema: dict[str, Any], want: list[tuple[str, str]]) -> None:
    assert [(c.field, c.message) for c in check_structural(schema, BASE)] == want


def test_reasons() -> None:
    got = check_structural(root(spec={"properties": {}}, x={"type": "nope"}), BASE)
    assert [c.reason for c in got] == ["FieldValueRequired", "FieldValueNotSupported"]
