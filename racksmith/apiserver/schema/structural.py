"""Checks that a CRD's ``openAPIV3Schema`` is a structural schema.

Owns: :func:`check_structural`, run by the server when a
CustomResourceDefinition is created or updated. Causes use kube-apiserver's
schema paths under ``base_path`` (``<base>.properties[spec].type``,
``<base>.items``, ``<base>.additionalProperties``, ``<base>.allOf[0]``).

Checked: every node of the structural part (properties, items,
additionalProperties) has a known ``type`` unless it sets
``x-kubernetes-int-or-string`` or ``x-kubernetes-preserve-unknown-fields``;
the root is ``type: object``; no ``$ref``; ``properties`` and
``additionalProperties`` are not both set; ``items`` is a single schema;
``x-kubernetes-int-or-string`` has no type; ``x-kubernetes-embedded-resource``
is an object; root ``metadata`` only restricts ``name``/``generateName``
(strings) and root ``apiVersion``/``kind`` are strings; patterns compile;
``x-kubernetes-list-type``/``-list-map-keys`` are consistent; value
validations (``allOf``/``anyOf``/``oneOf``/``not``) carry no ``type``,
``default``, ``nullable``, ``additionalProperties``, ``description``,
``title`` or ``x-kubernetes-*`` (the ``anyOf: [{type: integer}, {type:
string}]`` idiom of int-or-string excepted); every ``default`` validates
against its node and survives pruning unchanged.

Simplified: value-validation ``properties`` are not required to mirror the
structural part; CEL rules and their cost are not checked.
"""

from __future__ import annotations

import copy
from typing import Any

from racksmith.apiserver.errors import Cause
from racksmith.apiserver.schema.jsonvalue import go_value, join
from racksmith.apiserver.schema.prune import prune_at
from racksmith.apiserver.schema.validate import (
    FIELD_VALUE_INVALID,
    FIELD_VALUE_NOT_SUPPORTED,
    FIELD_VALUE_REQUIRED,
    compile_pattern,
    validate_at,
)

TYPES = ("array", "boolean", "integer", "number", "object", "string")
FORBIDDEN = "FieldValueForbidden"
_VALUE_VALIDATION_FORBIDDEN = (
    "type", "default", "nullable", "additionalProperties", "description", "title",
)


def _forbidden(path: str, detail: str) -> Cause:
    return Cause(path, f"Forbidden: {detail}", FORBIDDEN)


def _required(path: str, detail: str) -> Cause:
    return Cause(path, f"Required value: {detail}", FIELD_VALUE_REQUIRED)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, f"Invalid value: {go_value(value)}: {detail}", FIELD_VALUE_INVALID)


