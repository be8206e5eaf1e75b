"""Server-side apply and managed-fields bookkeeping, simplified.

Owns: :func:`apply_patch` (``application/apply-patch+yaml``) and
:func:`record_update` (every other write), both maintaining
``metadata.managedFields`` in Kubernetes' format (``FieldsV1`` trees, one
``Apply`` entry per applying manager, one ``Update`` entry per updating
manager and subresource).

Both follow the resource's types, a :class:`~.schematypes.TypeNode` built
from its schema by the caller: ``x-kubernetes-list-type`` (``atomic``,
``set``, ``map`` with ``x-kubernetes-list-map-keys``, several keys sorted in
``k:{...}`` as structured-merge-diff does, defaulted keys filled in) and
``x-kubernetes-map-type`` (``granular``, ``atomic``); a CRD list without a
list type is atomic. Where the schema says nothing (preserve-unknown-fields
regions, ``metadata``) and for the built-in kinds, lists are guessed: see
:mod:`.schematypes`.

Apply: the applied configuration's fields are merged onto the live object
(granular maps recursively, map lists item by item, set lists as unions,
atomic lists, atomic maps and scalars replaced); fields the manager applied
last time but omits now are removed unless another manager owns them (or
something below them): a set member or a list item goes, the others'
members and items stay; a field whose value would change and that another
manager (including the same name's ``Update`` entry) owns is a conflict →
:class:`ApplyConflict`, or with ``force`` the field moves to the applier.
Unchanged shared values (a set member two managers apply, the same field of
the same item) are co-owned. A configuration that does not fit a declared
list type (an item without its key and no default, a duplicate, a map in a
set) is rejected (:class:`PatchError`, 400; Kubernetes answers 500 today).
Update: fields the write added or changed move to the manager's ``Update``
entry and leave every other entry; removed fields leave every entry; a
stored list that does not fit its declared type is tracked as one leaf.
Entries left empty are dropped.

Simplified relative to Kubernetes (structured-merge-diff):

* list semantics where the schema says nothing are guessed (the built-in
  kinds' table, then lists of objects with a unique ``name`` keyed by
  ``name``), where Kubernetes knows the Go types of its built-in kinds and
  treats preserve-unknown-fields lists as atomic;
* keyed items and set members the applier adds are appended after the live
  ones (Kubernetes interleaves them in the applied order);
* an applied empty list is owned as a leaf even when it is a set or a map
  list (structured-merge-diff records no path for it), so it stays while
  its applier keeps applying it;
* ``null`` in an applied configuration means "not specified";
* a removal also drops the parents it leaves empty (unless owned);
* ``Update`` entries are not split per apiVersion, and an ``Update`` marks
  newly created maps with ``"."`` by a naming heuristic;
* the caller handles what is not about fields: the applied
  ``metadata.resourceVersion`` precondition, name/namespace/kind checks,
  status reset on the main resource, and which ``now`` to stamp.

Server-owned metadata (``resourceVersion``, ``uid``, ``creationTimestamp``,
``generation``, ``managedFields``, ``selfLink``, deletion fields) is never
taken from the applied configuration and never tracked, nor are
``apiVersion``, ``kind``, ``metadata.name`` and ``metadata.namespace``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from racksmith.apiserver.patching.errors import ApplyConflict, PatchError
from racksmith.apiserver.patching.fieldsets import (
    MISSING,
    SERVER_OWNED_META,
    ManagedEntry,
    Path,
    TypedValueError,
    display,
    fieldset,
    get_at,
    is_stripped,
    read_entries,
    remove_at,
    type_at,
    under,
    write_entries,
)
from racksmith.apiserver.patching.merge import go_unmarshal_error
from racksmith.apiserver.patching.schematypes import UNTYPED, ListSemantics, TypeNode
from racksmith.apiserver.schema.jsonvalue import json_equal


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _merge_apply(live: Any, cfg: Any, typ: TypeNode) -> Any:
    if isinstance(cfg, dict) and not typ.atomic_map:
        out = dict(live) if isinstance(live, dict) else {}
        for k, v in cfg.items():
            out[k] = _merge_apply(out.get(k, MISSING), v, typ.field(k))
        return out
    if isinstance(cfg, list) and isinstance(live, list):
        sem = typ.list_semantics(cfg)
        if sem.kind == "set":
            merged = list(live)
            for v in cfg:
                if not any(json_equal(v, x) for x in merged):
                    merged.append(copy.deepcopy(v))
            return merged
        if sem.kind == "map":
            out_list: list[Any] = list(live)
            index: dict[str, int] = {}
            for i, x in enumerate(out_list):
                pe = sem.element(x)
                if pe is not None:
                    index.setdefault(pe, i)
            item_typ = typ.items()
            for item in cfg:
                pe = sem.element(item)
                idx = index.get(pe) if pe is not None else None
                if idx is None:
                    out_list.append(copy.deepcopy(item))
                    if pe is not None:
                        index[pe] = len(out_list) - 1
                else:
                    out_list[idx] = _merge_apply(out_list[idx], item, item_typ)
            return out_list
    return copy.deepcopy(cfg)


def _is_leaf(path: Path, paths: set[Path]) -> bool:
    n = len(path)
    return not any(len(q) > n and q[:n] == path for q in paths)


def _applied_whole(config: dict[str, Any], paths: set[Path], typ: TypeNode) -> set[Path]:
    """The atomic lists and maps ``config`` applies (leaves of ``paths``)."""
    parents = {q[:i] for q in paths for i in range(1, len(q))}
    out: set[Path] = set()
    for q in paths - parents:
        value, at = get_at(config, q, typ), type_at(typ, q)
        if (isinstance(value, list) and at.list_semantics(value).atomic) or (
                isinstance(value, dict) and at.atomic_map):
            out.add(q)
    return out


def apply_patch(live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                force: bool, now: str, typ: TypeNode | None = None) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``live`` (None = create).

    ``typ`` is the type of the resource's objects
    (:meth:`.schematypes.TypeNode.root` of its schema); without it every list
    is guessed. Raises :class:`PatchError` for a non-object configuration, one
    that sets ``metadata.managedFields`` or one that does not fit a list type
    its schema declares (400), :class:`ApplyConflict` for conflicts unless
    ``force``. ``live`` is not mutated.
    """
    typ = typ if typ is not None else UNTYPED
    if not isinstance(applied, dict):
        raise PatchError(go_unmarshal_error(applied))
    meta = applied.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise PatchError(go_unmarshal_error(meta))
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil")
    config: dict[str, Any] = _drop_nulls(copy.deepcopy(applied))
    if isinstance(config.get("metadata"), dict):
        for k in SERVER_OWNED_META:
            config["metadata"].pop(k, None)
    base: dict[str, Any] = copy.deepcopy(live) if live is not None else {}
    api_version = str(config.get("apiVersion") or base.get("apiVersion") or "")
    entries = read_entries(base)
    own = next((e for e in entries if e.manager == manager and e.operation == "Apply"
                and not e.subresource), None)
    others = [e for e in entries if e is not own]
    try:
        new_set = fieldset(config, typ)
    except TypedValueError as exc:
        raise PatchError(f"failed to create typed patch object ({_gvknn(config, base)}): "
                         f"{exc}") from None
    prev_set = own.paths if own is not None else set()

    merged = _merge_apply(base, config, typ)
    assert isinstance(merged, dict)

    conflicts: list[tuple[str, str]] = []
    versions: dict[str, str] = {}
    moved: list[tuple[ManagedEntry, Path]] = []
    for e in others:
        for p in sorted(e.paths & new_set):
            if not _is_leaf(p, new_set):
                continue
            before, after = get_at(base, p, typ), get_at(merged, p, typ)
            if before is MISSING or not json_equal(before, after):
                conflicts.append((display(p), e.manager))
                versions.setdefault(e.manager, e.api_version)
                moved.append((e, p))
    if conflicts and not force:
        raise ApplyConflict(conflicts, versions)
    for e, p in moved:
        e.paths.discard(p)

    owned_by_others: set[Path] = set().union(*(e.paths for e in others)) if others else set()
    applied_whole = _applied_whole(config, new_set, typ)
    for p in sorted(prev_set - new_set, key=len):
        if any(under(q, p) for q in owned_by_others) or any(under(q, p) for q in new_set):
            continue
        if _is_key_field(p) or any(p[:i] in applied_whole for i in range(1, len(p))):
            # a key field goes with its item; below an atomic value applied now
            # (a list guessed keyed or a set last time) that value is the truth
            continue
        if remove_at(merged, p, typ):
            _remove_emptied(merged, p, owned_by_others | new_set, typ)

    changed = not json_equal(_without_managed(base), _without_managed(merged))
    if own is None:
        own = ManagedEntry(manager, "Apply", api_version, now)
        entries.append(own)
    elif changed or own.paths != new_set or own.api_version != api_version:
        own.time = now
    own.api_version = api_version
    own.paths = new_set
    write_entries(merged, entries)
    return merged


