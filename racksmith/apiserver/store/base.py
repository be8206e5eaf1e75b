"""The storage interface of the API server.

Owns: the contract every storage backend (SQLite today, etcd later) fulfils.
The API server is the only caller. Objects are plain JSON-compatible dicts;
the store owns ``metadata.resourceVersion`` (one global, strictly increasing
integer sequence, rendered as a decimal string) and nothing else in them.

Durability contract: when a write coroutine returns, the write is on disk;
a crash (SIGKILL) at any moment loses no acknowledged write and leaves no
partial one. Every write also appends to an event log so that a watch can
resume from any resourceVersion newer than the compaction point; older ones
raise :class:`Expired` (the HTTP layer answers 410 Gone).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import orjson

from racksmith.jsoncopy import json_copy

Obj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Key:
    """Where one object lives: ``resource`` is ``"<group or core>/<plural>"``;
    ``namespace`` is ``""`` for cluster-scoped objects."""

    resource: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Scope:
    """A set of keys for list and watch: one resource, optionally one namespace
    (``None`` = all namespaces)."""

    resource: str
    namespace: str | None = None

    def contains(self, key: Key) -> bool:
        return key.resource == self.resource and (
            self.namespace is None or key.namespace == self.namespace)


class EventType(StrEnum):
    """Watch event types, as the Kubernetes watch protocol names them."""

    ADDED = "ADDED"
    """The object was created."""
    MODIFIED = "MODIFIED"
    """The object was updated (including metadata such as finalizers)."""
    DELETED = "DELETED"
    """The object is gone; the payload is its last state with the delete's rv."""


class WatchEvent:
    """One event of a watch. The object is decoded from the stored bytes
    (``data``) on first use only: a watcher that finds the event already
    rendered by another (the HTTP layer's render cache) never decodes it.
    A live event is one object shared by every watcher it reaches, so
    ``obj`` is read-only; :meth:`decoded` gives a copy to change."""

    __slots__ = ("_obj", "data", "key", "rv", "type")

    def __init__(self, type: EventType, key: Key, rv: int, obj: Obj | None = None, *,
                 data: bytes | None = None) -> None:
        if obj is None and data is None:
            raise ValueError("a WatchEvent needs the object or its bytes")
        self.type = type
        self.key = key
        self.rv = rv
        self.data = data
        self._obj = obj

    @property
    def obj(self) -> Obj:
        if self._obj is None:
            assert self.data is not None
            self._obj = orjson.loads(self.data)
        return self._obj

    def decoded(self) -> Obj:
        """A decoded copy of the object that is the caller's to change
        (``obj`` may be shared by every watcher of the event)."""
        if self.data is not None:
            result: Obj = orjson.loads(self.data)
            return result
        return json_copy(self.obj)

    def __repr__(self) -> str:
        return f"WatchEvent({self.type.value}, {self.key}, rv={self.rv})"


WatchBatch = list[WatchEvent]
"""A burst of watch events in rv order (see :meth:`Store.watch_batches`)."""

OnLive = Callable[[Callable[[], int]], None]
"""What a watch calls once its replay is over (see :meth:`Store.watch`)."""


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    rv: int
    """The store's resourceVersion at the time of the list."""
    next_name: Key | None = None
    """Set when ``limit`` cut the list short: the last key returned."""
    remaining: int = 0


class NotFoundError(Exception):
    """No object at that key."""


class AlreadyExistsError(Exception):
    """An object already exists at that key."""


class ConflictError(Exception):
    """The precondition resourceVersion does not match the stored one."""


class StoreUnavailableError(Exception):
    """The store cannot answer now (etcd without quorum, unreachable, closed):
    the HTTP layer answers 503 naming the store. The write may or may not have
    been applied, as with any timeout."""


class TooLargeError(ValueError):
    """The store refuses an object this large (etcd's ``--max-request-bytes``):
    the HTTP layer answers 413."""


class Expired(Exception):
    """The requested resourceVersion is older than the event log keeps."""


