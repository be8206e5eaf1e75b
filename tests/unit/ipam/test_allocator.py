"""The in-memory allocator and next_free: determinism, exhaustion, and
property tests over random allocate/release sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.ipam.allocator import (
    Allocated,
    Allocator,
    Exhausted,
    free_addresses,
    next_free,
)
from racksmith.ipam.ranges import parse_pool

POOL = parse_pool("10.0.0.0/28", "10.0.0.1", [], ["10.0.0.8"])  # 12 addresses


def test_next_free_is_the_lowest_free_address() -> None:
    assert next_free(POOL, []) == Allocated("10.0.0.2")
    assert next_free(POOL, ["10.0.0.2", "10.0.0.3", "192.168.0.1", "junk"]) == \
        Allocated("10.0.0.4")
    assert next_free(POOL, [f"10.0.0.{i}" for i in range(16)]) == Exhausted(12)
    assert "all 12 addresses" in Exhausted(12).message
    assert list(free_addresses(POOL, ["10.0.0.10"], start="10.0.0.9")) == [
        "10.0.0.9", "10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.14"]


def test_allocator_hands_out_in_order_and_reuses_the_lowest_released() -> None:
    alloc = Allocator(POOL, ["10.0.0.3"])
    got = [alloc.allocate() for _ in range(3)]
    assert got == [Allocated("10.0.0.2"), Allocated("10.0.0.4"), Allocated("10.0.0.5")]
    assert alloc.release("10.0.0.4") and alloc.release("10.0.0.2")
    assert not alloc.release("10.0.0.2") and not alloc.release("10.0.0.99")
    assert alloc.allocate() == Allocated("10.0.0.2")
    assert alloc.allocate() == Allocated("10.0.0.4")
    assert alloc.allocate() == Allocated("10.0.0.6")


def test_allocator_exhausts_and_recovers() -> None:
    alloc = Allocator(POOL)
    addresses = [alloc.allocate() for _ in range(12)]
    assert all(isinstance(a, Allocated) for a in addresses)
    assert alloc.allocate() == Exhausted(12) and alloc.free == 0
    assert alloc.release("10.0.0.14")
    assert alloc.allocate() == Allocated("10.0.0.14")


def test_release_ahead_of_the_cursor_is_found_by_the_cursor() -> None:
    alloc = Allocator(POOL, ["10.0.0.9"])
    assert alloc.release("10.0.0.9")
    assert [alloc.allocate() for _ in range(7)][-1] == Allocated("10.0.0.9")


OPS = st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=40)),
               max_size=200)


@settings(max_examples=200, deadline=None)
@given(ops=OPS, pre=st.sets(st.integers(min_value=0, max_value=20), max_size=8))
def test_random_sequences_never_double_allocate_nor_leak(
    ops: list[tuple[bool, int]], pre: set[int]
) -> None:
    pool = parse_pool("10.1.0.0/27", "10.1.0.1", [], ["10.1.0.10-10.1.0.12"])
    taken = {f"10.1.0.{i}" for i in pre if pool.contains(f"10.1.0.{i}")}
    alloc = Allocator(pool, taken)
    held = set(taken)
    for is_allocate, pick in ops:
        if is_allocate:
            result = alloc.allocate()
            if isinstance(result, Exhausted):
                assert len(held) == pool.capacity
                continue
            assert result.address not in held, "handed out twice"
            assert pool.contains(result.address)
            # Always the lowest free address, like the pure next_free.
            assert next_free(pool, held) == result
            held.add(result.address)
        elif held:
            victim = sorted(held)[pick % len(held)]
            assert alloc.release(victim)
            held.discard(victim)
        assert alloc.allocated == len(held)
        assert alloc.allocated + alloc.free == pool.capacity
    assert {a for a in held} == {
        pool.address(v) for v in pool.values() if alloc.is_allocated(pool.address(v))}
