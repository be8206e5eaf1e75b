"""The work queue between sources and workers, and per-key retry backoff.

``WorkQueue`` follows client-go's rate-limited workqueue semantics:

- ``add(key)`` de-duplicates: a key waiting in the queue is queued once
  however often it is added;
- a key being processed is never handed to a second worker; if it is added
  meanwhile it is queued again when the first worker calls ``done(key)``;
- ``add_after(key, delay)`` adds it after ``delay`` seconds of the injected
  clock (an earlier pending deadline for the same key wins);
- ``add_rate_limited(key)`` adds it after the key's next backoff delay and
  ``forget(key)`` resets that backoff;
- ``shutdown()`` stops handing out work: ``get()`` raises ``QueueShutDown``.

Single event loop, no threads: methods other than ``get`` never block.
"""

from __future__ import annotations

import asyncio
import random as _random
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from racksmith.clock import Clock

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by ``WorkQueue.get`` once the queue is shut down."""


class Backoff(Generic[K]):
    """Per-key exponential backoff with jitter and a cap.

    The n-th failure (n from 0) waits ``min(cap, base * factor**n)`` scaled by
    a uniform factor in ``[1 - jitter, 1 + jitter]``, and never more than
    ``cap``. ``random`` returns floats in ``[0, 1)`` and is injectable for tests.
    """

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 300.0,
        factor: float = 2.0,
        jitter: float = 0.2,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if base <= 0 or cap < base or factor < 1 or not 0 <= jitter < 1:
            raise ValueError("invalid backoff parameters")
        self.base = base
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._random = random
        self._failures: dict[K, int] = {}

    def next_delay(self, key: K) -> float:
        """Record one more failure of ``key`` and return how long to wait."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        # Bound the exponent: past the cap it no longer matters, and huge
        # exponents would overflow the float.
        raw = self.cap if n > 64 else min(self.cap, self.base * self.factor**n)
        scale = 1.0 + self.jitter * (2.0 * self._random() - 1.0)
        return min(self.cap, raw * scale)

    def failures(self, key: K) -> int:
        """How many failures of ``key`` since the last ``forget``."""
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (after a success)."""
        self._failures.pop(key, None)


class WorkQueue(Generic[K]):
    """A de-duplicating, delay-capable work queue for one controller."""

    def __init__(self, clock: Clock, backoff: Backoff[K] | None = None) -> None:
        self._clock = clock
        self.backoff: Backoff[K] = backoff if backoff is not None else Backoff()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._delayed: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._shutting_down = False

    def __len__(self) -> int:
        """Keys ready to be handed out (not those in flight or delayed)."""
        return len(self._queue)

    @property
    def processing(self) -> int:
        """Keys handed out and not yet ``done``."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Keys waiting for an ``add_after`` deadline."""
        return len(self._delayed)

    @property
    def is_shut_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is already queued; ignored after shutdown."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # re-queued by done()
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` clock seconds (<= 0: now)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        deadline = self._clock.now() + delay
        pending = self._delayed.get(key)
        if pending is not None:
            if pending[0] <= deadline:
                return
            pending[1].cancel()
        task = asyncio.get_running_loop().create_task(self._add_later(key, delay))
        self._delayed[key] = (deadline, task)

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its next backoff delay; returns the delay."""
        delay = self.backoff.next_delay(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (it does not dequeue the key)."""
        self.backoff.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.backoff.failures(key)

    async def get(self) -> K:
        """Wait for a key and mark it in flight; raises ``QueueShutDown``."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                # Pass a wake-up we may have consumed on to another getter.
                if fut.done() and not fut.cancelled():
                    self._wake_one()
                raise
            finally:
                if fut in self._getters:
                    self._getters.remove(fut)
        if self._shutting_down:
            raise QueueShutDown
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` finished; if it was added meanwhile, queue it again."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._wake_one()

    def shutdown(self) -> None:
        """Stop handing out work; cancel pending delayed adds; wake getters."""
        self._shutting_down = True
        for _, task in self._delayed.values():
            task.cancel()
        self._delayed.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def _add_later(self, key: K, delay: float) -> None:
        await self._clock.sleep(delay)
        self._delayed.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
