"""WorkQueue de-duplication, in-flight exclusion, delays, shutdown; Backoff."""

from __future__ import annotations

import asyncio

import pytest

from racksmith.runtime import Backoff, FakeClock, QueueShutDown, WorkQueue


async def test_a_key_added_many_times_is_queued_once(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    for _ in range(10):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"
    assert len(queue) == 0


async def test_a_key_re_added_while_processing_waits_for_done(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed to a second worker while in flight
    second = asyncio.create_task(queue.get())
    await clock.settle()
    assert not second.done()
    queue.done("a")
    await clock.settle()
    assert second.result() == "a"
    assert len(queue) == 0


async def test_done_without_re_add_does_not_requeue(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add("a")
    await queue.get()
    queue.done("a")
    assert len(queue) == 0


async def test_getters_are_woken_one_per_key(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await clock.settle()
    queue.add("a")
    queue.add("b")
    await clock.settle()
    results = sorted(g.result() for g in getters if g.done())
    assert results == ["a", "b"]
    queue.shutdown()
    await clock.settle()
    with pytest.raises(QueueShutDown):
        await next(g for g in getters if g.exception() is not None)


async def test_add_after_uses_the_clock_and_the_earliest_deadline_wins(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add_after("a", 10)
    queue.add_after("a", 30)  # later: ignored
    queue.add_after("a", 5)  # earlier: replaces
    assert len(queue) == 0 and queue.delayed == 1
    await clock.advance(4.9)
    assert len(queue) == 0
    await clock.advance(0.1)
    assert len(queue) == 1 and queue.delayed == 0
    await clock.advance(100)
    assert len(queue) == 1  # the replaced timers did not fire


async def test_add_after_zero_adds_now(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add_after("a", 0)
    assert len(queue) == 1


async def test_shutdown_stops_handing_out_work_and_cancels_timers(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add("a")
    queue.add_after("b", 1)
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await queue.get()
    queue.add("c")
    await clock.advance(5)
    assert clock.sleepers == 0
    assert queue.is_shut_down


async def test_add_rate_limited_grows_and_forget_resets(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock, Backoff(base=1, cap=100, random=lambda: 0.5))
    assert queue.add_rate_limited("a") == 1
    assert queue.add_rate_limited("a") == 2
    assert queue.num_requeues("a") == 2
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == 1


def test_backoff_doubles_from_base_to_cap_without_jitter() -> None:
    backoff: Backoff[str] = Backoff(base=0.5, cap=300, random=lambda: 0.5)
    delays = [backoff.next_delay("k") for _ in range(14)]
    assert delays[:6] == [0.5, 1, 2, 4, 8, 16]
    assert delays[-1] == 300
    assert max(delays) == 300
    assert delays == sorted(delays)


def test_backoff_defaults() -> None:
    backoff: Backoff[str] = Backoff()
    assert (backoff.base, backoff.cap) == (0.5, 300.0)


@pytest.mark.parametrize("r", [0.0, 0.25, 0.5, 0.999999])
def test_backoff_jitter_stays_within_bounds_and_under_the_cap(r: float) -> None:
    backoff: Backoff[str] = Backoff(base=0.5, cap=300, jitter=0.2, random=lambda: r)
    for n in range(200):
        nominal = min(300.0, 0.5 * 2.0**n)
        delay = backoff.next_delay("k")
        assert nominal * 0.8 - 1e-9 <= delay <= min(300.0, nominal * 1.2) + 1e-9
        assert delay <= 300.0


def test_backoff_is_per_key_and_forget_resets_one_key() -> None:
    backoff: Backoff[str] = Backoff(base=1, cap=10, random=lambda: 0.5)
    backoff.next_delay("a")
    backoff.next_delay("a")
    assert backoff.next_delay("b") == 1
    backoff.forget("a")
    assert backoff.next_delay("a") == 1
    assert backoff.failures("b") == 1


def test_backoff_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Backoff(base=0)
    with pytest.raises(ValueError):
        Backoff(base=10, cap=1)
    with pytest.raises(ValueError):
        Backoff(jitter=1.5)
