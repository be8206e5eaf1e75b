"""In-process fan-out of committed store events to watchers.

Owns: the live half of a watch. The store publishes each committed batch of
events (in resourceVersion order, on the event loop thread) to the hub; the
hub appends every event to the bounded buffer of each subscription whose
:class:`~racksmith.apiserver.store.base.Scope` contains its key.

Slow watchers never block writers or other watchers: when a subscription's
buffer is full it is *overflowed* — the hub drops its buffer, forgets the
subscription, and the next :meth:`Subscription.take` raises
:class:`~racksmith.apiserver.store.base.Expired`. The HTTP layer then ends the
watch so that the client re-lists (exactly what it does after a 410 Gone).

Events carry the object as serialised JSON bytes. Each published event
becomes one :class:`~racksmith.apiserver.store.base.WatchEvent` shared by
every subscription (not one per watcher): it decodes on first use, at most
once, and its ``obj`` is read-only to watchers (whoever needs to change the
object takes :meth:`~racksmith.apiserver.store.base.WatchEvent.decoded`).
Nobody pays for decoding events no one consumes.

:func:`replay_then_follow` is a store's whole watch from a resourceVersion:
subscribe first, replay what the store kept up to the rv published at that
moment (each store its own way: SQLite's event log, etcd's per-resource
ring), then follow the subscription from there, so no event falls between
the two halves and none is given twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import NamedTuple

from racksmith.apiserver.store.base import (
    EventType,
    Expired,
    Key,
    OnLive,
    Scope,
    WatchBatch,
    WatchEvent,
)

__all__ = ["RawEvent", "Replay", "Subscription", "WatchHub", "replay_then_follow"]

Replay = Callable[[int, int], AsyncGenerator[WatchBatch, None]]
"""``replay(after, upto)``: the kept events of the watch's scope with
after < rv <= upto, in rv order, a batch at a time (it may raise Expired)."""


class RawEvent(NamedTuple):
    """One committed event, with the object still serialised."""

    rv: int
    type: EventType
    key: Key
    data: bytes


class Subscription:
    """One watcher's bounded buffer of live events."""

    __slots__ = ("_buf", "_closed", "_hub", "_maxsize", "_overflowed", "_wake", "scope")

    def __init__(self, hub: WatchHub, scope: Scope, maxsize: int) -> None:
        self.scope = scope
        self._hub = hub
        self._maxsize = maxsize
        self._buf: deque[WatchEvent] = deque()
        self._wake = asyncio.Event()
        self._overflowed = False
        self._closed = False

    def _push(self, ev: WatchEvent) -> bool:
        """Buffer ``ev``; False when this pushes the subscription over its bound."""
        if len(self._buf) >= self._maxsize:
            self._overflowed = True
            self._buf.clear()
            self._wake.set()
            return False
        self._buf.append(ev)
        self._wake.set()
        return True

    def _close(self) -> None:
        self._closed = True
        self._wake.set()

    @property
    def overflowed(self) -> bool:
        return self._overflowed

    def caught_up(self, published: int) -> int:
        """With ``published`` the rv of the newest event published to the hub:
        the rv up to which every event for this subscription has been taken
        by :meth:`take` (just below the first one still buffered)."""
        return self._buf[0].rv - 1 if self._buf else published

    async def take(self, *, one: bool = False) -> list[WatchEvent] | None:
        """Every buffered live event at once (at least one), or only the oldest
        when ``one``; None once the hub is closed and the buffer is drained.
        Raises Expired if the buffer overflowed. One wake-up per burst, not
        one per event."""
        while True:
            if self._overflowed:
                raise Expired("watch fell too far behind; re-list and watch again")
            if self._buf:
                if one:
                    return [self._buf.popleft()]
                out = list(self._buf)
                self._buf.clear()
                return out
            if self._closed:
                return None
            self._wake.clear()
            await self._wake.wait()

    async def bursts(self, after: int, *, batched: bool
                     ) -> AsyncGenerator[list[WatchEvent], None]:
        """The live events newer than resourceVersion ``after`` (what a replay
        already gave is dropped), a burst at a time when ``batched``, else
        one event at a time; ends when the hub closes."""
        last = after
        while True:
            evs = await self.take(one=not batched)
            if evs is None:
                return
            batch = evs if evs[0].rv > last else [ev for ev in evs if ev.rv > last]
            if batch:
                last = batch[-1].rv
                yield batch

    def cancel(self) -> None:
        """Stop receiving events (idempotent)."""
        self._hub._unsubscribe(self)
        self._closed = True
        self._buf.clear()


class WatchHub:
    """Subscriptions indexed by resource; all methods run on the event loop."""

    def __init__(self, queue_size: int) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be >= 1")
        self._queue_size = queue_size
        self._by_resource: dict[str, set[Subscription]] = {}
        self._closed = False

    def subscribe(self, scope: Scope) -> Subscription:
        sub = Subscription(self, scope, self._queue_size)
        if self._closed:
            sub._close()
        else:
            self._by_resource.setdefault(scope.resource, set()).add(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        subs = self._by_resource.get(sub.scope.resource)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_resource[sub.scope.resource]

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._by_resource.values())

    def publish(self, events: Iterable[RawEvent]) -> None:
        """Fan ``events`` (already committed, ascending rv) out to subscribers."""
        by_resource = self._by_resource
        if not by_resource:
            return
        dropped: list[Subscription] = []
        for raw in events:
            subs = by_resource.get(raw.key.resource)
            if not subs:
                continue
            ev = WatchEvent(raw.type, raw.key, raw.rv, data=raw.data)
            ns = raw.key.namespace
            for sub in subs:
                want = sub.scope.namespace
                if (want is None or want == ns) and not sub._overflowed \
                        and not sub._push(ev):
                    dropped.append(sub)
        for sub in dropped:
            self._unsubscribe(sub)

    def expire_all(self) -> None:
        """Every subscription expires (its next ``take`` raises Expired): the
        events they would need are lost."""
        for subs in self._by_resource.values():
            for sub in subs:
                sub._overflowed = True
                sub._buf.clear()
                sub._wake.set()
        self._by_resource.clear()

    def close(self) -> None:
        """End every subscription (buffered events are still delivered)."""
        self._closed = True
        for subs in self._by_resource.values():
            for sub in subs:
                sub._close()
        self._by_resource.clear()


async def replay_then_follow(hub: WatchHub, scope: Scope, since_rv: int,
                             published: Callable[[], int], replay: Replay,
                             on_live: OnLive | None, *, batched: bool
                             ) -> AsyncGenerator[WatchBatch, None]:
    """A watch of ``scope`` from ``since_rv``: ``replay`` up to the rv
    ``published()`` gave when the subscription was made, then the live
    events after it. ``on_live`` learns, once live, how to ask up to which rv
    this watcher has been given everything."""
    sub = hub.subscribe(scope)
    try:
        upto = published()  # everything newer reaches ``sub`` through the hub
        async with contextlib.aclosing(replay(since_rv, upto)) as kept:
            async for batch in kept:
                yield batch
        if on_live is not None:
            on_live(lambda: sub.caught_up(published()))
        async with contextlib.aclosing(sub.bursts(max(since_rv, upto),
                                                  batched=batched)) as live:
            async for batch in live:
                yield batch
    finally:
        sub.cancel()
