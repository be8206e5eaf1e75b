"""Structural defaulting of custom resources (``default:`` in the schema).

Owns: :func:`apply_defaults`, mirroring apiextensions-apiserver's
``structuraldefaulting``: first ``null`` values of non-nullable fields that
have no default are dropped (``PruneNonNullableNullsWithoutDefaults``), then
each absent property (or ``null`` non-nullable one) with a ``default`` gets
a deep copy of it; defaulting recurses into properties, ``additionalProperties``
values and array items, including into values just defaulted.

Only the structural part of the schema (``properties``, ``items``,
``additionalProperties``) carries defaults; ``allOf``/``anyOf``/... are
ignored, as in Kubernetes. The root ``apiVersion``/``kind``/``metadata`` are
never touched.
"""

from __future__ import annotations

import copy
from typing import Any

from racksmith.apiserver.schema.validate import ROOT_META


def _has_default(s: Any) -> bool:
    return isinstance(s, dict) and s.get("default") is not None


def _nullable(s: Any) -> bool:
    return isinstance(s, dict) and s.get("nullable") is True


def _child_schema(s: dict[str, Any], k: str) -> dict[str, Any] | None:
    props = s.get("properties")
    if isinstance(props, dict) and isinstance(props.get(k), dict):
        sub: dict[str, Any] = props[k]
        return sub
    addl = s.get("additionalProperties")
    if isinstance(addl, dict):
        return addl
    return None


def _prune_nulls(s: Any, x: Any, root: bool) -> None:
    if not isinstance(s, dict):
        return
    if isinstance(x, dict):
        for k in list(x):
            if root and k in ROOT_META:
                continue
            sub = _child_schema(s, k)
            if sub is None:
                continue
            if x[k] is None and not _nullable(sub) and not _has_default(sub):
                del x[k]
            else:
                _prune_nulls(sub, x[k], False)
    elif isinstance(x, list):
        items = s.get("items")
        for v in x:
            _prune_nulls(items, v, False)


_BELOW: dict[int, tuple[dict[str, Any], bool]] = {}
"""Memo of :func:`_defaults_below` by schema node (the node is kept with its
answer, so its id cannot be reused by another node while it is remembered)."""


def _defaults_below(s: dict[str, Any]) -> bool:
    """Whether any ``default`` sits in the structural part under ``s``: a
    value without one needs no walk (most of an object, most objects)."""
    memo = _BELOW.get(id(s))
    if memo is not None and memo[0] is s:
        return memo[1]
    subs: list[Any] = []
    props = s.get("properties")
    if isinstance(props, dict):
        subs += props.values()
    subs += [s.get("additionalProperties"), s.get("items")]
    found = any(isinstance(sub, dict) and (_has_default(sub) or _defaults_below(sub))
                for sub in subs)
    if len(_BELOW) > 100_000:  # schemas replaced many times over: start again
        _BELOW.clear()
    _BELOW[id(s)] = (s, found)
    return found


def _default(s: Any, x: Any, root: bool) -> None:
    if not isinstance(s, dict) or not _defaults_below(s):
        return
    if isinstance(x, dict):
        props = s.get("properties")
        if isinstance(props, dict):
            for k, prop in props.items():
                if root and k in ROOT_META:
                    continue
                if not _has_default(prop):
                    continue
                if k not in x or (x[k] is None and not _nullable(prop)):
                    x[k] = copy.deepcopy(prop["default"])
        addl = s.get("additionalProperties")
        for k in list(x):
            if root and k in ROOT_META:
                continue
            if isinstance(props, dict) and k in props:
                _default(props[k], x[k], False)
            elif isinstance(addl, dict):
                if x[k] is None and _has_default(addl) and not _nullable(addl):
                    x[k] = copy.deepcopy(addl["default"])
                _default(addl, x[k], False)
    elif isinstance(x, list):
        items = s.get("items")
        if not isinstance(items, dict):
            return
        for i, v in enumerate(x):
            if v is None and _has_default(items) and not _nullable(items):
                x[i] = copy.deepcopy(items["default"])
            _default(items, x[i], False)


def apply_defaults(schema: dict[str, Any], obj: Any) -> None:
    """Fill ``default`` values into ``obj`` in place (see module docstring)."""
    _prune_nulls(schema, obj, True)
    _default(schema, obj, True)