class Store(Protocol):
    """A transactional object store with a global resourceVersion sequence.

    All methods may be called concurrently from one event loop; writes are
    serialised by the store. Returned dicts are fresh copies the caller owns.
    """

    async def open(self) -> None:
        """Open (creating if needed) and recover the store."""

    async def close(self) -> None:
        """Flush and close; pending watches end."""

    def current_rv(self) -> int:
        """The resourceVersion of the newest committed write (0 when empty)."""

    async def get(self, key: Key) -> Obj:
        """Return the object. Raises NotFoundError."""

    async def list(self, scope: Scope, *, after: Key | None = None,
                   limit: int | None = None, rv: int | None = None,
                   contains: tuple[bytes, ...] = ()) -> ListResult:
        """Objects in ``scope`` ordered by (namespace, name), starting after
        ``after``, at most ``limit`` of them. ``rv`` (a continue token's):
        read at that resourceVersion where the backend keeps history (etcd;
        raises Expired once compacted); SQLite keeps none and reads the
        latest state, as an inconsistent continue would.

        ``contains``: skip, without decoding, every object whose stored JSON
        lacks one of these byte strings (a selector's prefilter,
        :meth:`~racksmith.apiserver.selectors.LabelSelector.needles`). Then
        ``limit`` may count the objects looked at rather than returned (a
        page can hold fewer items while ``next_name`` says more follow) and
        ``remaining`` is not counted (0)."""

    async def create(self, key: Key, obj: Obj) -> Obj:
        """Store a new object; sets ``metadata.resourceVersion``.
        Raises AlreadyExistsError."""

    async def update(self, key: Key, obj: Obj, *, expected_rv: int | None = None) -> Obj:
        """Replace an existing object; sets ``metadata.resourceVersion``.
        ``expected_rv`` (when given) must equal the stored one. Raises
        NotFoundError, ConflictError."""

    async def delete(self, key: Key, *, expected_rv: int | None = None) -> Obj:
        """Remove the object; returns its last state carrying the delete's
        resourceVersion. Raises NotFoundError, ConflictError."""

    def watch(self, scope: Scope, since_rv: int, *,
              on_live: OnLive | None = None) -> AsyncIterator[WatchEvent]:
        """Events in ``scope`` with rv > ``since_rv``, first replayed from the
        log, then live, in rv order, until the consumer stops iterating or the
        store closes. Raises Expired (when iteration starts) if ``since_rv`` is
        older than the log keeps. ``on_live(probe)``: called once the replay is
        over; ``probe()`` then tells the rv up to which every event in scope
        has been yielded — what a bookmark may name once those are sent (a
        quiet watch follows the store's rv)."""

    def watch_batches(self, scope: Scope, since_rv: int, *,
                      on_live: OnLive | None = None) -> AsyncIterator[WatchBatch]:
        """:meth:`watch` in bursts: the same events in the same order, as
        non-empty lists (a page of the replay, or every live event buffered
        since the last step). A watch stream handles a burst in one step:
        one wake-up and one write per burst rather than per event."""

    def oldest_rv(self) -> int:
        """The oldest resourceVersion a watch may resume from."""

    async def state_before(self, key: Key, rv: int) -> tuple[bool, Obj | None]:
        """``(known, obj)``: the object's state just before ``rv`` according to
        the event log (``None`` = absent). ``known`` is False when the log no
        longer reaches back far enough to tell."""


class BurstWatches(abc.ABC):
    """:meth:`Store.watch` and :meth:`Store.watch_batches` of a store, both
    from its one :meth:`_watch`."""

    def watch(self, scope: Scope, since_rv: int, *,
              on_live: OnLive | None = None) -> AsyncIterator[WatchEvent]:
        return _flatten(self._watch(scope, since_rv, on_live, batched=False))

    def watch_batches(self, scope: Scope, since_rv: int, *,
                      on_live: OnLive | None = None) -> AsyncIterator[WatchBatch]:
        return self._watch(scope, since_rv, on_live, batched=True)

    @abc.abstractmethod
    def _watch(self, scope: Scope, since_rv: int, on_live: OnLive | None, *,
               batched: bool) -> AsyncGenerator[WatchBatch, None]:
        """The watch, replay then live. Live events are taken from the
        subscription a burst at a time when ``batched``, else one at a time
        (so that the probe given to ``on_live`` counts exactly the events
        yielded one by one)."""


async def _flatten(batches: AsyncGenerator[WatchBatch, None]) -> AsyncIterator[WatchEvent]:
    """The events of ``batches`` one by one; closing this closes ``batches``
    at once (its subscription is not left to the garbage collector)."""
    async with contextlib.aclosing(batches):
        async for batch in batches:
            for event in batch:
                yield event
