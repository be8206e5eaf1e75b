"""Server-side apply and managed-fields bookkeeping, simplified.

Owns: :func:`apply_patch` (``application/apply-patch+yaml``) and
:func:`record_update` (every other write), both maintaining
``metadata.managedFields`` in Kubernetes' format (``FieldsV1`` trees, one
``Apply`` entry per applying manager, one ``Update`` entry per updating
manager and subresource).

Apply: the applied configuration's fields are merged onto the live object
(maps recursively, keyed lists item by item, set lists as unions, atomic
lists and scalars replaced); fields the manager applied last time but omits
now are removed unless another manager owns them (or something below them);
a field whose value would change and that another manager (including the
same name's ``Update`` entry) owns is a conflict → :class:`ApplyConflict`,
or with ``force`` the field moves to the applier. Unchanged shared values
are co-owned. Update: fields the write added or changed move to the
manager's ``Update`` entry and leave every other entry; removed fields
leave every entry. Entries left empty are dropped.

Simplified relative to Kubernetes (structured-merge-diff):

* list semantics come from :mod:`.fieldsets` heuristics, not OpenAPI types
  (``finalizers`` a set, ``conditions`` keyed by ``type``, lists of objects
  with ``name`` keyed by ``name``, others atomic); keyed items the applier
  adds are appended after the live ones;
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
    display,
    fieldset,
    get_at,
    is_stripped,
    key_element,
    list_key,
    read_entries,
    remove_at,
    under,
    value_element,
    write_entries,
)
from racksmith.apiserver.patching.merge import go_unmarshal_error
from racksmith.apiserver.schema.jsonvalue import json_equal


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _merge_apply(live: Any, cfg: Any, name: str | None) -> Any:
    if isinstance(cfg, dict):
        out = dict(live) if isinstance(live, dict) else {}
        for k, v in cfg.items():
            out[k] = _merge_apply(out.get(k, MISSING), v, k)
        return out
    if isinstance(cfg, list) and isinstance(live, list):
        key = list_key(name, cfg)
        if key == "=":
            merged = list(live)
            for v in cfg:
                if not any(json_equal(v, x) for x in merged):
                    merged.append(copy.deepcopy(v))
            return merged
        if key is not None:
            out_list: list[Any] = list(live)
            for item in cfg:
                idx = next((i for i, x in enumerate(out_list)
                            if isinstance(x, dict) and key in x
                            and json_equal(x[key], item[key])), None)
                if idx is None:
                    out_list.append(copy.deepcopy(item))
                else:
                    out_list[idx] = _merge_apply(out_list[idx], item, None)
            return out_list
    return copy.deepcopy(cfg)


def _is_leaf(path: Path, paths: set[Path]) -> bool:
    n = len(path)
    return not any(len(q) > n and q[:n] == path for q in paths)


def apply_patch(live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                force: bool, now: str) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``live`` (None = create).

    Raises :class:`PatchError` for a non-object configuration or one that sets
    ``metadata.managedFields``, :class:`ApplyConflict` for conflicts unless
    ``force``. ``live`` is not mutated.
    """
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
    new_set = fieldset(config)
    prev_set = own.paths if own is not None else set()

    merged = _merge_apply(base, config, None)
    assert isinstance(merged, dict)

    conflicts: list[tuple[str, str]] = []
    versions: dict[str, str] = {}
    moved: list[tuple[ManagedEntry, Path]] = []
    for e in others:
        for p in sorted(e.paths & new_set):
            if not _is_leaf(p, new_set):
                continue
            before, after = get_at(base, p), get_at(merged, p)
            if before is MISSING or not json_equal(before, after):
                conflicts.append((display(p), e.manager))
                versions.setdefault(e.manager, e.api_version)
                moved.append((e, p))
    if conflicts and not force:
        raise ApplyConflict(conflicts, versions)
    for e, p in moved:
        e.paths.discard(p)

    owned_by_others: set[Path] = set().union(*(e.paths for e in others)) if others else set()
    for p in sorted(prev_set - new_set, key=len):
        if any(under(q, p) for q in owned_by_others) or any(under(q, p) for q in new_set):
            continue
        if _is_key_field(p):
            continue
        if remove_at(merged, p):
            _remove_emptied(merged, p, owned_by_others | new_set)

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


def _remove_emptied(obj: dict[str, Any], path: Path, owned: set[Path]) -> None:
    """Drop ancestors of a removed field that it left empty and nobody owns."""
    for i in range(len(path) - 1, 0, -1):
        anc = path[:i]
        value = get_at(obj, anc)
        if not isinstance(value, dict | list) or value or anc in owned or is_stripped(anc):
            return
        remove_at(obj, anc)


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


# -- Update bookkeeping -----------------------------------------------------------

_STRUCT_NAMES = frozenset({"metadata", "spec", "status", "template"})


def _add_all(value: Any, path: Path, name: str | None, out: set[Path]) -> None:
    """Every path of a newly written value, including new map/item nodes."""
    if isinstance(value, dict):
        if path and (not value or (len(path) >= 2 and name not in _STRUCT_NAMES)):
            out.add(path)
        for k, v in value.items():
            _add_all(v, (*path, f"f:{k}"), k, out)
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
                    _add_all(v, (*pe, f"f:{k}"), k, out)
    elif path:
        out.add(path)


def _diff(old: Any, new: Any, path: Path, name: str | None,
          changed: set[Path], removed: set[Path]) -> None:
    if old is MISSING:
        _add_all(new, path, name, changed)
        return
    if new is MISSING:
        removed.add(path)
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for k, v in new.items():
            _diff(old.get(k, MISSING), v, (*path, f"f:{k}"), k, changed, removed)
        for k in old:
            if k not in new:
                removed.add((*path, f"f:{k}"))
        return
    if isinstance(old, list) and isinstance(new, list):
        key = list_key(name, new) if new else list_key(name, old)
        old_key = list_key(name, old) if old else key
        if key is not None and key == old_key:
            if key == "=":
                for v in new:
                    if not any(json_equal(v, x) for x in old):
                        changed.add((*path, value_element(v)))
                for v in old:
                    if not any(json_equal(v, x) for x in new):
                        removed.add((*path, value_element(v)))
                return
            old_items = {key_element(key, x): x for x in old}
            new_items = {key_element(key, x): x for x in new}
            for pe, item in new_items.items():
                _diff(old_items.get(pe, MISSING), item, (*path, pe), None, changed, removed)
            for pe in old_items:
                if pe not in new_items:
                    removed.add((*path, pe))
            return
    if not json_equal(old, new):
        if isinstance(new, dict | list) and new:
            _add_all(new, path, name, changed)
            changed.add(path)
        else:
            changed.add(path)


def record_update(old: dict[str, Any] | None, new: dict[str, Any], *, manager: str,
                  api_version: str, now: str, subresource: str = "") -> None:
    """Update ``new``'s managedFields in place for a non-apply write by ``manager``.

    The managed fields of ``new`` are kept when the request carries them,
    otherwise those of ``old`` are taken over.
    """
    new_meta = new.get("metadata")
    if isinstance(new_meta, dict) and isinstance(new_meta.get("managedFields"), list):
        entries = read_entries(new)
    else:
        entries = read_entries(old) if old is not None else []
    changed: set[Path] = set()
    removed: set[Path] = set()
    _diff(_without_managed(old) if old is not None else MISSING, _without_managed(new), (),
          None, changed, removed)
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
