"""Leader election over a Lease record, with the Lease's store as a seam.

Owns the election algorithm every Racksmith process uses: the controller
manager over the Kubernetes API (``racksmith.runtime.leader.KubeLeaseStore``)
and the API server's replicas over their own store (the server-side
lifecycles run on one replica at a time).

``LeaderElector`` follows client-go's leaderelection: a candidate reads the
Lease and takes it when it is free (no holder) or expired, and the holder
renews it every ``retry_period``; writes carry the resourceVersion read, so a
concurrent writer makes one of them fail with 409 (``LeaseConflict``: lost the
race, try later). Expiry is judged on the *local* clock from when this
process last saw the record change (never by comparing another host's
``renewTime`` with ours), so clock skew between hosts does not matter. A
holder that cannot renew within ``renew_deadline`` considers itself deposed.
On graceful shutdown it releases the Lease (empty holder, duration 1 s) so a
successor need not wait for expiry.

``LeaseStore`` is the seam, with ``InMemoryLeaseStore`` (tests, single
process) and ``PartitionedLeaseStore`` (a view that can be cut off) here.
This module is a leaf: it imports no other Racksmith layer but the clock.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from racksmith.clock import Clock, SystemClock


class LeaseConflict(Exception):
    """The Lease changed since it was read (409), or already exists on create."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The fields of a Lease's spec that election uses, plus its resourceVersion."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    lease_transitions: int = 0
    resource_version: str | None = None


class LeaseStore(Protocol):
    """Reads and writes one Lease. Every method may be called repeatedly.

    Errors other than ``LeaseConflict`` (network, 5xx) propagate; the elector
    treats them as a failed attempt.
    """

    async def get(self) -> LeaseRecord | None:
        """The current record, or None if the Lease does not exist."""
        ...

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the Lease; raises ``LeaseConflict`` if it exists."""
        ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the Lease if its resourceVersion is still
        ``record.resource_version``; else raise ``LeaseConflict``."""
        ...


