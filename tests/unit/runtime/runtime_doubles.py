"""Doubles of the runtime's own seams (Source, Reconciler) for the runtime unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from racksmith.runtime import Done, FakeClock, ObjectKey, Result


class FakeSource:
    """Emits ``initial`` keys (then counts as synced), then whatever ``emit`` sends."""

    def __init__(self, initial: Iterable[ObjectKey] = ()) -> None:
        self.initial = list(initial)
        self._queue: asyncio.Queue[ObjectKey] = asyncio.Queue()
        self._synced = False
        self.closed = False

    @property
    def has_synced(self) -> bool:
        return self._synced

    def emit(self, key: ObjectKey) -> None:
        self._queue.put_nowait(key)

    async def keys(self) -> AsyncIterator[ObjectKey]:
        self.closed = False
        try:
            for key in self.initial:
                yield key
            self._synced = True
            while True:
                yield await self._queue.get()
        finally:
            self.closed = True


Step = Callable[[ObjectKey], Awaitable[Result]]


class ScriptedReconciler:
    """Runs ``steps`` in order (the last one repeats), recording every call,
    when it happened on the clock, and how many ran at once per key."""

    def __init__(self, clock: FakeClock, *steps: Step) -> None:
        self.clock = clock
        self.steps: list[Step] = list(steps) or [done]
        self.calls: list[tuple[ObjectKey, float]] = []
        self.finished: list[ObjectKey] = []
        self.in_flight: dict[ObjectKey, int] = {}
        self.max_in_flight = 0

    async def reconcile(self, key: ObjectKey) -> Result:
        index = min(len(self.calls), len(self.steps) - 1)
        self.calls.append((key, self.clock.now()))
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight[key])
        try:
            result = await self.steps[index](key)
            self.finished.append(key)
            return result
        finally:
            self.in_flight[key] -= 1

    def times(self) -> list[float]:
        return [at for _, at in self.calls]


async def done(_: ObjectKey) -> Result:
    return Done()


def returns(result: Result) -> Step:
    async def step(_: ObjectKey) -> Result:
        return result

    return step


def raises(exc: Exception) -> Step:
    async def step(_: ObjectKey) -> Result:
        raise exc

    return step


def blocks_on(gate: asyncio.Event, result: Result | None = None) -> Step:
    async def step(_: ObjectKey) -> Result:
        await gate.wait()
        return result if result is not None else Done()

    return step


KEY = ObjectKey("default", "host-0")
