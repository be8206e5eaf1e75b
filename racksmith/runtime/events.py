"""Core v1 Events, recorded as client-go's ``EventRecorder`` records them.

Owns ``EventRecorder``: ``await recorder.record(obj, type, reason, message)``
writes an Event about ``obj`` (a raw object: ``apiVersion``, ``kind`` and
``metadata`` name/namespace/uid/resourceVersion make the involvedObject),
with ``source.component`` and ``reportingComponent`` the recorder's
component (``racksmith-<controller>``) and ``reportingInstance``
``<component>-<hostname>``. What client-go's ``EventCorrelator`` does for
repeats, it does too: the same (source, involvedObject, type, reason,
message) seen again within ``window`` seconds (10 min) bumps the existing
Event's ``count`` and ``lastTimestamp`` with a PATCH instead of creating
another; the keys are kept in an LRU of ``cache_size`` (4096) entries; an
Event that is gone (404 on the patch) is created anew (count 1). Names are
client-go's ``<involvedName>.<hex nanoseconds>`` (made unique within the
process, so two events in the same instant of a fake clock never clash).

Events go to the involved object's namespace; a cluster-scoped object's to
``default`` (its involvedObject has no namespace). Types are ``Normal`` or
``Warning`` (any other is dropped, logged). Messages pass through the
process's log redaction (``racksmith.redact.redact_text``: registered
secret values and secret-looking patterns) and are cut to 1024 bytes
(client-go's note limit). Recording never fails the caller: an error
writing the Event is logged and swallowed (cancellation still propagates).

One recorder serves a whole process: the composition root makes one and
each controller takes its own component from it (:meth:`for_component`,
sharing the API seam, the clock and the repeat cache). The API seam is
``EventSink`` (``KubeEventSink``: the runtime Client over the ``ApiClient``);
tests pass a fake one.
"""

from __future__ import annotations

import asyncio
import socket
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.redact import redact_text
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.resource import Resource

EVENT_TYPES = ("Normal", "Warning")
DEFAULT_NAMESPACE = "default"
"""Where Events about cluster-scoped objects go (as in client-go)."""
MAX_MESSAGE_BYTES = 1024
"""The longest message, in UTF-8 bytes (client-go's note limit)."""
CACHE_SIZE = 4096
"""Repeat keys remembered (client-go's LRU size)."""
WINDOW = 600.0
"""Seconds within which a repeat bumps the count of the Event it repeats."""
_TRUNCATED = "..."
_NAME_ATTEMPTS = 3
_LOCK_STRIPES = 64
_MAX_NAME = 253

EVENTS = Resource("", "v1", "events")