def _is_key_field(path: Path) -> bool:
    """True for ``...k:{"name":"x"}.f:name``: a keyed item's identity is never removed
    on its own (the item goes as a whole or stays)."""
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    try:
        keys = json.loads(path[-2][2:])
    except ValueError:
        return False
    return isinstance(keys, dict) and path[-1][2:] in keys


def _gvknn(config: dict[str, Any], base: dict[str, Any]) -> str:
    """``<namespace>/<name>; <group>/<version>, Kind=<kind>`` as Kubernetes names the
    object in apply errors."""
    meta: dict[str, Any] = config.get("metadata") or {}
    live_meta: dict[str, Any] = base.get("metadata") or {}
    namespace = meta.get("namespace") or live_meta.get("namespace") or ""
    name = meta.get("name") or live_meta.get("name") or ""
    api_version = str(config.get("apiVersion") or "")
    group_version = api_version if "/" in api_version else f"/{api_version}"
    return f"{namespace}/{name}; {group_version}, Kind={config.get('kind') or ''}"


def _remove_emptied(obj: dict[str, Any], path: Path, owned: set[Path],
                    typ: TypeNode) -> None:
    """Drop ancestors of a removed field that it left empty and nobody owns."""
    for i in range(len(path) - 1, 0, -1):
        anc = path[:i]
        value = get_at(obj, anc, typ)
        if not isinstance(value, dict | list) or value or anc in owned or is_stripped(anc):
            return
        remove_at(obj, anc, typ)


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


