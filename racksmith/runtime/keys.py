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


class OnChange:
    """A mapper wrapper (controller-runtime's update predicate): drop the
    events whose ``digest`` did not change — the kubelet's and the agents'
    periodic heartbeats, which would otherwise reconcile every object they
    concern several times a minute on a large fleet. Deletions always pass. A
    missed change costs at most the controller's periodic requeue.

    An informer's source asks :meth:`objects` with the event's old and new
    object and compares the two, keeping no state. Called as a plain
    ``Mapper`` (one object at a time, by a source that has no old object), it
    compares with the last digest it saw of that object; an object deleted
    without a ``deletionTimestamp`` in its last event then keeps its entry.
    """

    def __init__(self, digest: Callable[[Mapping[str, Any]], Any], mapper: Mapper) -> None:
        self._digest = digest
        self._mapper = mapper
        self._seen: dict[ObjectKey, Any] = {}

    def __call__(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        key = key_of(obj)
        if _deleting(obj):
            self._seen.pop(key, None)
            return list(self._mapper(obj))
        value = self._digest(obj)
        if key in self._seen and self._seen[key] == value:
            return []
        self._seen[key] = value
        return list(self._mapper(obj))

    def objects(self, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], ...]:
        """The event's objects to map: none when an update changed nothing the
        digest sees; both (new first) otherwise; the one there is on an add or
        a delete."""
        if old is not None and new is not None:
            if not _deleting(new) and self._digest(old) == self._digest(new):
                return ()
            return (new, old)
        return tuple(o for o in (new, old) if o is not None)

    def keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """The wrapped mapper's keys of ``obj``, without the digest's filter."""
        return list(self._mapper(obj))


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def on_change(digest: Callable[[Mapping[str, Any]], Any], mapper: Mapper) -> OnChange:
    """``mapper`` behind the :class:`OnChange` filter of ``digest``."""
    return OnChange(digest, mapper)
