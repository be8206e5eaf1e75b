"""Field sets of server-side apply and their ``FieldsV1`` encoding.

Owns: the path model of managed fields. A path is a tuple of Kubernetes
path elements exactly as ``fieldsV1`` spells them: ``f:<field>``,
``k:<json of the key fields>`` (an item of a keyed list), ``v:<json value>``
(a member of a set list). :func:`fieldset` lists the paths an object sets,
:func:`encode`/:func:`decode` convert path sets to and from ``fieldsV1``
trees (``"."`` marks a node that is owned and has owned children), and
:func:`get_at`/:func:`remove_at` read and delete at a path.

Simplified list semantics (no OpenAPI types): ``finalizers`` is a set;
``conditions`` whose items all have ``type`` are keyed by ``type``; any other
list whose items are all objects with a ``name`` is keyed by ``name``; every
other list is atomic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from racksmith.apiserver.schema.jsonvalue import compact, json_equal

Path = tuple[str, ...]
MISSING: Any = object()

SET_LISTS = frozenset({"finalizers"})
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


def list_key(name: str | None, items: list[Any]) -> str | None:
    """The key field of a keyed list, ``"="`` for a set, None for an atomic list."""
    if not items:
        return None
    if name in SET_LISTS and all(not isinstance(x, dict | list) for x in items):
        return "="
    if not all(isinstance(x, dict) for x in items):
        return None
    if name == "conditions" and all("type" in x for x in items):
        return "type"
    if all("name" in x for x in items):
        return "name"
    return None


def key_element(key: str, item: dict[str, Any]) -> str:
    return "k:" + compact({key: item.get(key)})


def value_element(value: Any) -> str:
    return "v:" + compact(value)


def is_stripped(path: Path) -> bool:
    return path in STRIPPED or (len(path) >= 2 and path[:2] in STRIPPED)


def fieldset(obj: Any, path: Path = (), name: str | None = None,
             out: set[Path] | None = None) -> set[Path]:
    """The paths ``obj`` sets (leaves, keyed items, set members), kube stripping applied."""
    out = set() if out is None else out
    _leaves(obj, path, name, out)
    return {p for p in out if p and not is_stripped(p)}


def _leaves(value: Any, path: Path, name: str | None, out: set[Path]) -> None:
    if isinstance(value, dict):
        if not value:
            out.add(path)
        for k, v in value.items():
            _leaves(v, (*path, f"f:{k}"), k, out)
    elif isinstance(value, list):
        key = list_key(name, value)
        if key is None:
            out.add(path)
        elif key == "=":
            for v in value:
                out.add((*path, value_element(v)))
        else:
            for item in value:
                pe = (*path, key_element(key, item))
                out.add(pe)
                for k, v in item.items():
                    _leaves(v, (*pe, f"f:{k}"), k, out)
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


def _find_keyed(items: list[Any], keys: dict[str, Any]) -> int | None:
    for i, x in enumerate(items):
        if isinstance(x, dict) and all(k in x and json_equal(x[k], v) for k, v in keys.items()):
            return i
    return None


def _find_value(items: list[Any], value: Any) -> int | None:
    for i, x in enumerate(items):
        if json_equal(x, value):
            return i
    return None


def _step(cur: Any, pe: str) -> tuple[Any, Any]:
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
            i = _find_keyed(cur, decoded)
        elif kind == "v":
            i = _find_value(cur, decoded)
        else:
            i = None
        if i is not None:
            return cur, i
    elif kind == "i" and isinstance(cur, list) and rest.isdigit() and int(rest) < len(cur):
        return cur, int(rest)
    return MISSING, None


def get_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` or :data:`MISSING`."""
    cur = obj
    for pe in path:
        container, where = _step(cur, pe)
        if container is MISSING:
            return MISSING
        cur = container[where]
    return cur


def remove_at(obj: Any, path: Path) -> bool:
    """Delete the value at ``path``; True if something was removed."""
    if not path:
        return False
    parent = get_at(obj, path[:-1])
    if parent is MISSING:
        return False
    container, where = _step(parent, path[-1])
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