class EventLike(Protocol):
    """What ``record_all`` takes: an ``EventSpec`` or anything shaped like one."""

    @property
    def type(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def message(self) -> str: ...


class EventGone(Exception):
    """The Event to update no longer exists (404)."""


class NameTaken(Exception):
    """An Event of that name already exists (409 on create)."""


class EventSink(Protocol):
    """Where Events are written (client-go's ``EventSink``)."""

    async def create(self, namespace: str, body: dict[str, Any]) -> None:
        """Create the Event ``body``; raises ``NameTaken`` on a 409."""
        ...

    async def patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        """Merge-patch the Event ``name``; raises ``EventGone`` on a 404."""
        ...


class KubeEventSink:
    """``EventSink`` over the runtime's Client (core v1 Events)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    @property
    def client(self) -> Client:
        if self.api_client is None:
            raise RuntimeError("no ApiClient to write Events through")
        return as_client(self.api_client)

    async def create(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await self.client.create(EVENTS, body, namespace=namespace)
        except AlreadyExists:
            raise NameTaken(body["metadata"]["name"]) from None

    async def patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        try:
            await self.client.patch(EVENTS, namespace, name, body)
        except NotFound:
            raise EventGone(name) from None


def object_ref(api_version: str, kind: str, name: str, *, namespace: str | None = None,
               uid: str | None = None) -> dict[str, Any]:
    """A minimal object to record an Event about when only its name is at hand.

    For a Node, pass ``uid=name``: the kubelet does, and ``kubectl describe
    node`` looks for its Events by that uid."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def involved_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The involvedObject of an Event about ``obj``; raises ValueError if
    ``obj`` lacks its apiVersion, kind or name."""
    meta = obj.get("metadata") or {}
    api_version, kind, name = obj.get("apiVersion"), obj.get("kind"), meta.get("name")
    if not api_version or not kind or not name:
        raise ValueError(f"not an object to record an Event about: apiVersion={api_version!r} "
                         f"kind={kind!r} name={name!r}")
    ref: dict[str, Any] = {"apiVersion": str(api_version), "kind": str(kind),
                           "name": str(name)}
    for field, out in (("namespace", "namespace"), ("uid", "uid"),
                       ("resourceVersion", "resourceVersion")):
        if meta.get(field):
            ref[out] = str(meta[field])
    return ref


def event_message(message: str) -> str:
    """``message`` as an Event carries it: redacted, then cut to
    ``MAX_MESSAGE_BYTES`` UTF-8 bytes (never inside a character)."""
    text = redact_text(str(message))
    raw = text.encode("utf-8")
    if len(raw) <= MAX_MESSAGE_BYTES:
        return text
    keep = MAX_MESSAGE_BYTES - len(_TRUNCATED)
    return raw[:keep].decode("utf-8", "ignore") + _TRUNCATED


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _nanos(at: datetime) -> int:
    delta = at.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


_Key = tuple[str, ...]


@dataclass
class _Seen:
    """The Event a repeat key was last written to."""

    namespace: str
    name: str
    count: int
    seen: float
    """Monotonic clock seconds of the last write."""


class _Shared:
    """What every recorder of a process shares: the sink, the clock, the cache."""

    def __init__(self, sink: EventSink, clock: Clock, logger: Any, cache_size: int,
                 window: float) -> None:
        self.sink = sink
        self.clock = clock
        self.log = logger
        self.cache_size = max(1, cache_size)
        self.window = window
        self.cache: OrderedDict[_Key, _Seen] = OrderedDict()
        self.locks = [asyncio.Lock() for _ in range(_LOCK_STRIPES)]
        self.last_nanos = 0

    def name(self, involved: str, at: datetime) -> str:
        nanos = max(_nanos(at), self.last_nanos + 1)
        self.last_nanos = nanos
        suffix = f".{nanos:x}"
        return involved[:_MAX_NAME - len(suffix)] + suffix

    def remember(self, key: _Key, seen: _Seen) -> None:
        self.cache[key] = seen
        self.cache.move_to_end(key)
        while len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)


class EventRecorder:
    """Records Events for one component (see the module docstring).

    ``api_client``: the kubernetes_asyncio ``ApiClient`` to write through
    (unused when ``sink`` is given). ``component``: ``source.component`` and
    ``reportingComponent``; ``instance``: ``reportingInstance`` (None:
    ``<component>-<hostname>``).
    """

    def __init__(self, api_client: Any, component: str, *, sink: EventSink | None = None,
                 clock: Clock | None = None, instance: str | None = None,
                 logger: Any = None, cache_size: int = CACHE_SIZE,
                 window: float = WINDOW) -> None:
        self._shared = _Shared(
            sink if sink is not None else KubeEventSink(api_client),
            clock if clock is not None else SystemClock(),
            logger if logger is not None else structlog.get_logger("racksmith.runtime.events"),
            cache_size, window)
        self.component = component
        self.instance = instance or f"{component}-{socket.gethostname()}"
        self._sink: EventSink = self._shared.sink

    def for_component(self, component: str, *, instance: str | None = None,
                      client: Any = None) -> EventRecorder:
        """A recorder for ``component`` sharing this one's clock and repeat
        cache, and its sink unless ``client`` is given: then the component's
        Events are written through that client (its own identity)."""
        other = EventRecorder.__new__(EventRecorder)
        other._shared = self._shared
        other.component = component
        other.instance = instance or f"{component}-{socket.gethostname()}"
        other._sink = KubeEventSink(client) if client is not None else self._sink
        return other

    @property
    def clock(self) -> Clock:
        return self._shared.clock

    async def record_all(self, obj: Mapping[str, Any], events: Iterable[EventLike]) -> None:
        """``record`` each of ``events``, in order."""
        for event in events:
            await self.record(obj, event.type, event.reason, event.message)

    async def record(self, obj: Mapping[str, Any], type: str, reason: str,
                     message: str) -> None:
        """An Event about ``obj``, or the repeat of one (see the module docstring).

        ``type``: Normal or Warning. Never raises but on cancellation."""
        shared = self._shared
        try:
            if type not in EVENT_TYPES:
                raise ValueError(f"event type {type!r} is neither Normal nor Warning")
            ref = involved_object(obj)
            text = event_message(message)
            key: _Key = (self.component, self.instance, ref["apiVersion"], ref["kind"],
                         ref.get("namespace", ""), ref["name"], ref.get("uid", ""),
                         type, reason, text)
            async with shared.locks[hash(key) % _LOCK_STRIPES]:
                await self._write(key, ref, type, reason, text)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an Event is best effort: never fail the caller
            plain = obj if isinstance(obj, Mapping) else {}
            shared.log.warning("event not recorded", component=self.component,
                               kind=plain.get("kind"),
                               name=(plain.get("metadata") or {}).get("name"),
                               reason=reason, error=repr(exc))

    async def _write(self, key: _Key, ref: dict[str, Any], type: str, reason: str,
                     text: str) -> None:
        shared = self._shared
        now, wall = shared.clock.now(), shared.clock.wall()
        stamp = _stamp(wall)
        seen = shared.cache.get(key)
        if seen is not None and now - seen.seen <= shared.window:
            try:
                await self._sink.patch(seen.namespace, seen.name,
                                        {"count": seen.count + 1, "lastTimestamp": stamp})
            except EventGone:
                shared.cache.pop(key, None)
            else:
                seen.count += 1
                seen.seen = now
                shared.cache.move_to_end(key)
                return
        namespace = ref.get("namespace") or DEFAULT_NAMESPACE
        for attempt in range(_NAME_ATTEMPTS):
            name = shared.name(ref["name"], wall)
            body = self._body(name, namespace, ref, type, reason, text, stamp)
            try:
                await self._sink.create(namespace, body)
            except NameTaken:
                if attempt == _NAME_ATTEMPTS - 1:
                    raise
                continue
            shared.remember(key, _Seen(namespace, name, 1, now))
            return

    def _body(self, name: str, namespace: str, ref: dict[str, Any], type: str, reason: str,
              text: str, stamp: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": text,
            "type": type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }


__all__ = [
    "CACHE_SIZE",
    "DEFAULT_NAMESPACE",
    "MAX_MESSAGE_BYTES",
    "WINDOW",
    "EventGone",
    "EventLike",
    "EventRecorder",
    "EventSink",
    "KubeEventSink",
    "NameTaken",
    "event_message",
    "involved_object",
    "object_ref",
]


def component_recorder(recorder: EventRecorder | None, client: Any, component: str, *,
                       clock: Clock | None = None) -> EventRecorder:
    """The recorder a controller of ``component`` uses: the process's
    ``recorder`` (sharing its repeat cache) or, without one, a recorder of its
    own; either way its Events are written through ``client`` (its identity)."""
    base = recorder if recorder is not None else EventRecorder(client, component, clock=clock)
    return base.for_component(component, client=client)
