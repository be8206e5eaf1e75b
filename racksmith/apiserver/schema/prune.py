"""Structural pruning of custom resources (unknown fields are dropped).

Owns: :func:`prune`, mirroring apiextensions-apiserver's
``structuralpruning``: every object field that is neither declared in
``properties`` nor covered by ``additionalProperties`` is removed, unless the
node has ``x-kubernetes-preserve-unknown-fields: true`` (declared fields
below such a node are still pruned by their own schemas). The removed paths
are returned (``spec.foo``, ``spec.items[0].bar``, additionalProperties
entries as ``spec.map[key].x``) so the caller can warn or fail with
``unknown field "<path>"`` for ``fieldValidation=Warn|Strict``.

At the root ``apiVersion``, ``kind`` and ``metadata`` are kept as they are
(the server owns metadata). Under ``x-kubernetes-embedded-resource`` the
embedded ``apiVersion``/``kind`` are kept and ``metadata`` is pruned to the
ObjectMeta field names. Simplified: embedded ``metadata`` is not
round-tripped through a typed ObjectMeta, only its unknown top-level keys go.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver.schema.jsonvalue import child, index, key
from racksmith.apiserver.schema.validate import ROOT_META

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
})


class _Pruner:
    def __init__(self) -> None:
        self.pruned: list[str] = []

    def prune(self, s: Any, x: Any, path: str, root: bool = False) -> None:
        if isinstance(s, dict) and s.get("x-kubernetes-preserve-unknown-fields") is True:
            self.skip(s, x, path, root)
            return
        if isinstance(x, dict):
            if not isinstance(s, dict):
                self.drop_all(x, path)
                return
            props = s.get("properties")
            props = props if isinstance(props, dict) else {}
            addl = s.get("additionalProperties")
            embedded = s.get("x-kubernetes-embedded-resource") is True
            for k in list(x):
                v = x[k]
                if root and k in ROOT_META:
                    continue
                if embedded and k in ("apiVersion", "kind"):
                    continue
                if embedded and k == "metadata":
                    self.embedded_meta(v, child(path, k))
                    continue
                if k in props:
                    self.prune(props[k], v, child(path, k))
                elif isinstance(addl, dict):
                    self.prune(addl, v, key(path, k))
                elif addl is True:
                    continue
                else:
                    self.pruned.append(child(path, k))
                    del x[k]
        elif isinstance(x, list):
            items = s.get("items") if isinstance(s, dict) else None
            for i, v in enumerate(x):
                self.prune(items, v, index(path, i))

    def skip(self, s: dict[str, Any], x: Any, path: str, root: bool) -> None:
        if isinstance(x, dict):
            props = s.get("properties")
            props = props if isinstance(props, dict) else {}
            addl = s.get("additionalProperties")
            embedded = s.get("x-kubernetes-embedded-resource") is True
            for k, v in x.items():
                if (root and k in ROOT_META) or (embedded and k in ROOT_META):
                    if embedded and not root and k == "metadata":
                        self.embedded_meta(v, child(path, k))
                    continue
                if k in props:
                    self.prune(props[k], v, child(path, k))
                elif isinstance(addl, dict):
                    self.prune(addl, v, key(path, k))
        elif isinstance(x, list):
            items = s.get("items")
            if isinstance(items, dict):
                for i, v in enumerate(x):
                    self.skip(items, v, index(path, i), False)

    def drop_all(self, x: dict[str, Any], path: str) -> None:
        for k in list(x):
            self.pruned.append(child(path, k))
            del x[k]

    def embedded_meta(self, meta: Any, path: str) -> None:
        if not isinstance(meta, dict):
            return
        for k in list(meta):
            if k not in OBJECT_META_FIELDS:
                self.pruned.append(child(path, k))
                del meta[k]


def prune(schema: dict[str, Any], obj: Any) -> list[str]:
    """Remove undeclared fields from ``obj`` in place; return their paths."""
    p = _Pruner()
    p.prune(schema, obj, "", True)
    return p.pruned


def prune_at(schema: dict[str, Any], value: Any) -> list[str]:
    """Like :func:`prune` for a value that is not an object root (paths relative)."""
    p = _Pruner()
    p.prune(schema, value, "", False)
    return p.pruned
