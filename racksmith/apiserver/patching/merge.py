"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Owns: :func:`json_merge_patch` (``application/merge-patch+json``) and
:func:`json_patch` (``application/json-patch+json``, applied with the
``jsonpatch`` library one operation at a time so failures name the failing
operation). Inputs are never mutated; results are fresh objects. Messages
follow the Go implementations kube-apiserver uses (``encoding/json`` decode
errors, ``evanphx/json-patch``).
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer

from racksmith.apiserver.patching.errors import PatchError, PatchTestFailed
from racksmith.jsoncopy import json_copy

_GO_TYPES = {list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def go_unmarshal_error(value: Any, target: str = "map[string]interface {}") -> str:
    """The message of Go's ``json.Unmarshal`` of ``value`` into ``target``."""
    kind = "object" if isinstance(value, dict) else _GO_TYPES.get(type(value), "value")
    return f"json: cannot unmarshal {kind} into Go value of type {target}"


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = _merge(result.get(k), v)
    return result


def json_merge_patch(target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply an RFC 7386 merge patch to ``target``; the patch must be an object."""
    if not isinstance(patch, dict):
        if patch is None:
            raise PatchError("the request body is not a JSON merge patch: null")
        raise PatchError(go_unmarshal_error(patch))
    result = _merge(json_copy(target), patch)
    assert isinstance(result, dict)
    return result


_OPS = ("add", "remove", "replace", "move", "copy", "test")


def _check_ops(ops: Any) -> list[dict[str, Any]]:
    if not isinstance(ops, list):
        raise PatchError(go_unmarshal_error(ops, "jsonpatch.Patch"))
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError(go_unmarshal_error(op, "jsonpatch.Operation"))
        kind = op.get("op")
        if kind not in _OPS:
            raise PatchError(f"Unexpected kind: {kind if isinstance(kind, str) else ''}")
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"{kind} operation is missing path", 400)
        if path and not path.startswith("/"):
            raise PatchError(f'{kind} operation does not apply: invalid path "{path}"', 422)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation is missing value", 400)
        if kind in ("move", "copy"):
            src = op.get("from")
            if not isinstance(src, str):
                raise PatchError(f"{kind} operation is missing from", 400)
    return ops


def _fail(op: dict[str, Any], exc: Exception) -> PatchError:
    kind, path = op["op"], op["path"]
    if kind == "test":
        return PatchTestFailed(f"testing value {path} failed: test failed")
    if kind == "remove":
        last = path.rsplit("/", 1)[-1]
        return PatchError(f"Unable to remove nonexistent key: {last}: missing value", 422)
    if kind == "replace":
        return PatchError(f"replace operation does not apply: doc is missing key: {path}: "
                          "missing value", 422)
    if kind == "add":
        if isinstance(exc, jsonpatch.JsonPatchConflict):
            return PatchError(f'add operation does not apply: {exc}: "{path}"', 422)
        return PatchError(f'add operation does not apply: doc is missing path: "{path}": '
                          "missing value", 422)
    return PatchError(f"{kind} operation does not apply: doc is missing from path: "
                      f"{op.get('from')}: missing value", 422)


def json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch; malformed → :class:`PatchError` (400), failing
    op → :class:`PatchError` (422), failed ``test`` → :class:`PatchTestFailed`."""
    checked = _check_ops(ops)
    doc: Any = json_copy(target)
    for op in checked:
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
                KeyError, IndexError, TypeError, ValueError) as exc:
            raise _fail(op, exc) from None
    if not isinstance(doc, dict):
        raise PatchError(go_unmarshal_error(doc), 422)
    return doc
