"""List and map types of an object's fields, read from its schema (pure, no I/O).

Owns: :class:`TypeNode`, the type at one position of an object, walked
alongside the object (:meth:`TypeNode.field` for a map key,
:meth:`TypeNode.items` for a list element), and :class:`ListSemantics`,
how one list is merged and tracked by server-side apply and managed fields:
``atomic`` (one leaf, replaced as a whole), ``set`` (a member is
``v:<json value>``) or ``map`` (an item is ``k:{<key fields>}``). Also the
one table of the built-in kinds' list strategies, :data:`BUILTIN_LISTS`
(:func:`builtin_list`), which strategic merge patch uses for its merge keys
and apply uses where no schema speaks.

Where a list's semantics come from (first match wins):

1. the schema node's ``x-kubernetes-list-type`` (``atomic``, ``set``,
   ``map`` with ``x-kubernetes-list-map-keys``; a key an item omits takes
   the ``default`` of the item schema's property, as structured-merge-diff
   does);
2. for a custom resource (not ``builtin``), a schema node that declares the
   array without a list type: ``atomic``, Kubernetes' default for CRDs;
3. where the schema says nothing (no node: an
   ``x-kubernetes-preserve-unknown-fields`` region, the root ``metadata``
   and an embedded resource's, a resource without a schema) and for the
   built-in kinds, whose schemas are loose: :data:`BUILTIN_LISTS` by field
   name, when the items fit it (every key present or defaulted, keys
   unique; scalar members for a set);
4. then the heuristic: a list of objects that all have a unique ``name`` is
   keyed by ``name``; every other list, and every empty one (3 and 4 guess
   from the items), is atomic.

Maps and structs are granular (a field per key) unless the node says
``x-kubernetes-map-type: atomic`` (one leaf, replaced as a whole). A
declared list whose items do not fit it (a missing key, a duplicate, a map
in a set) is reported by :meth:`ListSemantics.problem`; the caller decides
whether that is an error (an applied configuration) or a reason to treat
the list as atomic (a stored object).

Nodes are resolved lazily, one dictionary lookup per step, so nothing is
precomputed or cached per schema.

Differences from Kubernetes: in a preserve-unknown-fields region Kubernetes
treats every list as atomic (the "deduced" type); here the table and the
heuristic guess, as for the built-in kinds. The table is by field name (and
parent field for ``ports``), not by Go type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from racksmith.apiserver.schema.jsonvalue import compact

Obj = dict[str, Any]
ListKind = Literal["atomic", "set", "map"]


@dataclass(frozen=True)
class Misfit:
    """Why a list does not fit its declared type, in structured-merge-diff's words."""

    element_index: int | None
    """The offending element, None for a duplicate."""
    message: str
    element: str | None = None
    """The duplicated path element (rendered after the message)."""


def _scalar(value: Any) -> bool:
    return value is not None and not isinstance(value, dict | list)


@dataclass(frozen=True)
class ListSemantics:
    """How one list is merged by apply and tracked in managed fields."""

    kind: ListKind
    keys: tuple[str, ...] = ()
    """The key fields of a ``map`` list, in declared order."""
    defaults: tuple[tuple[str, Any], ...] = ()
    """Values of key fields an item may omit (``protocol`` → ``TCP``)."""
    declared: bool = False
    """Read from the schema (items that do not fit are a mistake), not guessed."""

    @property
    def atomic(self) -> bool:
        return self.kind == "atomic"

    def key_defaults(self) -> dict[str, Any]:
        return dict(self.defaults)

    def key_of(self, item: Any) -> dict[str, Any] | None:
        """The key fields of ``item`` sorted by name (structured-merge-diff's
        order), defaults filled in; None when ``item`` cannot be keyed."""
        if not isinstance(item, dict):
            return None
        defaults = self.key_defaults()
        out: dict[str, Any] = {}
        for k in sorted(self.keys):
            if k in item and item[k] is not None:
                out[k] = item[k]
            elif k in defaults:
                out[k] = defaults[k]
            else:
                return None
        return out

    def element(self, item: Any) -> str | None:
        """The path element of ``item`` (``k:{...}`` or ``v:...``), None if it
        has none (atomic lists, items that do not fit)."""
        if self.kind == "set":
            return "v:" + compact(item) if _scalar(item) else None
        if self.kind == "map":
            key = self.key_of(item)
            return None if key is None else "k:" + compact(key)
        return None

    def problem(self, items: list[Any]) -> Misfit | None:
        """The first reason ``items`` do not fit these semantics, None if they do."""
        if self.kind == "atomic":
            return None
        seen: set[str] = set()
        defaults = self.key_defaults()
        for i, item in enumerate(items):
            if self.kind == "set":
                if item is None:
                    return Misfit(i, "associative list without keys has an element that's "
                                     "an explicit null")
                if isinstance(item, dict):
                    return Misfit(i, "associative list without keys has an element that's "
                                     "a map type")
                if isinstance(item, list):
                    return Misfit(i, "not supported: associative list with lists as elements")
            else:
                if item is None:
                    return Misfit(i, "associative list with keys may not have a null element")
                if not isinstance(item, dict):
                    return Misfit(i, "associative list with keys may not have non-map "
                                     "elements")
                for k in self.keys:
                    if (k not in item or item[k] is None) and k not in defaults:
                        return Misfit(i, "associative list with keys has an element that "
                                         f'omits key field "{k}" (and doesn\'t have default '
                                         "value)")
            pe = self.element(item)
            assert pe is not None
            if pe in seen:
                return Misfit(None, "duplicate entries for key", pe)
            seen.add(pe)
        return None

    def fits(self, items: list[Any]) -> bool:
        return self.problem(items) is None


