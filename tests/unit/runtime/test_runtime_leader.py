"""LeaderElector over an in-memory LeaseStore, on the fake clock."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from racksmith.election import PartitionedLeaseStore, micro_time
from racksmith.runtime import FakeClock, InMemoryLeaseStore, LeaderElector, LeaseRecord


def elector(store: object, identity: str, clock: FakeClock) -> LeaderElector:
    return LeaderElector(
        store,  # type: ignore[arg-type]
        identity,
        clock=clock,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        random=lambda: 0.0,
    )


async def test_the_first_candidate_creates_the_lease(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    a = elector(store, "a", clock)
    assert await a.try_acquire_or_renew()
    assert a.is_leader
    record = store.record
    assert record is not None
    assert record.holder_identity == "a"
    assert record.lease_duration_seconds == 15
    assert record.lease_transitions == 0
    assert record.acquire_time == record.renew_time == clock.wall()


async def test_a_held_lease_is_not_taken_and_renewal_keeps_acquire_time(
    clock: FakeClock,
) -> None:
    store = InMemoryLeaseStore()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    await a.try_acquire_or_renew()
    acquired = clock.wall()
    assert not await b.try_acquire_or_renew()
    await clock.advance(5)
    assert await a.try_acquire_or_renew()
    assert store.record is not None
    assert store.record.acquire_time == acquired
    assert store.record.renew_time == clock.wall()
    assert not await b.try_acquire_or_renew()
    assert b.observed_holder == "a"


async def test_release_hands_over_at_once_and_counts_a_transition(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    await a.acquire()
    await a.release()
    assert not a.is_leader
    assert store.record is not None and store.record.holder_identity == ""
    assert await b.try_acquire_or_renew()
    assert store.record.holder_identity == "b"
    assert store.record.lease_transitions == 1


async def test_an_expired_lease_is_taken_after_the_duration_seen_locally(
    clock: FakeClock,
) -> None:
    store = InMemoryLeaseStore()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    await a.acquire()  # then a dies without releasing
    campaign = asyncio.create_task(b.acquire())
    await clock.advance(14)
    assert not campaign.done()
    await clock.advance(2)
    assert campaign.done() and b.is_leader
    assert store.record is not None
    assert store.record.holder_identity == "b"
    assert store.record.lease_transitions == 1


async def test_expiry_ignores_the_holders_wall_clock(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    # A renewTime far in the past (a skewed clock) does not make it expired.
    ancient = datetime(2000, 1, 1, tzinfo=UTC)
    await store.create(LeaseRecord("a", 15, ancient, ancient, 3))
    b = elector(store, "b", clock)
    assert not await b.try_acquire_or_renew()
    await clock.advance(15)
    assert await b.try_acquire_or_renew()
    assert store.record is not None and store.record.lease_transitions == 4


async def test_a_lost_race_is_a_conflict_not_a_win(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()

    class Racing(InMemoryLeaseStore):
        """Another writer sneaks in between our read and our write."""

        async def get(self) -> LeaseRecord | None:
            record = await store.get()
            if record is not None:
                await store.update(replace(record, renew_time=clock.wall()))
            return record

        async def update(self, record: LeaseRecord) -> LeaseRecord:
            return await store.update(record)

    await store.create(LeaseRecord("", 15))
    b = elector(Racing(), "b", clock)
    assert not await b.try_acquire_or_renew()
    assert not b.is_leader
    assert store.record is not None and store.record.holder_identity == ""


async def test_hold_returns_when_renewal_fails_past_the_deadline(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    view = PartitionedLeaseStore(store)
    a = elector(view, "a", clock)
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await clock.advance(30)
    assert not holding.done() and a.is_leader  # renewing every 2 s
    view.unavailable = True
    await clock.advance(9)
    assert not holding.done()
    await clock.advance(1)
    assert holding.done() and not a.is_leader


async def test_hold_returns_at_once_when_someone_else_holds_the_lease(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    a = elector(store, "a", clock)
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    assert store.record is not None
    await store.update(replace(store.record, holder_identity="usurper"))
    await clock.advance(2)
    assert holding.done() and not a.is_leader


async def test_release_when_not_leader_does_nothing(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    await elector(store, "b", clock).release()
    assert store.record is None


def test_elector_checks_its_periods() -> None:
    with pytest.raises(ValueError):
        LeaderElector(InMemoryLeaseStore(), "a", lease_duration=5, renew_deadline=10)


def test_micro_time_is_fixed_width_utc() -> None:
    assert micro_time(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05.000000Z"
