"""Request envelopes, type-checked before anything uses them.

Owns: the shapes a client sends around an object rather than the object
itself -- ``DeleteOptions`` (a DELETE body, an Eviction's
``deleteOptions``), the Namespace ``finalize`` body and an object's
``metadata`` scalars -- checked once, in one place, into the shapes the
verbs rely on. A wrong type is a 400 ``BadRequest`` worded as Go's JSON
decoder words it (``json: cannot unmarshal array into Go struct field
...``), as kube-apiserver answers when its typed decoding fails; nothing
downstream ever sees an unchecked value, so no client input can reach an
unexpected exception. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.schema import jsonvalue

Obj = dict[str, Any]

PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


_GO_NAMES = {"boolean": "bool", "integer": "number"}


def json_type(value: Any) -> str:
    """Go's name for a JSON value's type in unmarshal errors (the JSON type
    names of :func:`racksmith.apiserver.schema.jsonvalue.json_type`, with
    Go's ``bool`` and ``number`` for any number)."""
    name = jsonvalue.json_type(value)
    return _GO_NAMES.get(name, name)


def unmarshal_error(kind: str, value: Any, field: str, go_type: str) -> ApiError:
    return errors.bad_request(
        f"{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal "
        f"{json_type(value)} into Go struct field {field} of type {go_type}")


def _want(kind: str, value: Any, field: str, py: type | tuple[type, ...], go_type: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) and bool not in (py if isinstance(py, tuple) else (py,)):
        raise unmarshal_error(kind, value, field, go_type)
    if not isinstance(value, py):
        raise unmarshal_error(kind, value, field, go_type)


def delete_options(body: Any) -> Obj:
    """A checked copy of a DeleteOptions body (``None`` → no options)."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise errors.bad_request("DeleteOptions must be an object")
    kind = "DeleteOptions"
    out: Obj = {}
    pre = body.get("preconditions")
    _want(kind, pre, "DeleteOptions.preconditions", dict, "v1.Preconditions")
    if pre:
        checked: Obj = {}
        for name in ("uid", "resourceVersion"):
            value = pre.get(name)
            _want(kind, value, f"Preconditions.preconditions.{name}", str, "string")
            if value:
                checked[name] = value
        if checked:
            out["preconditions"] = checked
    policy = body.get("propagationPolicy")
    _want(kind, policy, "DeleteOptions.propagationPolicy", str, "v1.DeletionPropagation")
    if policy is not None:
        out["propagationPolicy"] = policy
    orphan = body.get("orphanDependents")
    _want(kind, orphan, "DeleteOptions.orphanDependents", bool, "bool")
    if orphan is not None:
        out["orphanDependents"] = orphan
    grace = body.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise unmarshal_error(kind, grace, "DeleteOptions.gracePeriodSeconds", "int64")
    if grace is not None:
        out["gracePeriodSeconds"] = grace
    dry = body.get("dryRun")
    _want(kind, dry, "DeleteOptions.dryRun", list, "[]string")
    for item in dry or []:
        _want(kind, item, "DeleteOptions.dryRun", str, "string")
        if item != "All":
            raise errors.bad_request(f'Unsupported value: "{item}": supported values: "All"')
    if dry:
        out["dryRun"] = list(dry)
    return out


def finalize_finalizers(body: Any) -> list[str]:
    """``spec.finalizers`` of a Namespace ``finalize`` body, checked."""
    kind = "Namespace"
    if not isinstance(body, dict):
        raise errors.bad_request(
            f"the body of the request was not a JSON object ({json_type(body)})")
    spec = body.get("spec")
    _want(kind, spec, "Namespace.spec", dict, "v1.NamespaceSpec")
    finalizers = (spec or {}).get("finalizers")
    _want(kind, finalizers, "Namespace.spec.finalizers", list, "[]v1.FinalizerName")
    for item in finalizers or []:
        _want(kind, item, "Namespace.spec.finalizers", str, "v1.FinalizerName")
        if item is None:
            raise unmarshal_error(kind, item, "Namespace.spec.finalizers", "v1.FinalizerName")
    return list(finalizers or [])


_META_STRINGS = ("name", "generateName", "namespace", "uid", "resourceVersion",
                 "creationTimestamp", "deletionTimestamp", "selfLink")
_META_INTS = ("generation", "deletionGracePeriodSeconds")


def check_metadata_types(kind: str, meta: Obj) -> None:
    """The scalar fields of ``metadata`` have the types ObjectMeta declares
    (maps and lists are validated with field paths by ``objects``)."""
    for name in _META_STRINGS:
        _want(kind, meta.get(name), f"ObjectMeta.metadata.{name}", str, "string")
    for name in _META_INTS:
        value = meta.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise unmarshal_error(kind, value, f"ObjectMeta.metadata.{name}", "int64")
