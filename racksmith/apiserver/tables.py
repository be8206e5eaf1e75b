"""Table responses (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``).

Owns: turning objects into ``meta.k8s.io/v1`` Tables: custom kinds from their
``additionalPrinterColumns`` (a JSONPath subset: ``.a.b``, ``[n]``, ``[*]``,
``[?(@.k=="v")]``), built-ins from the columns kubectl users know. Age cells
are rendered server side as kube-apiserver does ("5m", "3d4h").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from racksmith.apiserver.registry import ResourceInfo

Obj = dict[str, Any]

_TOKEN = re.compile(
    r"""\.([A-Za-z0-9_\-]+)"""
    r"""|\[(\*|-?\d+)\]"""
    r"""|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["']([^"']*)["']\)\]"""
    r"""|\['([^']+)'\]""")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Evaluate the JSONPath subset used by printer columns; all matches."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    if path and not path.startswith((".", "[")):
        path = "." + path
    values: list[Any] = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        key, index, fkey, fval, quoted = m.groups()
        nxt: list[Any] = []
        for v in values:
            if key is not None or quoted is not None:
                k = key if key is not None else quoted
                if isinstance(v, dict) and k in v:
                    nxt.append(v[k])
            elif index is not None:
                if isinstance(v, list):
                    if index == "*":
                        nxt.extend(v)
                    else:
                        i = int(index)
                        if -len(v) <= i < len(v):
                            nxt.append(v[i])
                elif isinstance(v, dict) and index == "*":
                    nxt.extend(v.values())
            else:
                if isinstance(v, list):
                    for item in v:
                        got = jsonpath(item, "." + fkey)
                        if got and str(got[0]) == fval:
                            nxt.append(item)
        values = nxt
    return values


