"""Validation of custom resources against a structural OpenAPI v3 schema.

Owns: :func:`validate`, which reports every violation as an
``errors.Cause`` worded as kube-apiserver words it (the kube-openapi
validator's message converted by apiextensions-apiserver into a
``field.Error``), e.g. ``spec.replicas: Invalid value: "string":
spec.replicas in body must be of type integer: "string"``.

Paths: properties are joined with ``.``, array items are ``[i]``,
``additionalProperties`` entries are ``[key]``. At the root ``apiVersion``,
``kind`` and ``metadata`` are never validated here (the server validates
object metadata itself). Unknown fields are not errors here: pruning
(:mod:`.prune`) removes them and reports them for ``fieldValidation``.

Simplified: ``pattern`` uses Python's ``re`` (kube uses RE2; the common
subset behaves the same); ``x-kubernetes-validations`` (CEL) rules are not
evaluated; embedded resources check ``apiVersion``/``kind`` presence and
that ``metadata`` is an object, not the full ObjectMeta rules; ``anyOf``/
``oneOf`` failures report one composite error plus the errors of the closest
alternative.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from racksmith.apiserver.errors import Cause
from racksmith.apiserver.schema.formats import check_format
from racksmith.apiserver.schema.jsonvalue import (
    canonical,
    child,
    compact,
    go_float,
    go_value,
    index,
    json_equal,
    json_type,
    key,
)

ROOT_META = frozenset({"apiVersion", "kind", "metadata"})
EMBEDDED_META = ROOT_META

FIELD_VALUE_INVALID = "FieldValueInvalid"
FIELD_VALUE_REQUIRED = "FieldValueRequired"
FIELD_VALUE_NOT_SUPPORTED = "FieldValueNotSupported"
FIELD_VALUE_TYPE_INVALID = "FieldValueTypeInvalid"
FIELD_VALUE_DUPLICATE = "FieldValueDuplicate"
FIELD_VALUE_TOO_LONG = "FieldValueTooLong"
FIELD_VALUE_TOO_MANY = "FieldValueTooMany"


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> re.Pattern[str] | None:
    """Compile an ECMA/RE2-ish pattern; None when Python cannot compile it."""
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _in_body(path: str) -> str:
    return f"{path} in body" if path else "body"


def _num(bound: Any) -> str:
    return go_float(float(bound)) if isinstance(bound, int | float) else str(bound)


def _int(bound: Any) -> int | None:
    if isinstance(bound, bool):
        return None
    if isinstance(bound, int):
        return bound
    if isinstance(bound, float) and bound.is_integer():
        return int(bound)
    return None


def invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, f"Invalid value: {go_value(value)}: {detail}", FIELD_VALUE_INVALID)


def type_invalid(path: str, actual: str, expected: str) -> Cause:
    return Cause(
        path,
        f'Invalid value: "{actual}": {_in_body(path)} must be of type {expected}: "{actual}"',
        FIELD_VALUE_TYPE_INVALID,
    )


def required(path: str, detail: str = "") -> Cause:
    return Cause(path, "Required value" + (f": {detail}" if detail else ""), FIELD_VALUE_REQUIRED)


def not_supported(path: str, value: Any, allowed: list[Any]) -> Cause:
    quoted = ", ".join(
        go_value(a if isinstance(a, str) else compact(a)) for a in allowed
    )
    return Cause(
        path,
        f"Unsupported value: {go_value(value)}: supported values: {quoted}",
        FIELD_VALUE_NOT_SUPPORTED,
    )


def _type_ok(expected: str, actual: str) -> bool:
    return actual == expected or (expected == "number" and actual == "integer")


class _Validator:
    def __init__(self) -> None:
        self.errors: list[Cause] = []

    def add(self, cause: Cause) -> None:
        self.errors.append(cause)

    # -- one schema node ------------------------------------------------------
    def node(self, s: Any, v: Any, path: str, root: bool = False) -> None:
        if not isinstance(s, dict):
            return
        typ = s.get("type")
        int_or_string = s.get("x-kubernetes-int-or-string") is True
        if v is None:
            if s.get("nullable") is True:
                return
            if isinstance(typ, str) and typ:
                self.add(type_invalid(path, "null", typ))
            elif int_or_string:
                self.add(type_invalid(path, "null", "integer,string"))
            return
        actual = json_type(v)
        if isinstance(typ, str) and typ:
            if not _type_ok(typ, actual):
                self.add(type_invalid(path, actual, typ))
                return
        elif int_or_string and actual not in ("integer", "string"):
            self.add(type_invalid(path, actual, "integer,string"))
            return
        self.values(s, v, path, root)
        if isinstance(v, dict):
            self.object(s, v, path, root)
        elif isinstance(v, list):
            self.array(s, v, path)

    # -- structure ------------------------------------------------------------
    def object(self, s: dict[str, Any], v: dict[str, Any], path: str, root: bool) -> None:
        props = s.get("properties")
        props = props if isinstance(props, dict) else {}
        addl = s.get("additionalProperties")
        embedded = s.get("x-kubernetes-embedded-resource") is True
        if embedded:
            self.embedded(v, path)
        for k, val in v.items():
            if root and k in ROOT_META:
                continue
            if k in props:
                if embedded and k == "metadata":
                    continue
                self.node(props[k], val, child(path, k))
            elif embedded and k in EMBEDDED_META:
                continue
            elif isinstance(addl, dict):
                self.node(addl, val, key(path, k))

    def embedded(self, v: dict[str, Any], path: str) -> None:
        for name in ("apiVersion", "kind"):
            if name not in v:
                self.add(required(child(path, name), "must not be empty"))
            elif not isinstance(v[name], str):
                self.add(invalid(child(path, name), v[name], "must be a string"))
            elif not v[name]:
                self.add(invalid(child(path, name), v[name], "must not be empty"))
        if "metadata" in v and v["metadata"] is not None and not isinstance(v["metadata"], dict):
            self.add(type_invalid(child(path, "metadata"), json_type(v["metadata"]), "object"))

    def array(self, s: dict[str, Any], v: list[Any], path: str) -> None:
        items = s.get("items")
        if isinstance(items, dict):
            for i, x in enumerate(v):
                self.node(items, x, index(path, i))
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "set":
            seen: set[str] = set()
            for i, x in enumerate(v):
                c = canonical(x)
                if c in seen:
                    self.add(Cause(index(path, i), f"Duplicate value: {go_value(x)}",
                                   FIELD_VALUE_DUPLICATE))
                seen.add(c)
        elif list_type == "map":
            keys = s.get("x-kubernetes-list-map-keys")
            if not isinstance(keys, list) or not keys:
                return
            seen_keys: set[str] = set()
            for i, x in enumerate(v):
                if not isinstance(x, dict):
                    continue
                kv = {k: x.get(k) for k in keys if isinstance(k, str)}
                c = canonical(kv)
                if c in seen_keys:
                    self.add(Cause(index(path, i), f"Duplicate value: {compact(kv)}",
                                   FIELD_VALUE_DUPLICATE))
                seen_keys.add(c)

    # -- value validations ----------------------------------------------------
    def values(self, s: dict[str, Any], v: Any, path: str, root: bool) -> None:
        enum = s.get("enum")
        if isinstance(enum, list) and enum and not any(json_equal(v, e) for e in enum):
            self.add(not_supported(path, v, enum))
        if isinstance(v, bool):
            pass
        elif isinstance(v, int | float):
            self.number(s, v, path)
        elif isinstance(v, str):
            self.string(s, v, path)
        elif isinstance(v, list):
            self.array_size(s, v, path)
        elif isinstance(v, dict):
            self.object_size(s, v, path, root)
        self.composition(s, v, path, root)

    def number(self, s: dict[str, Any], v: float, path: str) -> None:
        body = _in_body(path)
        lo = s.get("minimum")
        if isinstance(lo, int | float) and not isinstance(lo, bool):
            if s.get("exclusiveMinimum") is True:
                if not v > lo:
                    self.add(invalid(path, v, f"{body} should be greater than {_num(lo)}"))
            elif not v >= lo:
                self.add(invalid(path, v,
                                 f"{body} should be greater than or equal to {_num(lo)}"))
        hi = s.get("maximum")
        if isinstance(hi, int | float) and not isinstance(hi, bool):
            if s.get("exclusiveMaximum") is True:
                if not v < hi:
                    self.add(invalid(path, v, f"{body} should be less than {_num(hi)}"))
            elif not v <= hi:
                self.add(invalid(path, v, f"{body} should be less than or equal to {_num(hi)}"))
        mult = s.get("multipleOf")
        if isinstance(mult, int | float) and not isinstance(mult, bool) and mult > 0:
            q = v / mult
            if isinstance(v, int) and isinstance(mult, int):
                ok = v % mult == 0
            else:
                ok = abs(q - round(q)) < 1e-9
            if not ok:
                self.add(invalid(path, v, f"{body} should be a multiple of {_num(mult)}"))

    def string(self, s: dict[str, Any], v: str, path: str) -> None:
        body = _in_body(path)
        max_len = _int(s.get("maxLength"))
        if max_len is not None and len(v) > max_len:
            unit = "byte" if max_len == 1 else "bytes"
            self.add(Cause(path, f"Too long: may not be more than {max_len} {unit}",
                           FIELD_VALUE_TOO_LONG))
        min_len = _int(s.get("minLength"))
        if min_len is not None and len(v) < min_len:
            self.add(invalid(path, v, f"{body} should be at least {min_len} chars long"))
        pattern = s.get("pattern")
        if isinstance(pattern, str):
            rx = compile_pattern(pattern)
            if rx is not None and not rx.search(v):
                self.add(invalid(path, v, f"{body} should match '{pattern}'"))
        fmt = s.get("format")
        if isinstance(fmt, str) and not check_format(fmt, v):
            self.add(Cause(path, f"Invalid value: {go_value(v)}: {body} must be of type "
                                 f"{fmt}: {go_value(v)}", FIELD_VALUE_TYPE_INVALID))

    def array_size(self, s: dict[str, Any], v: list[Any], path: str) -> None:
        body = _in_body(path)
        max_items = _int(s.get("maxItems"))
        if max_items is not None and len(v) > max_items:
            self.add(Cause(path, f"Too many: {len(v)}: must have at most {max_items} items",
                           FIELD_VALUE_TOO_MANY))
        min_items = _int(s.get("minItems"))
        if min_items is not None and len(v) < min_items:
            self.add(invalid(path, v, f"{body} should have at least {min_items} items"))
        if s.get("uniqueItems") is True:
            seen: set[str] = set()
            for x in v:
                c = canonical(x)
                if c in seen:
                    self.add(invalid(path, v, f"{body} shouldn't contain duplicates"))
                    break
                seen.add(c)

    def object_size(self, s: dict[str, Any], v: dict[str, Any], path: str, root: bool) -> None:
        req = s.get("required")
        if isinstance(req, list):
            for name in req:
                if not isinstance(name, str) or (root and name in ROOT_META):
                    continue
                if name not in v:
                    self.add(required(child(path, name)))
        count = len(v)
        max_props = _int(s.get("maxProperties"))
        if max_props is not None and count > max_props:
            self.add(Cause(path, f"Too many: {count}: must have at most {max_props} items",
                           FIELD_VALUE_TOO_MANY))
        min_props = _int(s.get("minProperties"))
        if min_props is not None and count < min_props:
            self.add(invalid(path, v, f"{_in_body(path)} should have at least {min_props} "
                                      "properties"))

    def composition(self, s: dict[str, Any], v: Any, path: str, root: bool) -> None:
        body = _in_body(path)
        all_of = s.get("allOf")
        if isinstance(all_of, list):
            for sub in all_of:
                self.node(sub, v, path, root)
        any_of = s.get("anyOf")
        if isinstance(any_of, list) and any_of:
            results = [_run(sub, v, path, root) for sub in any_of]
            if all(results):
                self.add(invalid(path, v, f"{body} must validate at least one schema (anyOf)"))
                self.errors.extend(_fewest(results))
        one_of = s.get("oneOf")
        if isinstance(one_of, list) and one_of:
            results = [_run(sub, v, path, root) for sub in one_of]
            passing = sum(1 for r in results if not r)
            if passing != 1:
                self.add(invalid(path, v,
                                 f"{body} must validate one and only one schema (oneOf)"))
                if passing == 0:
                    self.errors.extend(_fewest(results))
        not_ = s.get("not")
        if isinstance(not_, dict) and not _run(not_, v, path, root):
            self.add(invalid(path, v, f"{body} must not validate the schema (not)"))


def _fewest(results: list[list[Cause]]) -> list[Cause]:
    return sorted(results, key=lambda r: len(r))[0]


def _run(s: Any, v: Any, path: str, root: bool) -> list[Cause]:
    sub = _Validator()
    sub.node(s, v, path, root)
    return sub.errors


def validate(schema: dict[str, Any], obj: Any) -> list[Cause]:
    """All violations of ``schema`` by ``obj`` (empty when valid)."""
    return _run(schema, obj, "", True)


def validate_at(schema: dict[str, Any], obj: Any, path: str) -> list[Cause]:
    """Validate a value that lives at ``path`` (not at an object root)."""
    return _run(schema, obj, path, False)