# -- Update bookkeeping -----------------------------------------------------------

_STRUCT_NAMES = frozenset({"metadata", "spec", "status", "template"})


def _field_name(path: Path) -> str | None:
    """The field a path ends in (None for a list item or the root)."""
    return path[-1][2:] if path and path[-1].startswith("f:") else None


def _add_all(value: Any, path: Path, typ: TypeNode, out: set[Path]) -> None:
    """Every path of a newly written value, including new map/item nodes."""
    if isinstance(value, dict):
        if typ.atomic_map:
            if path:
                out.add(path)
            return
        if path and (not value or (len(path) >= 2 and _field_name(path) not in _STRUCT_NAMES)):
            out.add(path)
        for k, v in value.items():
            _add_all(v, (*path, f"f:{k}"), typ.field(k), out)
    elif isinstance(value, list):
        sem = typ.list_semantics(value)
        if sem.atomic or not value or not sem.fits(value):
            out.add(path)
            return
        item_typ = typ.items()
        for item in value:
            pe = sem.element(item)
            assert pe is not None
            out.add((*path, pe))
            if sem.kind == "map" and not item_typ.atomic_map:
                for k, v in item.items():
                    _add_all(v, (*path, pe, f"f:{k}"), item_typ.field(k), out)
    elif path:
        out.add(path)