def human_age(timestamp: str | None, now: datetime | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    return human_duration(seconds)


def human_duration(seconds: int) -> str:
    """kube's duration.HumanDuration."""
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        h = hours % 24
        return f"{days}d{h}h" if h else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        d = days % 365
        return f"{years}y{d}d" if d else f"{years}y"
    return f"{years}y"


def _cell_from_path(obj: Obj, path: str, col_type: str) -> Any:
    values = jsonpath(obj, path)
    if not values:
        return None
    if col_type == "date":
        return human_age(str(values[0]))
    if len(values) == 1:
        value = values[0]
        if isinstance(value, dict | list):
            return json.dumps(value, separators=(",", ":"))
        if col_type == "string" and not isinstance(value, str):
            return json.dumps(value) if isinstance(value, bool) else str(value)
        return value
    return ",".join(v if isinstance(v, str) else json.dumps(v) for v in values)


Column = tuple[str, str, int, Callable[[Obj], Any], str]
"""(name, type, priority, cell function, description)"""


def _meta(obj: Obj, key: str) -> Any:
    return obj.get("metadata", {}).get(key)


def _age(obj: Obj) -> str:
    return human_age(_meta(obj, "creationTimestamp"))


def _name(obj: Obj) -> str:
    return str(_meta(obj, "name") or "")


def _get(path: str) -> Callable[[Obj], Any]:
    def cell(obj: Obj) -> Any:
        values = jsonpath(obj, path)
        return values[0] if values else None
    return cell


def _node_status(obj: Obj) -> str:
    ready = "Unknown"
    for cond in obj.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if obj.get("spec", {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _node_roles(obj: Obj) -> str:
    roles = sorted(k.split("/", 1)[1] for k in (_meta(obj, "labels") or {})
                   if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> Callable[[Obj], str]:
    def cell(obj: Obj) -> str:
        for addr in obj.get("status", {}).get("addresses", []) or []:
            if addr.get("type") == kind:
                return str(addr.get("address"))
        return "<none>"
    return cell


def _pod_ready(obj: Obj) -> str:
    statuses = obj.get("status", {}).get("containerStatuses", []) or []
    total = len(obj.get("spec", {}).get("containers", []) or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(obj: Obj) -> str:
    if _meta(obj, "deletionTimestamp"):
        return "Terminating"
    return str(obj.get("status", {}).get("phase") or "Pending")


def _pod_restarts(obj: Obj) -> int:
    return sum(int(s.get("restartCount", 0))
               for s in obj.get("status", {}).get("containerStatuses", []) or [])


def _count(key: str) -> Callable[[Obj], int]:
    return lambda obj: len(obj.get(key) or {}) + (
        len(obj.get("binaryData") or {}) if key == "data" and obj.get("kind") == "ConfigMap"
        else 0)


def _event_object(obj: Obj) -> str:
    ref = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_last_seen(obj: Obj) -> str:
    ts = (obj.get("lastTimestamp") or obj.get("eventTime")
          or obj.get("series", {}).get("lastObservedTime") or _meta(obj, "creationTimestamp"))
    return human_age(ts)


def _pv_claim(obj: Obj) -> str:
    ref = obj.get("spec", {}).get("claimRef")
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""


def _capacity(section: str) -> Callable[[Obj], str]:
    def cell(obj: Obj) -> str:
        return str((obj.get(section, {}).get("capacity") or {}).get("storage", ""))
    return cell


def _modes(section: str) -> Callable[[Obj], str]:
    short = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}

    def cell(obj: Obj) -> str:
        modes = obj.get(section, {}).get("accessModes") or []
        return ",".join(short.get(m, m) for m in modes)
    return cell


def _or_none(fn: Callable[[Obj], Any]) -> Callable[[Obj], Any]:
    def cell(obj: Obj) -> Any:
        value = fn(obj)
        return "<none>" if value in (None, "") else value
    return cell


_AGE: Column = ("Age", "string", 0, _age, "CreationTimestamp is a timestamp.")
_NAME: Column = ("Name", "string", 0, _name, "Name must be unique within a namespace.")

BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "core/namespaces": [_NAME, ("Status", "string", 0, _get(".status.phase"), ""), _AGE],
    "core/secrets": [_NAME, ("Type", "string", 0, _get(".type"), ""),
                     ("Data", "integer", 0, _count("data"), ""), _AGE],
    "core/configmaps": [_NAME, ("Data", "integer", 0, _count("data"), ""), _AGE],
    "core/events": [("Last Seen", "string", 0, _event_last_seen, ""),
                    ("Type", "string", 0, _get(".type"), ""),
                    ("Reason", "string", 0, _get(".reason"), ""),
                    ("Object", "string", 0, _event_object, ""),
                    ("Message", "string", 0, lambda o: o.get("message") or o.get("note"), "")],
    "events.k8s.io/events": [("Last Seen", "string", 0, _event_last_seen, ""),
                             ("Type", "string", 0, _get(".type"), ""),
                             ("Reason", "string", 0, _get(".reason"), ""),
                             ("Object", "string", 0, _event_object, ""),
                             ("Message", "string", 0,
                              lambda o: o.get("note") or o.get("message"), "")],
    "core/nodes": [_NAME, ("Status", "string", 0, _node_status, ""),
                   ("Roles", "string", 0, _node_roles, ""), _AGE,
                   ("Version", "string", 0, _get(".status.nodeInfo.kubeletVersion"), ""),
                   ("Internal-IP", "string", 1, _node_address("InternalIP"), ""),
                   ("External-IP", "string", 1, _node_address("ExternalIP"), ""),
                   ("OS-Image", "string", 1, _get(".status.nodeInfo.osImage"), ""),
                   ("Kernel-Version", "string", 1, _get(".status.nodeInfo.kernelVersion"), ""),
                   ("Container-Runtime", "string", 1,
                    _get(".status.nodeInfo.containerRuntimeVersion"), "")],
    "core/pods": [_NAME, ("Ready", "string", 0, _pod_ready, ""),
                  ("Status", "string", 0, _pod_status, ""),
                  ("Restarts", "string", 0, _pod_restarts, ""), _AGE,
                  ("IP", "string", 1, _or_none(_get(".status.podIP")), ""),
                  ("Node", "string", 1, _or_none(_get(".spec.nodeName")), "")],
    "core/persistentvolumes": [
        _NAME, ("Capacity", "string", 0, _capacity("spec"), ""),
        ("Access Modes", "string", 0, _modes("spec"), ""),
        ("Reclaim Policy", "string", 0, _get(".spec.persistentVolumeReclaimPolicy"), ""),
        ("Status", "string", 0, _get(".status.phase"), ""),
        ("Claim", "string", 0, _pv_claim, ""),
        ("StorageClass", "string", 0, _get(".spec.storageClassName"), ""),
        ("Reason", "string", 0, _get(".status.reason"), ""), _AGE,
        ("VolumeMode", "string", 1, _get(".spec.volumeMode"), "")],
    "core/persistentvolumeclaims": [
        _NAME, ("Status", "string", 0, _get(".status.phase"), ""),
        ("Volume", "string", 0, _get(".spec.volumeName"), ""),
        ("Capacity", "string", 0, _capacity("status"), ""),
        ("Access Modes", "string", 0, _modes("spec"), ""),
        ("StorageClass", "string", 0, _get(".spec.storageClassName"), ""), _AGE],
    "core/serviceaccounts": [_NAME, _AGE],
    "storage.k8s.io/storageclasses": [
        _NAME, ("Provisioner", "string", 0, _get(".provisioner"), ""),
        ("ReclaimPolicy", "string", 0, lambda o: o.get("reclaimPolicy") or "Delete", ""),
        ("VolumeBindingMode", "string", 0,
         lambda o: o.get("volumeBindingMode") or "Immediate", ""),
        ("AllowVolumeExpansion", "string", 0,
         lambda o: str(bool(o.get("allowVolumeExpansion"))).lower(), ""), _AGE],
    "policy/poddisruptionbudgets": [
        _NAME, ("Min Available", "string", 0, _or_none(_get(".spec.minAvailable")), ""),
        ("Max Unavailable", "string", 0, _or_none(_get(".spec.maxUnavailable")), ""),
        ("Allowed Disruptions", "integer", 0,
         lambda o: o.get("status", {}).get("disruptionsAllowed", 0), ""), _AGE],
    "coordination.k8s.io/leases": [
        _NAME, ("Holder", "string", 0, _get(".spec.holderIdentity"), ""), _AGE],
    "apiextensions.k8s.io/customresourcedefinitions": [
        _NAME, ("Created At", "string", 0, lambda o: _meta(o, "creationTimestamp"), "")],
}


def columns_for(info: ResourceInfo) -> list[Column]:
    if info.builtin:
        return BUILTIN_COLUMNS.get(info.storage_key, [_NAME, _AGE])
    if not info.printer_columns:
        return [_NAME, _AGE]
    cols: list[Column] = [_NAME]
    for col in info.printer_columns:
        path = str(col.get("jsonPath", ""))
        ctype = str(col.get("type", "string"))

        def cell(obj: Obj, path: str = path, ctype: str = ctype) -> Any:
            return _cell_from_path(obj, path, ctype)
        cols.append((str(col.get("name", "")), ctype, int(col.get("priority", 0)), cell,
                     str(col.get("description", ""))))
    return cols


def partial_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {})}


def to_table(info: ResourceInfo, objects: list[Obj], *, rv: str = "",
             continue_token: str = "", include_object: str = "Metadata") -> Obj:
    cols = columns_for(info)
    rows = []
    for obj in objects:
        cells = []
        for _cname, ctype, _prio, fn, _desc in cols:
            try:
                value = fn(obj)
            except (KeyError, TypeError, ValueError, AttributeError):
                value = None
            if ctype == "date" and value is not None and info.builtin:
                value = human_age(str(value))
            cells.append(value)
        row: Obj = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    metadata: Obj = {"resourceVersion": rv}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {"name": name, "type": "string" if ctype == "date" else ctype,
             "format": "name" if name == "Name" else "", "description": desc,
             "priority": prio}
            for name, ctype, prio, _fn, desc in cols],
        "rows": rows,
    }
