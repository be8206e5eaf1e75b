"""Strategic merge patch (``application/strategic-merge-patch+json``), simplified.

Owns: :func:`strategic_merge_patch` for the core kinds (custom resources get
415 from the server, as with Kubernetes, so a CRD schema's list markers never
reach it). Instead of Go struct tags, the patch strategy of each list comes
from a table keyed by field name (and, for ``ports``, by the parent field):
:data:`.schematypes.BUILTIN_LISTS`, the same table server-side apply falls
back to where no schema speaks:

* merged by key: ``containers``/``initContainers``/``ephemeralContainers``,
  ``env``, ``volumes``, ``imagePullSecrets``, ``secrets``, ``resourceClaims``
  (``name``); ``volumeMounts`` (``mountPath``); ``volumeDevices``
  (``devicePath``); ``ports`` (``containerPort`` in containers, ``port`` in a
  Service spec); ``conditions``/``addresses`` (``type``); ``taints``
  (``key``); ``ownerReferences`` (``uid``); ``hostAliases`` (``ip``);
  ``topologySpreadConstraints`` (``topologyKey``);
* merged as a set of primitives: ``finalizers``;
* every other list (``tolerations``, ``args``, ...) is replaced.

Maps merge recursively and ``null`` deletes a key. Directives understood:
``$patch: replace|delete|merge`` in maps and in list items (a list element
``{"$patch": "replace"}`` replaces the whole list), ``$retainKeys``,
``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``.

Simplified: the merge-key table is by field name, not by Go type, so an
unlisted list that Kubernetes would merge is replaced; ``$setElementOrder``
puts the listed elements first in the given order and keeps the others, in
their merged order, after them (Kubernetes interleaves those by their
server-side position). Merge keys are single fields, as Kubernetes'
``patchMergeKey`` is (server-side apply's list-map keys of the same table
can be several: ``ports`` by port and ``protocol``).
"""

from __future__ import annotations

import copy
from typing import Any

from racksmith.apiserver.patching.errors import PatchError
from racksmith.apiserver.patching.merge import go_unmarshal_error
from racksmith.apiserver.patching.schematypes import builtin_list
from racksmith.apiserver.schema.jsonvalue import canonical, json_equal

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_DELETE = object()


def merge_key(path: tuple[str, ...]) -> str | None:
    """The merge key of the list at ``path`` (field names only), None if atomic."""
    entry = builtin_list(path)
    return entry.patch_merge_key if entry is not None else None


def _merges_primitives(path: tuple[str, ...]) -> bool:
    entry = builtin_list(path)
    return entry is not None and entry.patch_primitives


def _clean(value: Any) -> Any:
    """Drop directive keys (``$...``) recursively."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_clean(v) for v in value
                if not (isinstance(v, dict) and set(v) == {"$patch"})]
    return copy.deepcopy(value)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> Any:
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _clean({k: v for k, v in patch.items() if v is not None})
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive} in map", 422)
    retain = patch.pop("$retainKeys", None)
    result = dict(original)
    if retain is not None:
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError("$retainKeys must be a list of strings", 422)
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, Any] = {}
    for k in list(patch):
        if k.startswith(_ORDER):
            orders[k[len(_ORDER):]] = patch.pop(k)
        elif k.startswith(_DELETE_PRIMITIVE):
            field = k[len(_DELETE_PRIMITIVE):]
            values = patch.pop(k)
            if not isinstance(values, list):
                raise PatchError(f"{k} must be a list", 422)
            current = result.get(field)
            if isinstance(current, list):
                result[field] = [x for x in current
                                 if not any(json_equal(x, d) for d in values)]
        elif k.startswith("$"):
            patch.pop(k)
    for k, pv in patch.items():
        if pv is None:
            result.pop(k, None)
            continue
        ov = result.get(k)
        if isinstance(pv, dict):
            merged = _merge_map(ov if isinstance(ov, dict) else {}, pv, (*path, k))
            if merged is _DELETE:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(pv, list):
            merged_list = _merge_list(ov if isinstance(ov, list) else [], pv, (*path, k))
            if merged_list is _DELETE:
                result.pop(k, None)
            else:
                result[k] = merged_list
        else:
            result[k] = pv
    for field, order in orders.items():
        current = result.get(field)
        if isinstance(current, list) and isinstance(order, list):
            result[field] = _reorder(current, order, merge_key((*path, field)))
    return result


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...]) -> Any:
    for item in patch:
        if isinstance(item, dict) and item.get("$patch") == "replace" and len(item) == 1:
            return _clean([x for x in patch if x is not item])
        if isinstance(item, dict) and item.get("$patch") == "delete" and len(item) == 1:
            return _DELETE
    name = path[-1] if path else ""
    if _merges_primitives(path):
        result = list(original)
        for v in patch:
            if not any(json_equal(v, x) for x in result):
                result.append(copy.deepcopy(v))
        return result
    key = merge_key(path)
    if key is None:
        return _clean(patch)
    out: list[Any] = [copy.deepcopy(x) for x in original]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"cannot merge a non-map into the list {name} "
                             f"(merge key {key})", 422)
        if key not in item:
            raise PatchError(f"map: {canonical(item)} does not contain declared merge key: "
                             f"{key}", 422)
        idx = next((i for i, x in enumerate(out)
                    if isinstance(x, dict) and json_equal(x.get(key), item[key])), None)
        action = item.get("$patch")
        if action == "delete":
            if idx is not None:
                out = [x for x in out
                       if not (isinstance(x, dict) and json_equal(x.get(key), item[key]))]
            continue
        if action == "replace":
            replacement = _clean({k: v for k, v in item.items() if v is not None})
            if idx is None:
                out.append(replacement)
            else:
                out[idx] = replacement
            continue
        if idx is None:
            merged = _merge_map({}, item, path)
            if merged is not _DELETE:
                out.append(merged)
        else:
            merged = _merge_map(out[idx], item, path)
            if merged is _DELETE:
                del out[idx]
            else:
                out[idx] = merged
    return out


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(x: Any) -> str:
        if key is not None and isinstance(x, dict):
            return canonical(x.get(key))
        return canonical(x)

    positions: dict[str, int] = {}
    for i, o in enumerate(order):
        positions.setdefault(ident(o), i)
    listed = sorted((x for x in items if ident(x) in positions), key=lambda x: positions[ident(x)])
    others = [x for x in items if ident(x) not in positions]
    return listed + others


def strategic_merge_patch(target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a strategic merge patch to ``target`` (not mutated); see module docs."""
    if not isinstance(patch, dict):
        raise PatchError(go_unmarshal_error(patch))
    result = _merge_map(copy.deepcopy(target), patch, ())
    if result is _DELETE:
        return {}
    assert isinstance(result, dict)
    return result