def _shared_semantics(typ: TypeNode, old: list[Any], new: list[Any]) -> ListSemantics | None:
    """The merge semantics both versions of a list fit, None to diff it as one leaf."""
    sem = typ.list_semantics(new) if new else typ.list_semantics(old)
    old_sem = typ.list_semantics(old) if old else sem
    if sem.atomic or sem != old_sem or not sem.fits(old) or not sem.fits(new):
        return None
    return sem


def _member(sem: ListSemantics, value: Any) -> str:
    pe = sem.element(value)
    assert pe is not None  # the list fits sem
    return pe


def _diff(old: Any, new: Any, path: Path, typ: TypeNode,
          changed: set[Path], removed: set[Path]) -> None:
    if old is MISSING:
        _add_all(new, path, typ, changed)
        return
    if new is MISSING:
        removed.add(path)
        return
    if isinstance(old, dict) and isinstance(new, dict) and not typ.atomic_map:
        for k, v in new.items():
            _diff(old.get(k, MISSING), v, (*path, f"f:{k}"), typ.field(k), changed, removed)
        for k in old:
            if k not in new:
                removed.add((*path, f"f:{k}"))
        return
    if isinstance(old, list) and isinstance(new, list):
        sem = _shared_semantics(typ, old, new)
        if sem is not None and sem.kind == "set":
            for v in new:
                if not any(json_equal(v, x) for x in old):
                    changed.add((*path, _member(sem, v)))
            for v in old:
                if not any(json_equal(v, x) for x in new):
                    removed.add((*path, _member(sem, v)))
            return
        if sem is not None:
            old_items = {sem.element(x): x for x in old}
            new_items = {sem.element(x): x for x in new}
            item_typ = typ.items()
            for pe, item in new_items.items():
                assert pe is not None
                _diff(old_items.get(pe, MISSING), item, (*path, pe), item_typ, changed, removed)
            for pe in old_items:
                if pe not in new_items:
                    assert pe is not None
                    removed.add((*path, pe))
            return
    if not json_equal(old, new):
        if isinstance(new, dict | list) and new:
            _add_all(new, path, typ, changed)
            changed.add(path)
        else:
            changed.add(path)


def record_update(old: dict[str, Any] | None, new: dict[str, Any], *, manager: str,
                  api_version: str, now: str, subresource: str = "",
                  typ: TypeNode | None = None) -> None:
    """Update ``new``'s managedFields in place for a non-apply write by ``manager``.

    The managed fields of ``new`` are kept when the request carries them,
    otherwise those of ``old`` are taken over. ``typ`` is the type of the
    resource's objects (see :func:`apply_patch`); a stored list that does not
    fit its declared type is tracked as one leaf.
    """
    typ = typ if typ is not None else UNTYPED
    new_meta = new.get("metadata")
    if isinstance(new_meta, dict) and isinstance(new_meta.get("managedFields"), list):
        entries = read_entries(new)
    else:
        entries = read_entries(old) if old is not None else []
    changed: set[Path] = set()
    removed: set[Path] = set()
    _diff(_without_managed(old) if old is not None else MISSING, _without_managed(new), (),
          typ, changed, removed)
    changed = {p for p in changed if p and not is_stripped(p)}
    removed = {p for p in removed if p and not is_stripped(p)}
    target = next((e for e in entries if e.manager == manager and e.operation == "Update"
                   and e.subresource == subresource), None)
    for e in entries:
        e.paths = {p for p in e.paths
                   if not any(under(p, r) for r in removed)
                   and (e is target or p not in changed)}
    if changed:
        if target is None:
            target = ManagedEntry(manager, "Update", api_version, now, subresource)
            entries.append(target)
        target.paths |= changed
        target.api_version = api_version
        target.time = now
    if not isinstance(new.get("metadata"), dict):
        new["metadata"] = {}
    write_entries(new, entries)
