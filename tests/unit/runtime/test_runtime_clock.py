"""FakeClock and wait_event: time moves only when the test says so."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from racksmith.clock import FakeClock, wait_event


async def test_sleepers_wake_in_deadline_order_at_their_deadline(clock: FakeClock) -> None:
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    start = clock.now()
    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in [("b", 2), ("a", 1), ("c", 5)]]
    await clock.advance(1.5)
    assert woke == [("a", start + 1)]
    await clock.advance(10)
    assert woke == [("a", start + 1), ("b", start + 2), ("c", start + 5)]
    assert clock.now() == start + 11.5
    await asyncio.gather(*tasks)


async def test_a_sleeper_that_sleeps_again_within_the_window_is_woken_again(
    clock: FakeClock,
) -> None:
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            await clock.sleep(1)
            ticks.append(clock.now())

    start = clock.now()
    task = asyncio.create_task(ticker())
    await clock.advance(3.5)
    assert ticks == [start + 1, start + 2, start + 3]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0


async def test_wall_time_follows_the_monotonic_clock() -> None:
    clock = FakeClock(wall_start=datetime(2030, 1, 1, tzinfo=UTC))
    await clock.advance(90)
    assert clock.wall() == datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=90)


async def test_wait_event_times_out_on_the_clock(clock: FakeClock) -> None:
    event = asyncio.Event()
    waiter = asyncio.create_task(wait_event(clock, event, 5))
    await clock.advance(4.9)
    assert not waiter.done()
    await clock.advance(0.1)
    assert waiter.done() and waiter.result() is False


async def test_wait_event_returns_when_set(clock: FakeClock) -> None:
    event = asyncio.Event()
    waiter = asyncio.create_task(wait_event(clock, event, 5))
    await clock.settle()
    event.set()
    await clock.settle()
    assert waiter.result() is True
    assert clock.sleepers == 0
