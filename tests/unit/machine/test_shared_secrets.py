"""The Machine controller keeps the Secrets every Machine reads (the agent
Secret, the cluster's PKI) ``timings.shared_secrets`` seconds, and reads a
missing one again every time."""

from __future__ import annotations

import asyncio
from typing import Any

from racksmith.controllers.machine.controller import MachineReconciler
from racksmith.controllers.machine.timings import MachineTimings
from racksmith.runtime.client import Client
from racksmith.runtime.resources import SECRETS


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


class Reads(Client):
    """A Client stand-in counting live reads of Secrets."""

    def __init__(self, present: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.present = present
        self.reads = 0

    def with_field_manager(self, _manager: str) -> Reads:
        return self

    async def get(self, resource: Any, namespace: str | None, name: str, *,
                  live: bool = False, copy: bool = True) -> dict[str, Any] | None:
        assert resource == SECRETS and live
        self.reads += 1
        return self.present.get((namespace or "", name))


def reconciler(client: Reads, clock: Clock, ttl: float) -> MachineReconciler:
    r = MachineReconciler.__new__(MachineReconciler)
    r.client, r.clock = client, clock  # type: ignore[assignment]
    r.timings = MachineTimings(shared_secrets=ttl)
    r._shared = {}
    return r


def test_a_shared_secret_is_read_once_per_ttl() -> None:
    secret = {"metadata": {"name": "demo-ca", "resourceVersion": "1"}}
    client, clock = Reads({("ns", "demo-ca"): secret}), Clock()
    r = reconciler(client, clock, ttl=10.0)

    async def run() -> None:
        assert await r._shared_secret("ns", "demo-ca") is secret
        clock.t += 9.9
        assert await r._shared_secret("ns", "demo-ca") is secret
        assert client.reads == 1
        clock.t += 0.1
        await r._shared_secret("ns", "demo-ca")
        assert client.reads == 2
        # a missing Secret is read again every time
        assert await r._shared_secret("ns", "gone") is None
        assert await r._shared_secret("ns", "gone") is None
        assert client.reads == 4
    asyncio.run(run())


def test_no_ttl_reads_live_every_time() -> None:
    client, clock = Reads({("ns", "a"): {"metadata": {"name": "a"}}}), Clock()
    r = reconciler(client, clock, ttl=0.0)

    async def run() -> None:
        for _ in range(3):
            await r._shared_secret("ns", "a")
    asyncio.run(run())
    assert client.reads == 3