ATOMIC = ListSemantics("atomic")
SET = ListSemantics("set")
_DECLARED_ATOMIC = ListSemantics("atomic", declared=True)
_DECLARED_SET = ListSemantics("set", declared=True)


# -- the built-in kinds' list strategies -----------------------------------------------


@dataclass(frozen=True)
class BuiltinList:
    """One list field of the built-in kinds, as their Go struct tags declare it."""

    patch_merge_key: str | None = None
    """Strategic merge: items are merged by this field (``patchMergeKey``)."""
    patch_primitives: bool = False
    """Strategic merge: merged as a set of primitives."""
    apply: ListSemantics = ATOMIC
    """Server-side apply (``listType``/``listMapKey``)."""


def _keyed(merge_key: str, *apply_keys: str, **defaults: Any) -> BuiltinList:
    keys = apply_keys or (merge_key,)
    return BuiltinList(patch_merge_key=merge_key,
                       apply=ListSemantics("map", keys, tuple(sorted(defaults.items()))))


BUILTIN_LISTS: Mapping[str, BuiltinList] = {
    "containers": _keyed("name"),
    "initContainers": _keyed("name"),
    "ephemeralContainers": _keyed("name"),
    "env": _keyed("name"),
    "volumes": _keyed("name"),
    "imagePullSecrets": _keyed("name"),
    "secrets": _keyed("name"),
    "resourceClaims": _keyed("name"),
    "volumeMounts": _keyed("mountPath"),
    "volumeDevices": _keyed("devicePath"),
    "conditions": _keyed("type"),
    "addresses": _keyed("type"),
    # strategic merge keys taints by key here; Kubernetes declares them atomic
    "taints": BuiltinList(patch_merge_key="key", apply=ATOMIC),
    "ownerReferences": _keyed("uid"),
    "hostAliases": _keyed("ip"),
    "topologySpreadConstraints": _keyed("topologyKey", "topologyKey", "whenUnsatisfiable"),
    "finalizers": BuiltinList(patch_primitives=True, apply=SET),
}
"""Lists by field name. ``ports`` depends on its parent: see :func:`builtin_list`.
Every other list is replaced by strategic merge (``tolerations``, ``args``...)."""

CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})
CONTAINER_PORTS = _keyed("containerPort", "containerPort", "protocol", protocol="TCP")
SERVICE_PORTS = _keyed("port", "port", "protocol", protocol="TCP")


def builtin_list(names: tuple[str, ...]) -> BuiltinList | None:
    """The strategy of the list at ``names`` (field names from the root, list
    items transparent: ``("spec", "containers", "ports")``), None if unlisted."""
    if not names:
        return None
    name = names[-1]
    if name == "ports":
        parent = names[-2] if len(names) > 1 else ""
        if parent in CONTAINER_LISTS:
            return CONTAINER_PORTS
        if parent == "spec":
            return SERVICE_PORTS
        return None
    return BUILTIN_LISTS.get(name)


