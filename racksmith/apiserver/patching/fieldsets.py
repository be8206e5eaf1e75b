"""Field sets of server-side apply and their ``FieldsV1`` encoding.

Owns: the path model of managed fields. A path is a tuple of Kubernetes
path elements exactly as ``fieldsV1`` spells them: ``f:<field>``,
``k:<json of the key fields>`` (an item of a keyed list, keys sorted by
name), ``v:<json value>`` (a member of a set list). :func:`fieldset` lists
the paths an object sets, :func:`encode`/:func:`decode` convert path sets to
and from ``fieldsV1`` trees (``"."`` marks a node that is owned and has owned
children), and :func:`get_at`/:func:`remove_at` read and delete at a path.

What is a leaf, a set member or a keyed item comes from the object's type,
a :class:`~.schematypes.TypeNode` walked alongside it (the resource's schema
markers, else the built-in kinds' table and a heuristic; see
:mod:`.schematypes`). Without one, :data:`~.schematypes.UNTYPED` guesses
every list. An atomic list or an ``x-kubernetes-map-type: atomic`` map is one
leaf; an empty list or map is a leaf too (it is what the object sets).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from racksmith.apiserver.patching.schematypes import UNTYPED, ListSemantics, TypeNode
from racksmith.apiserver.schema.jsonvalue import compact, json_equal

Path = tuple[str, ...]
MISSING: Any = object()

STRIPPED: frozenset[Path] = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata",),
    *(("f:metadata", f"f:{name}") for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
        "generation", "managedFields", "resourceVersion", "deletionTimestamp",
        "deletionGracePeriodSeconds",
    )),
})
SERVER_OWNED_META = ("resourceVersion", "uid", "creationTimestamp", "generation",
                     "managedFields", "selfLink", "deletionTimestamp",
                     "deletionGracePeriodSeconds")


class TypedValueError(ValueError):
    """A value does not fit the list type its schema declares (a missing key,
    a duplicate, a map in a set); the message names the path as
    structured-merge-diff does (``.spec.ports: element 0: ...``)."""


def is_stripped(path: Path) -> bool:
    return path in STRIPPED or (len(path) >= 2 and path[:2] in STRIPPED)


def fieldset(obj: Any, typ: TypeNode | None = None) -> set[Path]:
    """The paths ``obj`` sets (leaves, keyed items, set members), kube stripping
    applied. Raises :class:`TypedValueError` where ``obj`` does not fit a list
    type its schema declares."""
    out: set[Path] = set()
    _leaves(obj, (), typ if typ is not None else UNTYPED, out)
    return {p for p in out if p and not is_stripped(p)}


def list_semantics(typ: TypeNode, items: list[Any], path: Path) -> ListSemantics:
    """The semantics of ``items`` at ``path``, raising :class:`TypedValueError`
    when they do not fit the declared ones."""
    sem = typ.list_semantics(items)
    if sem.declared:
        misfit = sem.problem(items)
        if misfit is not None:
            where = display(path)
            if misfit.element_index is not None:
                where += f": element {misfit.element_index}"
            message = misfit.message
            if misfit.element is not None:
                message += " " + display((misfit.element,))
            raise TypedValueError(f"{where}: {message}")
    return sem


def _leaves(value: Any, path: Path, typ: TypeNode, out: set[Path]) -> None:
    if isinstance(value, dict):
        if not value or typ.atomic_map:
            out.add(path)
            return
        for k, v in value.items():
            _leaves(v, (*path, f"f:{k}"), typ.field(k), out)
    elif isinstance(value, list):
        sem = list_semantics(typ, value, path)
        if sem.atomic or not value:
            out.add(path)
            return
        item_typ = typ.items()
        for item in value:
            pe = sem.element(item)
            assert pe is not None
            out.add((*path, pe))
            if sem.kind == "map" and not item_typ.atomic_map:
                for k, v in item.items():
                    _leaves(v, (*path, pe, f"f:{k}"), item_typ.field(k), out)
    else:
        out.add(path)


def encode(paths: set[Path]) -> dict[str, Any]:
    """A path set as a ``fieldsV1`` tree."""
    tree: dict[str, Any] = {}
    members: set[Path] = set(paths)
    for p in paths:
        node = tree
        for pe in p:
            node = node.setdefault(pe, {})

    def render(node: dict[str, Any], prefix: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if node and prefix in members:
            out["."] = {}
        for k in sorted(node):
            out[k] = render(node[k], (*prefix, k))
        return out

    return render(tree, ())


def decode(tree: Any) -> set[Path]:
    """The path set of a ``fieldsV1`` tree (malformed parts are ignored)."""
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            return
        if not node and prefix:
            out.add(prefix)
        for k, v in node.items():
            if k == ".":
                if prefix:
                    out.add(prefix)
                continue
            walk(v, (*prefix, k))

    walk(tree, ())
    return out


def _find_keyed(items: list[Any], keys: dict[str, Any], defaults: dict[str, Any]) -> int | None:
    for i, x in enumerate(items):
        if isinstance(x, dict) and all(
                json_equal(x[k] if k in x else defaults.get(k, MISSING), v)
                for k, v in keys.items()):
            return i
    return None


def _find_value(items: list[Any], value: Any) -> int | None:
    for i, x in enumerate(items):
        if json_equal(x, value):
            return i
    return None


def child_type(typ: TypeNode, pe: str) -> TypeNode:
    """The type one path element below ``typ``."""
    kind, _, rest = pe.partition(":")
    return typ.field(rest) if kind == "f" else typ.items()


def _step(cur: Any, pe: str, typ: TypeNode) -> tuple[Any, Any]:
    """(container, index-or-key) of ``pe`` in ``cur`` or (MISSING, None)."""
    kind, _, rest = pe.partition(":")
    if kind == "f":
        if isinstance(cur, dict) and rest in cur:
            return cur, rest
    elif kind in ("k", "v") and isinstance(cur, list):
        try:
            decoded = json.loads(rest)
        except ValueError:
            return MISSING, None
        if kind == "k" and isinstance(decoded, dict):
            i = _find_keyed(cur, decoded, typ.key_defaults())
        elif kind == "v":
            i = _find_value(cur, decoded)
        else:
            i = None
        if i is not None:
            return cur, i
    elif kind == "i" and isinstance(cur, list) and rest.isdigit() and int(rest) < len(cur):
        return cur, int(rest)
    return MISSING, None


def get_at(obj: Any, path: Path, typ: TypeNode | None = None) -> Any:
    """The value at ``path`` or :data:`MISSING` (``typ``: the type of ``obj``,
    for the defaults of key fields an item omits)."""
    cur = obj
    typ = typ if typ is not None else UNTYPED
    for pe in path:
        container, where = _step(cur, pe, typ)
        if container is MISSING:
            return MISSING
        cur = container[where]
        typ = child_type(typ, pe)
    return cur


def type_at(typ: TypeNode, path: Path) -> TypeNode:
    for pe in path:
        typ = child_type(typ, pe)
    return typ


def remove_at(obj: Any, path: Path, typ: TypeNode | None = None) -> bool:
    """Delete the value at ``path``; True if something was removed."""
    if not path:
        return False
    typ = typ if typ is not None else UNTYPED
    parent = get_at(obj, path[:-1], typ)
    if parent is MISSING:
        return False
    container, where = _step(parent, path[-1], type_at(typ, path[:-1]))
    if container is MISSING:
        return False
    del container[where]
    return True


def display(path: Path) -> str:
    """Kubernetes' rendering of a path in conflict messages (``.spec.x[name="a"]``)."""
    out: list[str] = []
    for pe in path:
        kind, _, rest = pe.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            try:
                keys = json.loads(rest)
            except ValueError:
                keys = {}
            if isinstance(keys, dict):
                inner = ",".join(f"{k}={compact(v)}" for k, v in keys.items())
            else:
                inner = rest
            out.append(f"[{inner}]")
        elif kind == "v":
            out.append(f"[={rest}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


def under(path: Path, prefix: Path) -> bool:
    """True when ``path`` equals ``prefix`` or lies below it."""
    return path[:len(prefix)] == prefix


@dataclass
class ManagedEntry:
    """One ``metadata.managedFields`` entry, its set decoded."""

    manager: str
    operation: str
    api_version: str = ""
    time: str = ""
    subresource: str = ""
    paths: set[Path] = field(default_factory=set)

    @classmethod
    def from_dict(cls, d: Any) -> ManagedEntry | None:
        if not isinstance(d, dict):
            return None
        return cls(
            manager=str(d.get("manager", "")),
            operation=str(d.get("operation", "")),
            api_version=str(d.get("apiVersion", "")),
            time=str(d.get("time", "") or ""),
            subresource=str(d.get("subresource", "") or ""),
            paths=decode(d.get("fieldsV1")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"manager": self.manager, "operation": self.operation,
                               "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = encode(self.paths)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def read_entries(obj: Any) -> list[ManagedEntry]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    raw = meta.get("managedFields") if isinstance(meta, dict) else None
    if not isinstance(raw, list):
        return []
    entries = [ManagedEntry.from_dict(d) for d in raw]
    return [e for e in entries if e is not None]


def write_entries(obj: dict[str, Any], entries: list[ManagedEntry]) -> None:
    meta = obj.setdefault("metadata", {})
    kept = [e.to_dict() for e in entries if e.paths]
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)
