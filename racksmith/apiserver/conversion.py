"""Version conversion between a served version and the stored form.

Owns: the ``None`` conversion strategy (only ``apiVersion`` changes) used for
every custom resource and most built-ins, and the one real conversion the
server needs: ``events.k8s.io/v1`` Events are stored as core ``v1`` Events
(one storage, two views), field names mapped as kube-apiserver does.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver.registry import ResourceInfo

Obj = dict[str, Any]

# events.k8s.io/v1 field → core/v1 field
_EVENT_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_EVENT_FIELDS_BACK = {v: k for k, v in _EVENT_FIELDS.items()}


def storage_resource(info: ResourceInfo) -> str:
    """The store's resource key for ``info`` (shared by all its versions)."""
    if info.group == "events.k8s.io" and info.plural == "events":
        return "core/events"
    return info.storage_key


def to_storage(info: ResourceInfo, obj: Obj) -> Obj:
    """Convert an object of ``info``'s version into the stored form (in place)."""
    if info.group == "events.k8s.io" and info.plural == "events":
        for new, old in _EVENT_FIELDS.items():
            if new in obj:
                obj[old] = obj.pop(new)
        obj["apiVersion"] = "v1"
        return obj
    return obj


def from_storage(info: ResourceInfo, obj: Obj) -> Obj:
    """Present a stored object at ``info``'s version (in place)."""
    if info.group == "events.k8s.io" and info.plural == "events":
        for old, new in _EVENT_FIELDS_BACK.items():
            if old in obj:
                obj[new] = obj.pop(old)
    obj["apiVersion"] = info.api_version
    obj["kind"] = info.kind
    return obj


def field_value(obj: Obj, path: str) -> str | None:
    """A field selector's view of ``obj`` (booleans as "true"/"false")."""
    if path == "source" and isinstance(obj.get("source"), dict):
        return str(obj["source"].get("component", ""))
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if cur is None:
        return ""
    if isinstance(cur, dict | list):
        return None
    return str(cur)