def guess_list(names: tuple[str, ...], items: list[Any]) -> ListSemantics:
    """The built-in table's semantics if ``items`` fit them, else the heuristic
    (an empty list is atomic: there is nothing to guess from)."""
    if not items:
        return ATOMIC
    entry = builtin_list(names)
    if entry is not None and (entry.apply.atomic or entry.apply.fits(items)):
        return entry.apply
    if items and all(isinstance(x, dict) and x.get("name") is not None for x in items):
        by_name = ListSemantics("map", ("name",))
        if by_name.fits(items):
            return by_name
    return ATOMIC


# -- the type tree ---------------------------------------------------------------------


class TypeNode:
    """The type at one position of an object: its schema node (None where the
    schema has none) and the field names leading there."""

    __slots__ = ("builtin", "names", "resource", "schema")

    def __init__(self, schema: Obj | None, *, builtin: bool, names: tuple[str, ...] = (),
                 resource: bool = False) -> None:
        self.schema = schema
        self.builtin = builtin
        self.names = names
        self.resource = resource
        """An object with apiVersion/kind/metadata (the root, an embedded
        resource): its ``metadata`` is ObjectMeta, whatever the schema says."""

    @classmethod
    def root(cls, schema: Obj | None, *, builtin: bool) -> TypeNode:
        """The type of a whole object of a resource with ``schema``."""
        return cls(schema if isinstance(schema, dict) else None, builtin=builtin,
                   resource=True)

    def __repr__(self) -> str:
        where = ".".join(self.names) or "<root>"
        return f"TypeNode({where}, schema={'yes' if self.schema is not None else 'no'})"

    def field(self, name: str) -> TypeNode:
        """The type of the value under key ``name`` of this map."""
        names = (*self.names, name)
        if self.resource and name == "metadata":
            return TypeNode(None, builtin=self.builtin, names=names)
        child: Any = None
        s = self.schema
        if s is not None:
            props = s.get("properties")
            if isinstance(props, dict) and name in props:
                child = props[name]
            else:
                child = s.get("additionalProperties")
        if not isinstance(child, dict):
            return TypeNode(None, builtin=self.builtin, names=names)
        return TypeNode(child, builtin=self.builtin, names=names,
                        resource=child.get("x-kubernetes-embedded-resource") is True)

    def items(self) -> TypeNode:
        """The type of this list's elements."""
        child = self.schema.get("items") if self.schema is not None else None
        if not isinstance(child, dict):
            return TypeNode(None, builtin=self.builtin, names=self.names)
        return TypeNode(child, builtin=self.builtin, names=self.names,
                        resource=child.get("x-kubernetes-embedded-resource") is True)

    @property
    def atomic_map(self) -> bool:
        """``x-kubernetes-map-type: atomic``: the map/struct is one leaf."""
        return self.schema is not None and self.schema.get("x-kubernetes-map-type") == "atomic"

    def declared_list(self) -> ListSemantics | None:
        """The list semantics the schema declares here, None if it says nothing."""
        s = self.schema
        if s is None:
            return None
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "atomic":
            return _DECLARED_ATOMIC
        if list_type == "set":
            return _DECLARED_SET
        if list_type == "map":
            keys = s.get("x-kubernetes-list-map-keys")
            keys = tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else ()
            if keys:
                return ListSemantics("map", keys, self._key_defaults(keys), declared=True)
            return _DECLARED_ATOMIC
        if not self.builtin and (s.get("type") == "array" or "items" in s):
            return _DECLARED_ATOMIC
        return None

    def _key_defaults(self, keys: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
        items = self.schema.get("items") if self.schema is not None else None
        props = items.get("properties") if isinstance(items, dict) else None
        if not isinstance(props, dict):
            return ()
        return tuple(sorted((k, props[k]["default"]) for k in keys
                            if isinstance(props.get(k), dict) and "default" in props[k]))

    def list_semantics(self, items: list[Any]) -> ListSemantics:
        """The semantics of the list ``items`` at this position (see module docs)."""
        declared = self.declared_list()
        if declared is not None:
            return declared
        return guess_list(self.names, items)

    def key_defaults(self) -> dict[str, Any]:
        """Defaults of the key fields of a keyed list here (to find the item a
        ``k:`` path element names when the item omits a defaulted key)."""
        declared = self.declared_list()
        if declared is not None:
            return declared.key_defaults()
        entry = builtin_list(self.names)
        return entry.apply.key_defaults() if entry is not None else {}


UNTYPED = TypeNode.root(None, builtin=True)
"""An object without a schema: every list is guessed."""
