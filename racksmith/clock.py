"""Time, injected: the ``Clock`` protocol, the real ``SystemClock`` and the
``FakeClock`` that tests drive by hand.

Every time-based decision of the runtime (delayed requeues, backoff, lease
expiry, renew periods, shutdown timeouts) goes through a ``Clock`` so tests
never sleep on the wall clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of time and of sleeping."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def wall(self) -> datetime:
        """Timezone-aware UTC wall time (for timestamps written to objects)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` (<= 0 just yields)."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic``, ``datetime.now(UTC)``, ``asyncio.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when the test calls :meth:`advance`.

    ``advance`` walks through pending sleepers in deadline order: it sets the
    time to each deadline, wakes the sleepers due then and lets the event loop
    run until it is idle (a bounded number of turns), so a woken task that goes
    back to sleep within the advanced window is woken again in the same call.
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: datetime = datetime(2025, 1, 1, tzinfo=UTC),
        settle_rounds: int = 50,
    ) -> None:
        self._now = start
        self._start = start
        self._wall_start = wall_start
        self._settle_rounds = settle_rounds
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many tasks are sleeping on this clock (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """The earliest pending wake-up time, if any."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def settle(self) -> None:
        """Let every runnable task run (a bounded number of loop turns)."""
        for _ in range(self._settle_rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking sleepers in deadline order."""
        target = self._now + max(0.0, seconds)
        await self.settle()
        while True:
            self._drop_cancelled()
            if not self._sleepers or self._sleepers[0][0] > target:
                break
            deadline = self._sleepers[0][0]
            self._now = max(self._now, deadline)
            while self._sleepers and self._sleepers[0][0] <= deadline:
                _, _, fut = heapq.heappop(self._sleepers)
                if not fut.done():
                    fut.set_result(None)
            await self.settle()
        self._now = target
        await self.settle()

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)


async def wait_event(clock: Clock, event: asyncio.Event, seconds: float | None) -> bool:
    """Wait for ``event`` at most ``seconds`` of ``clock`` time.

    Returns True if the event was set, False on timeout. ``None`` waits forever.
    """
    if event.is_set():
        return True
    if seconds is None:
        await event.wait()
        return True
    waiter = asyncio.ensure_future(event.wait())
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        timer.cancel()
        await asyncio.gather(waiter, timer, return_exceptions=True)
    return event.is_set()