class InMemoryLeaseStore:
    """A ``LeaseStore`` in memory, shared by the electors of one process/test.

    Set ``unavailable`` to make every call raise ``ConnectionError`` (a
    partition, as seen by everyone sharing this store); wrap it in
    ``PartitionedLeaseStore`` to cut off only one elector.
    """

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.unavailable = False
        self._version = 0

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise LeaseConflict("lease exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or self.record.resource_version != record.resource_version:
            raise LeaseConflict("resourceVersion mismatch")
        return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self._version += 1
        self.record = replace(record, resource_version=str(self._version))
        return self.record

    def _check(self) -> None:
        if self.unavailable:
            raise ConnectionError("lease store unavailable")


class PartitionedLeaseStore:
    """A view of another store that can be cut off (``unavailable = True``)."""

    def __init__(self, inner: LeaseStore) -> None:
        self.inner = inner
        self.unavailable = False

    async def get(self) -> LeaseRecord | None:
        self._check()
        return await self.inner.get()

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.create(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.update(record)

    def _check(self) -> None:
        if self.unavailable:
            raise ConnectionError("partitioned from the lease store")


def micro_time(value: datetime) -> str:
    """Format as a Kubernetes MicroTime (RFC 3339, exactly 6 fraction digits, Z).

    Go parses MicroTime with a fixed-width layout; ``isoformat()`` omits the
    fraction when it is zero and writes ``+00:00``, which a strict server rejects.
    """
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_object(namespace: str, name: str, record: LeaseRecord) -> dict[str, Any]:
    """The coordination.k8s.io/v1 Lease ``namespace/name`` holding ``record``
    (its resourceVersion, when set, is the write's precondition): a plain
    dict, not a client model, whose times are MicroTimes."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder_identity,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.lease_transitions,
    }
    if record.acquire_time is not None:
        spec["acquireTime"] = micro_time(record.acquire_time)
    if record.renew_time is not None:
        spec["renewTime"] = micro_time(record.renew_time)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": metadata, "spec": spec}


class LeaderElector:
    """Campaigns for, holds and releases one Lease for ``identity``."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        *,
        clock: Clock | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        jitter: float = 0.2,
        random: Callable[[], float] = _random.random,
        logger: Any = None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self.store = store
        self.identity = identity
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._jitter = jitter
        self._random = random
        log = logger if logger is not None else structlog.get_logger("racksmith.election")
        self._log = log.bind(identity=identity)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        self.is_leader = False

    @property
    def observed_holder(self) -> str:
        """The holder in the last record read ("" if none or unknown)."""
        return self._observed.holder_identity if self._observed else ""

    async def acquire(self) -> None:
        """Return once this identity holds the Lease (retrying forever)."""
        while not await self.try_acquire_or_renew():
            await self._clock.sleep(self.retry_period * (1 + self._jitter * self._random()))
        self._log.info("acquired leadership")

    async def hold(self) -> None:
        """Renew every ``retry_period``; return when leadership is lost."""
        while self.is_leader:
            await self._clock.sleep(self.retry_period)
            if await self.try_acquire_or_renew():
                continue
            deposed = self.observed_holder not in ("", self.identity)
            if deposed or self._clock.now() - self._last_renew >= self.renew_deadline:
                self.is_leader = False
                self._log.warning("lost leadership", holder=self.observed_holder)

    async def release(self) -> None:
        """Give the Lease up (if held) so a successor takes over at once."""
        if not self.is_leader or self._observed is None:
            return
        self.is_leader = False
        current: LeaseRecord | None = self._observed
        try:
            for _ in range(3):
                if current is None or current.holder_identity != self.identity:
                    self._log.info("lease no longer ours, nothing to release")
                    return
                now = self._clock.wall()
                record = replace(
                    current,
                    holder_identity="",
                    lease_duration_seconds=1,
                    acquire_time=now,
                    renew_time=now,
                )
                try:
                    self._observe(await self.store.update(record))
                    self._log.info("released leadership")
                    return
                except LeaseConflict:
                    # The record moved since we last saw it, e.g. a renewal
                    # that was cancelled after the server applied it: re-read.
                    current = await self.store.get()
                    if current is not None:
                        self._observe(current)
            self._log.warning("could not release the lease: it keeps changing")
        except Exception as exc:
            self._log.warning("could not release the lease", error=repr(exc))

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this identity holds the Lease afterwards."""
        now, wall = self._clock.now(), self._clock.wall()
        duration = max(1, round(self.lease_duration))
        try:
            current = await self.store.get()
            if current is None:
                new = LeaseRecord(self.identity, duration, wall, wall, 0)
                self._observe(await self.store.create(new))
                return self._won(now)
            if (
                self._observed is None
                or current.resource_version != self._observed.resource_version
            ):
                self._observe(current)
            held_by_other = current.holder_identity not in ("", self.identity)
            if held_by_other and not self._is_expired(current, now):
                self.is_leader = False
                return False
            if current.holder_identity == self.identity:
                new = replace(current, lease_duration_seconds=duration, renew_time=wall)
            else:
                new = replace(
                    current,
                    holder_identity=self.identity,
                    lease_duration_seconds=duration,
                    acquire_time=wall,
                    renew_time=wall,
                    lease_transitions=current.lease_transitions + 1,
                )
            self._observe(await self.store.update(new))
            return self._won(now)
        except LeaseConflict:
            self._log.debug("lost a race for the lease")
            return False
        except Exception as exc:
            self._log.warning("lease attempt failed", error=repr(exc))
            return False

    def _is_expired(self, record: LeaseRecord, now: float) -> bool:
        duration = record.lease_duration_seconds or self.lease_duration
        return self._observed_at + duration <= now

    def _observe(self, record: LeaseRecord) -> None:
        self._observed = record
        self._observed_at = self._clock.now()

    def _won(self, now: float) -> bool:
        self.is_leader = True
        self._last_renew = now
        return True
