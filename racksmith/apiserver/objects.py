"""Object metadata rules: what the server checks and fills on every write.

Owns: name/label/annotation validation (the same rules and messages as
kube-apiserver), the fields the server sets on create (uid,
creationTimestamp, generation), the fields it protects on update (uid,
creationTimestamp, name, namespace, deletion fields), status-subresource
separation and ``generation`` bumps. Pure: no I/O.
"""

from __future__ import annotations

import base64
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.registry import ResourceInfo
from racksmith.jsoncopy import json_copy

Obj = dict[str, Any]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_ANNOTATIONS_BYTES = 256 * 1024

SERVER_METADATA = ("uid", "creationTimestamp", "resourceVersion", "generation",
                   "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def name_errors(value: str, *, label: bool) -> list[str]:
    if label:
        if is_dns1123_label(value):
            return []
        if len(value) > 63:
            return ["must be no more than 63 characters"]
        return ["a lowercase RFC 1123 label must consist of lower case alphanumeric "
                "characters or '-', and must start and end with an alphanumeric character "
                "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
    if is_dns1123_subdomain(value):
        return []
    if len(value) > 253:
        return ["must be no more than 253 characters"]
    return ["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]


def path_segment_errors(value: str) -> list[str]:
    """kube's path segment names (RBAC objects: ``system:discovery`` is one)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def qualified_name_errors(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errs: list[str] = []
    if "/" in key and not prefix:
        errs.append("prefix part must be non-empty")
    elif prefix and not is_dns1123_subdomain(prefix):
        errs.append("prefix part " + name_errors(prefix, label=False)[0])
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
    return errs


def _quote(value: Any) -> str:
    return '"' + str(value).replace('"', '\\"') + '"'


def validate_metadata(info: ResourceInfo, obj: Obj, *, namespace: str | None) -> list[Cause]:
    """Check metadata of an object about to be written."""
    causes: list[Cause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Cause("metadata", "Required value", "FieldValueRequired")]
    name = meta.get("name")
    if not name:
        if not meta.get("generateName"):
            causes.append(Cause("metadata.name", "Required value: name or generateName is "
                                "required", "FieldValueRequired"))
    elif not isinstance(name, str):
        causes.append(Cause("metadata.name", "Invalid value: must be a string"))
    else:
        label = info.plural == "namespaces" and info.group == ""
        errs = (path_segment_errors(name) if info.group == "rbac.authorization.k8s.io"
                else name_errors(name, label=label))
        for err in errs:
            causes.append(Cause("metadata.name", f"Invalid value: {_quote(name)}: {err}"))
    if info.namespaced and namespace is not None:
        ns = meta.get("namespace")
        if ns and not isinstance(ns, str):
            causes.append(Cause("metadata.namespace", "Invalid value: must be a string"))
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(Cause("metadata.labels", "Invalid value: must be a map of strings",
                                "FieldValueTypeInvalid"))
        else:
            for key, value in labels.items():
                for err in qualified_name_errors(key):
                    causes.append(Cause("metadata.labels", f"Invalid value: {_quote(key)}: {err}"))
                if not isinstance(value, str):
                    causes.append(Cause(f"metadata.labels[{key}]",
                                        "Invalid value: must be a string",
                                        "FieldValueTypeInvalid"))
                elif len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
                    causes.append(Cause(
                        "metadata.labels", f"Invalid value: {_quote(value)}: a valid label "
                        "must be an empty string or consist of alphanumeric characters, '-', "
                        "'_' or '.', and must start and end with an alphanumeric character "
                        "(at most 63 characters)"))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            causes.append(Cause("metadata.annotations",
                                "Invalid value: must be a map of strings",
                                "FieldValueTypeInvalid"))
        else:
            total = 0
            for key, value in annotations.items():
                for err in qualified_name_errors(key.lower()):
                    causes.append(Cause("metadata.annotations",
                                        f"Invalid value: {_quote(key)}: {err}"))
                if not isinstance(value, str):
                    causes.append(Cause(f"metadata.annotations[{key}]",
                                        "Invalid value: must be a string",
                                        "FieldValueTypeInvalid"))
                else:
                    total += len(key) + len(value)
            if total > MAX_ANNOTATIONS_BYTES:
                causes.append(Cause("metadata.annotations", "Too long: must have at most "
                                    f"{MAX_ANNOTATIONS_BYTES} bytes", "FieldValueTooLong"))
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            causes.append(Cause("metadata.finalizers", "Invalid value: must be a list of strings",
                                "FieldValueTypeInvalid"))
        else:
            for i, fin in enumerate(finalizers):
                errs = qualified_name_errors(fin)
                if errs:
                    causes.append(Cause(f"metadata.finalizers[{i}]",
                                        f"Invalid value: {_quote(fin)}: {errs[0]}"))
    owners = meta.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            causes.append(Cause("metadata.ownerReferences", "Invalid value: must be a list",
                                "FieldValueTypeInvalid"))
        else:
            for i, ref in enumerate(owners):
                if not isinstance(ref, dict):
                    causes.append(Cause(f"metadata.ownerReferences[{i}]", "Invalid value"))
                    continue
                for fld in ("apiVersion", "kind", "name", "uid"):
                    if not ref.get(fld):
                        causes.append(Cause(f"metadata.ownerReferences[{i}].{fld}",
                                            "Required value", "FieldValueRequired"))
    return causes


def normalize_metadata(obj: Obj) -> None:
    """Drop empty metadata collections, as kube's typed ObjectMeta (omitempty)
    does when it serialises."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    for key in ("labels", "annotations", "finalizers", "ownerReferences", "managedFields",
                "generateName"):
        if key in meta and not meta[key]:
            del meta[key]


def strip_server_metadata(obj: Obj) -> None:
    meta = obj.setdefault("metadata", {})
    for key in SERVER_METADATA:
        meta.pop(key, None)


def prepare_create(info: ResourceInfo, obj: Obj, *, namespace: str) -> None:
    """Fill the server-owned fields of a new object (in place)."""
    meta = obj.setdefault("metadata", {})
    strip_server_metadata(obj)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
    if info.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    meta["generation"] = 1
    if info.has_status and not info.preserve_status_on_create:
        obj.pop("status", None)
    obj["apiVersion"] = info.api_version
    obj["kind"] = info.kind
    normalize_metadata(obj)


def builtin_defaults(info: ResourceInfo, obj: Obj) -> None:
    """What kube's typed defaulting and conversion do for a few built-ins."""
    if info.group == "" and info.plural == "secrets":
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict):
            data = obj.setdefault("data", {}) or {}
            obj["data"] = data
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        obj.setdefault("type", "Opaque")
        if not obj.get("type"):
            obj["type"] = "Opaque"


def returns_deleted_object(info: ResourceInfo) -> bool:
    """kube's ``ReturnDeletedObject``: custom resources and the built-ins below
    answer a delete with the object; other built-ins with a Success Status."""
    return not info.builtin or info.storage_key in _RETURNS_OBJECT


_RETURNS_OBJECT = frozenset({
    "core/pods", "core/namespaces", "core/persistentvolumes", "core/persistentvolumeclaims",
    "core/serviceaccounts", "storage.k8s.io/storageclasses"})


def spec_of(obj: Obj) -> Obj:
    """Everything that counts for ``generation``: all but metadata and status."""
    return {k: v for k, v in obj.items()
            if k not in ("metadata", "status", "apiVersion", "kind")}


def prepare_update(info: ResourceInfo, old: Obj, new: Obj, *, subresource: str) -> None:
    """Carry server-owned fields from ``old`` into ``new`` (in place) and apply
    the status-subresource split."""
    old_meta = old.get("metadata", {})
    meta = new.setdefault("metadata", {})
    check_immutable_metadata(info, old_meta, meta)
    for key in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                "deletionGracePeriodSeconds", "generation"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    meta.pop("selfLink", None)
    normalize_metadata(new)
    new["apiVersion"] = info.api_version
    new["kind"] = info.kind
    if subresource == "status":
        status = new.get("status")
        keep = json_copy(old)
        keep["metadata"]["resourceVersion"] = meta.get("resourceVersion",
                                                       old_meta.get("resourceVersion"))
        new.clear()
        new.update(keep)
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        return
    if info.has_status:
        if "status" in old:
            new["status"] = json_copy(old["status"])
        else:
            new.pop("status", None)
    if "generation" in old_meta and spec_of(old) != spec_of(new):
        meta["generation"] = int(old_meta["generation"]) + 1


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.replace(microsecond=0)


def check_immutable_metadata(info: ResourceInfo, old_meta: Obj, meta: Obj) -> None:
    """An update that sets ``uid`` or ``creationTimestamp`` to another value is
    refused (422 ``field is immutable``); leaving them out keeps the stored
    ones. Timestamps compare as instants, to the second (the Python client
    writes ``+00:00`` where the server wrote ``Z``)."""
    causes: list[Cause] = []
    uid = meta.get("uid")
    if uid and uid != old_meta.get("uid"):
        causes.append(Cause("metadata.uid", f"Invalid value: {_quote(uid)}: field is immutable"))
    created = meta.get("creationTimestamp")
    if created and old_meta.get("creationTimestamp") and \
            _instant(created) != _instant(old_meta["creationTimestamp"]):
        causes.append(Cause("metadata.creationTimestamp",
                            f"Invalid value: {_quote(created)}: field is immutable"))
    if causes:
        raise errors.invalid(info.kind, str(old_meta.get("name") or ""), causes,
                             group=info.group)


def new_finalizers_while_deleting(old: Obj, new: Obj) -> list[str]:
    """Finalizers added to an object already being deleted (forbidden)."""
    if not old.get("metadata", {}).get("deletionTimestamp"):
        return []
    before = set(old["metadata"].get("finalizers") or [])
    return [f for f in new.get("metadata", {}).get("finalizers") or [] if f not in before]


MAX_DEPTH = 100
"""Deepest nesting a request body may have (objects and arrays)."""


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse bodies nested deeper than ``limit`` (iteratively: no recursion),
    and integers JSON cannot carry (YAML's are unbounded)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            if isinstance(item, int) and not isinstance(item, bool) and \
                    not -(2**63) <= item < 2**64:
                raise errors.bad_request("the request body holds an integer that does not "
                                         "fit in 64 bits")
            continue
        if depth > limit:
            raise errors.bad_request(f"the request body is nested more than {limit} levels "
                                     "deep")
        stack.extend((child, depth + 1) for child in children)
