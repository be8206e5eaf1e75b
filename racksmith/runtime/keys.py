"""Object keys and the pure mappers from an object to the keys to reconcile.

A key is ``(namespace, name)``; cluster-scoped objects have namespace ``""``.
Mappers take a raw Kubernetes object (a dict as read from the API) and return
the keys of the *primary* objects it concerns; sources apply them to every
event, so a "secondary" watch (e.g. Pods owned by a Widget) enqueues the
owners. Mappers are pure and never raise on malformed objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple


class ObjectKey(NamedTuple):
    """Identifies one object of the controller's primary kind."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


Mapper = Callable[[Mapping[str, Any]], Iterable[ObjectKey]]
"""From a raw object to the primary keys to enqueue."""


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    """The key of ``obj`` itself (from ``metadata.namespace`` / ``metadata.name``)."""
    meta = obj.get("metadata") or {}
    return ObjectKey(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def self_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """The default mapper: the object's own key."""
    key = key_of(obj)
    return [key] if key.name else []


def owner_keys(kind: str, group: str | None = None, *, controller_only: bool = False) -> Mapper:
    """A mapper to the owners of ``kind`` (and, if given, API ``group``).

    Owners live in the object's namespace (owner references never cross
    namespaces); a cluster-scoped owner of a namespaced object is keyed with
    namespace ``""`` only when the owned object is cluster-scoped too, so pass
    a custom mapper for that case.
    """

    def mapper(obj: Mapping[str, Any]) -> list[ObjectKey]:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        keys: list[ObjectKey] = []
        for ref in meta.get("ownerReferences") or []:
            if not isinstance(ref, Mapping) or ref.get("kind") != kind:
                continue
            if controller_only and not ref.get("controller"):
                continue
            if group is not None and _group_of(str(ref.get("apiVersion") or "")) != group:
                continue
            name = ref.get("name")
            if name:
                keys.append(ObjectKey(namespace, str(name)))
        return keys

    return mapper


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def on_change(digest: Callable[[Mapping[str, Any]], Any], mapper: Mapper) -> Mapper:
    """Mapper wrapper (controller-runtime's predicates): drop events whose
    ``digest`` did not change since the last event of the same object — the
    kubelet's and the agents' periodic heartbeats, which would otherwise
    reconcile every object they concern several times a minute on a large
    fleet. Deletions always pass. A missed change costs at most the
    controller's periodic requeue."""
    seen: dict[ObjectKey, Any] = {}

    def mapped(obj: Mapping[str, Any]) -> list[ObjectKey]:
        key = key_of(obj)
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            seen.pop(key, None)
            return list(mapper(obj))
        value = digest(obj)
        if key in seen and seen[key] == value:
            return []
        seen[key] = value
        return list(mapper(obj))

    return mapped