class _Checker:
    def __init__(self) -> None:
        self.errors: list[Cause] = []

    def add(self, c: Cause) -> None:
        self.errors.append(c)

    def structural(self, s: Any, path: str, level: str) -> None:
        """``level`` is ``root``, ``field`` or ``item``."""
        if not isinstance(s, dict):
            self.add(_invalid(path, s, "must be a schema object"))
            return
        typ = s.get("type")
        int_or_string = s.get("x-kubernetes-int-or-string") is True
        preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
        if "$ref" in s:
            self.add(_forbidden(f"{path}.$ref", "$ref is not supported"))
        if level == "root":
            if not typ:
                self.add(_required(f"{path}.type", "must not be empty at the root"))
            elif typ != "object":
                self.add(_invalid(f"{path}.type", typ, "must be object at the root"))
        if typ is not None and typ != "" and typ not in TYPES:
            quoted = ", ".join(f'"{t}"' for t in TYPES)
            self.add(Cause(f"{path}.type",
                           f"Unsupported value: {go_value(typ)}: supported values: {quoted}",
                           FIELD_VALUE_NOT_SUPPORTED))
        if not typ and not int_or_string and not preserve and level != "root":
            where = "array items" if level == "item" else "object fields"
            self.add(_required(f"{path}.type", f"must not be empty for specified {where}"))
        if int_or_string and typ:
            self.add(_invalid(f"{path}.type", typ,
                              "must be empty if x-kubernetes-int-or-string is true"))
        if s.get("x-kubernetes-embedded-resource") is True and typ != "object":
            self.add(_invalid(f"{path}.type", typ,
                              "must be object if x-kubernetes-embedded-resource is true"))
        props = s.get("properties")
        addl = s.get("additionalProperties")
        if props and addl is not None and addl is not False:
            self.add(_forbidden(f"{path}.additionalProperties",
                                "additionalProperties and properties are mutual exclusive"))
        self.scalars(s, path)
        self.list_type(s, path)
        if "default" in s and s["default"] is not None:
            self.default(s, path)
        for word in ("allOf", "anyOf", "oneOf"):
            subs = s.get(word)
            if isinstance(subs, list):
                for i, sub in enumerate(subs):
                    self.value_validation(sub, f"{path}.{word}[{i}]", int_or_string)
        if "not" in s:
            self.value_validation(s["not"], f"{path}.not", False)
        if isinstance(props, dict):
            for k, sub in props.items():
                sub_path = f"{path}.properties[{k}]"
                if level == "root" and k == "metadata":
                    self.root_metadata(sub, sub_path)
                elif level == "root" and k in ("apiVersion", "kind"):
                    if isinstance(sub, dict) and sub.get("type") not in (None, "string"):
                        self.add(_invalid(f"{sub_path}.type", sub.get("type"),
                                          "must be string"))
                    self.structural(sub, sub_path, "field")
                else:
                    self.structural(sub, sub_path, "field")
        if isinstance(addl, dict):
            self.structural(addl, f"{path}.additionalProperties", "field")
        items = s.get("items")
        if isinstance(items, list):
            self.add(_forbidden(f"{path}.items", "items must be a schema object and not an array"))
        elif items is not None:
            self.structural(items, f"{path}.items", "item")

    def scalars(self, s: dict[str, Any], path: str) -> None:
        pattern = s.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str) or compile_pattern(pattern) is None:
                self.add(_invalid(f"{path}.pattern", pattern,
                                  "must be a valid regular expression, but isn't"))
        enum = s.get("enum")
        if enum is not None and not isinstance(enum, list):
            self.add(_invalid(f"{path}.enum", enum, "must be an array"))

    def list_type(self, s: dict[str, Any], path: str) -> None:
        list_type = s.get("x-kubernetes-list-type")
        keys = s.get("x-kubernetes-list-map-keys")
        if list_type is not None and list_type not in ("atomic", "set", "map"):
            self.add(Cause(f"{path}.x-kubernetes-list-type",
                           f'Unsupported value: {go_value(list_type)}: supported values: '
                           '"atomic", "set", "map"', FIELD_VALUE_NOT_SUPPORTED))
        if list_type is not None and s.get("type") != "array":
            self.add(_invalid(f"{path}.type", s.get("type"),
                              "must be array if x-kubernetes-list-type is specified"))
        if list_type == "map":
            items = s.get("items")
            if not isinstance(items, dict) or items.get("type") != "object":
                self.add(_invalid(f"{path}.items.type",
                                  items.get("type") if isinstance(items, dict) else None,
                                  "must be object if parent array's x-kubernetes-list-type "
                                  "is map"))
            if not isinstance(keys, list) or not keys:
                self.add(_required(f"{path}.x-kubernetes-list-map-keys",
                                   "must not be empty if x-kubernetes-list-type is map"))
            elif isinstance(items, dict):
                item_props = items.get("properties")
                item_props = item_props if isinstance(item_props, dict) else {}
                missing = [k for k in keys if k not in item_props]
                if missing:
                    self.add(_invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                      "entries must all be names of item properties"))
        elif keys is not None:
            self.add(_forbidden(f"{path}.x-kubernetes-list-map-keys",
                                "must not be set if x-kubernetes-list-type is not map"))

    def default(self, s: dict[str, Any], path: str) -> None:
        dpath = f"{path}.default"
        value = copy.deepcopy(s["default"])
        for c in validate_at(s, value, ""):
            self.add(Cause(join(dpath, c.field), c.message, c.reason))
        if prune_at(s, value):
            self.add(_invalid(dpath, s["default"], "must not have unknown fields"))

    def root_metadata(self, s: Any, path: str) -> None:
        if not isinstance(s, dict):
            self.add(_invalid(path, s, "must be a schema object"))
            return
        if s.get("type") not in (None, "object"):
            self.add(_invalid(f"{path}.type", s.get("type"), "must be object"))
        detail = ("must not specify anything other than name and generateName, but "
                  "metadata is implicitly specified")
        for k in s:
            if k not in ("type", "properties", "description", "title"):
                self.add(_forbidden(f"{path}.{k}", detail))
        props = s.get("properties")
        if isinstance(props, dict):
            for k, sub in props.items():
                sub_path = f"{path}.properties[{k}]"
                if k not in ("name", "generateName"):
                    self.add(_forbidden(sub_path, detail))
                    continue
                if isinstance(sub, dict) and sub.get("type") not in (None, "string"):
                    self.add(_invalid(f"{sub_path}.type", sub.get("type"), "must be string"))
                self.structural(sub, sub_path, "field")

    def value_validation(self, s: Any, path: str, int_or_string: bool) -> None:
        if not isinstance(s, dict):
            self.add(_invalid(path, s, "must be a schema object"))
            return
        if "$ref" in s:
            self.add(_forbidden(f"{path}.$ref", "$ref is not supported"))
        for k in s:
            if k == "type" and int_or_string and s["type"] in ("integer", "string"):
                continue
            if k in _VALUE_VALIDATION_FORBIDDEN or k.startswith("x-kubernetes-"):
                self.add(_forbidden(f"{path}.{k}", "must be empty to be structural"))
        self.scalars(s, path)
        for word in ("allOf", "anyOf", "oneOf"):
            subs = s.get(word)
            if isinstance(subs, list):
                for i, sub in enumerate(subs):
                    self.value_validation(sub, f"{path}.{word}[{i}]", False)
        if "not" in s:
            self.value_validation(s["not"], f"{path}.not", False)
        props = s.get("properties")
        if isinstance(props, dict):
            for k, sub in props.items():
                self.value_validation(sub, f"{path}.properties[{k}]", False)
        items = s.get("items")
        if isinstance(items, dict):
            self.value_validation(items, f"{path}.items", False)


def check_structural(schema: dict[str, Any], base_path: str) -> list[Cause]:
    """Every reason ``schema`` is not a valid structural schema (empty if it is)."""
    c = _Checker()
    c.structural(schema, base_path, "root")
    return c.errors
