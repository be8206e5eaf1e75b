"""Choosing addresses from a pool: the next free one, deterministically.

Owns :func:`next_free` / :func:`free_addresses` (given a :class:`Pool` and the
addresses already taken: the lowest free address, or every free one in
ascending order) and :class:`Allocator`, an in-memory pool that allocates
and releases (the benchmark baseline and the model the property tests check).
Results are :class:`Allocated` or :class:`Exhausted`, never an exception.

The API-backed protocol that makes allocation safe between processes lives
in ``racksmith.ipamclaims.claims``; it walks :func:`free_addresses` and
lets the API server's atomic create decide. Pure: no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass

from racksmith.ipam.ranges import Pool


@dataclass(frozen=True, slots=True)
class Allocated:
    """An address was chosen."""

    address: str


@dataclass(frozen=True, slots=True)
class Exhausted:
    """No address is free."""

    capacity: int

    @property
    def message(self) -> str:
        return f"the subnet is exhausted: all {self.capacity} addresses are allocated"


def taken_values(pool: Pool, taken: Iterable[str]) -> set[int]:
    """The addresses of ``taken`` that belong to ``pool``, as integers."""
    out: set[int] = set()
    for address in taken:
        value = pool.value(address)
        if value is not None:
            out.add(value)
    return out


def free_addresses(pool: Pool, taken: Iterable[str], start: str | None = None) -> Iterator[str]:
    """Every free address of ``pool`` in ascending order (from ``start`` on)."""
    begin = pool.value(start) if start is not None else None
    for value in free_values(pool, taken_values(pool, taken), begin):
        yield pool.address(value)


def free_values(pool: Pool, used: Container[int], start: int | None = None) -> Iterator[int]:
    """Like :func:`free_addresses` on integers; ``used`` is read lazily, so
    values added to it while iterating are skipped."""
    for value in pool.values(start):
        if value not in used:
            yield value


def next_free(pool: Pool, taken: Iterable[str]) -> Allocated | Exhausted:
    """The lowest free address of ``pool``, or :class:`Exhausted`."""
    for address in free_addresses(pool, taken):
        return Allocated(address)
    return Exhausted(pool.capacity)


class Allocator:
    """An in-memory pool: ``allocate`` always returns the lowest free address.

    ``O(log n)`` per call: a cursor walks the pool in order, and released
    addresses behind it wait in a min-heap. Not thread-safe; one owner.
    """

    def __init__(self, pool: Pool, taken: Iterable[str] = ()) -> None:
        self.pool = pool
        self._taken = taken_values(pool, taken)
        self._cursor = pool.values()
        self._next: int | None = self._advance()
        self._released: list[int] = []

    @property
    def allocated(self) -> int:
        return len(self._taken)

    @property
    def free(self) -> int:
        return self.pool.capacity - len(self._taken)

    def is_allocated(self, address: str) -> bool:
        value = self.pool.value(address)
        return value is not None and value in self._taken

    def allocate(self) -> Allocated | Exhausted:
        """The lowest free address, now taken; or :class:`Exhausted`."""
        while self._released:
            value = heapq.heappop(self._released)
            if value not in self._taken:
                self._taken.add(value)
                return Allocated(self.pool.address(value))
        if self._next is None:
            return Exhausted(self.pool.capacity)
        value = self._next
        self._taken.add(value)
        self._next = self._advance()
        return Allocated(self.pool.address(value))

    def release(self, address: str) -> bool:
        """Return ``address`` to the pool; False if it was not allocated."""
        value = self.pool.value(address)
        if value is None or value not in self._taken:
            return False
        self._taken.discard(value)
        if self._next is None or value < self._next:
            heapq.heappush(self._released, value)
        return True

    def _advance(self) -> int | None:
        for value in self._cursor:
            if value not in self._taken:
                return value
        return None
