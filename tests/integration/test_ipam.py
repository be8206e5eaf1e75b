"""IPAM against the real embedded API server: the Subnet controller's
status and conditions, and the claim protocol under concurrent claimers.

The controller runs on the runtime (``Controller`` + ``Manager``) over a
kubernetes_asyncio client made from the server's kubeconfig; claimers use
their own ApiClients, as separate controller replicas would. Every wait
polls a condition under a bound and nothing asserts on time. The tests share
the module's API server, each in its own namespace (``tests.harness``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi

from racksmith.apiserver.server import ApiServer
from racksmith.controllers.ipam import subnet_controller
from racksmith.ipamclaims import (
    Claimed,
    NotClaimed,
    TakenHint,
    claim_address,
    list_ipaddrs,
    release,
)
from racksmith.kinds.common import ObjectReference
from racksmith.runtime import Manager
from racksmith.runtime.client import Client
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from racksmith.runtime.resources import IPADDRS
from tests.harness.controllers import managed
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, VERSION = "ipam.racksmith.io", "v1alpha1"


def owner(namespace: str) -> ObjectReference:
    return ObjectReference(api_version="metal.racksmith.io/v1alpha1", kind="Machine",
                           name="machine-1", namespace=namespace)


@pytest_asyncio.fixture(loop_scope="module")
async def controller(client: ApiClient) -> AsyncIterator[Manager]:
    async with managed(client, [subnet_controller(client, workers=2)],
                       identity="ipam-test") as manager:
        yield manager


class Ipam:
    def __init__(self, client: ApiClient, ns: str) -> None:
        self.client = client
        self.api = CustomObjectsApi(client)
        self.core = CoreV1Api(client)
        self.ns = ns
        self.owner = owner(ns)

    async def subnet(self, name: str, cidr: str, gateway: str | None = None,
                     **spec: Any) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Subnet",
                "metadata": {"name": name},
                "spec": {"cidr": cidr, **({"gateway": gateway} if gateway else {}), **spec}}
        await self.api.create_namespaced_custom_object(GROUP, VERSION, self.ns, "subnets", body)

    async def get(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self.api.get_namespaced_custom_object(
            GROUP, VERSION, self.ns, "subnets", name)
        return obj

    async def ready(self, name: str) -> dict[str, Any] | None:
        obj = await self.get(name)
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"].get("generation"):
            return None
        for cond in status.get("conditions") or []:
            if cond["type"] == "Ready":
                return dict(cond)
        return None

    async def events(self, name: str) -> list[Any]:
        """The Events about the Subnet ``name``."""
        out = await self.core.list_namespaced_event(
            self.ns, field_selector=f"involvedObject.name={name}")
        return list(out.items)

    async def told(self, name: str, type_: str, reason: str) -> Any:
        """Wait for the Event ``reason`` about the Subnet ``name``; the Event."""
        async def check() -> bool:
            return any((e.type, e.reason) == (type_, reason) for e in await self.events(name))
        await eventually(check, f"{type_} Event {reason} about subnet {name}")
        return next(e for e in await self.events(name) if e.reason == reason)

    async def judged(self, name: str, reason: str, **counts: int) -> dict[str, Any]:
        async def check() -> bool:
            cond = await self.ready(name)
            status = (await self.get(name)).get("status") or {}
            return cond is not None and cond["reason"] == reason and all(
                status.get(k) == v for k, v in counts.items())
        await eventually(check, f"subnet {name} judged {reason} {counts}")
        return await self.get(name)


@pytest.fixture
def ipam(client: ApiClient, ns: str) -> Ipam:
    return Ipam(client, ns)


def ready_of(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


async def test_subnet_status(ipam: Ipam, controller: Manager) -> None:
    await ipam.subnet("net", "10.0.0.0/24", "10.0.0.1", excludeRanges=["10.0.0.200-10.0.0.254"])
    obj = await ipam.judged("net", "Ready", capacity=198, allocatable=198, allocated=0)
    cond = ready_of(obj)
    assert cond["status"] == "True" and cond["message"] == "198 of 198 addresses free"
    assert await ipam.events("net") == []  # a subnet usable from the start is no news


@pytest.mark.parametrize("spread", [False, True])
async def test_concurrent_claimers_never_share_an_address(
    api_server: ApiServer, ipam: Ipam, controller: Manager, spread: bool
) -> None:
    await ipam.subnet("race", "10.1.0.0/24", "10.1.0.1")
    subnet = await ipam.judged("race", "Ready", capacity=253)
    clients = [await api_client_from_kubeconfig(api_server.kubeconfig_path) for _ in range(4)]
    rng = random.Random(4)

    async def claimer(client: ApiClient, n: int) -> list[Claimed]:
        hint = TakenHint(spread=rng.random if spread else None)
        out = []
        for _ in range(n):
            got = await claim_address(client, subnet, ipam.owner, hint=hint)
            assert isinstance(got, Claimed), got
            out.append(got)
        return out

    try:
        results = await asyncio.gather(*(claimer(c, 50) for c in clients))
    finally:
        for c in clients:
            await c.close()
    addresses = [claim.address for claims in results for claim in claims]
    assert len(addresses) == 200 and len(set(addresses)) == 200
    if not spread:  # lowest first: exactly .2 .. .201 were handed out
        assert set(addresses) == {f"10.1.0.{i}" for i in range(2, 202)}
    assert set(addresses) <= {f"10.1.0.{i}" for i in range(2, 255)}
    stored = await list_ipaddrs(ipam.client, ipam.ns, subnet="race")
    assert sorted(o["spec"]["address"] for o in stored) == sorted(addresses)
    assert {o["metadata"]["name"] for o in stored} == {
        "race-" + a.replace(".", "-") for a in addresses}
    await ipam.judged("race", "Ready", capacity=253, allocated=200, allocatable=53)


async def test_a_claimer_skips_what_its_cache_shows_taken(
    api_server: ApiServer, ipam: Ipam, controller: Manager
) -> None:
    """An address another process claimed after this claimer's hint was
    loaded costs no lost race once the claimer's IPaddr cache has seen it."""
    await ipam.subnet("seen", "10.6.0.0/28", "10.6.0.1")
    subnet = await ipam.judged("seen", "Ready", capacity=13)
    b_api = await api_client_from_kubeconfig(api_server.kubeconfig_path)
    b = Client(b_api)
    informer = b.informer(IPADDRS, ipam.ns)
    informer.acquire()
    try:
        await eventually(lambda: informer.has_synced, "B's IPaddr cache synced")
        hint = TakenHint()
        first = await claim_address(b, subnet, ipam.owner, hint=hint)
        assert isinstance(first, Claimed) and first.address == "10.6.0.2"
        other = await claim_address(ipam.client, subnet, ipam.owner)  # another process
        assert isinstance(other, Claimed) and other.address == "10.6.0.3"
        await eventually(lambda: b.in_cache(IPADDRS, ipam.ns, other.name),
                         "the other claim in B's cache")
        got = await claim_address(b, subnet, ipam.owner, hint=hint)
        assert isinstance(got, Claimed) and got.address == "10.6.0.4"
        assert got.conflicts == 0  # .3 was skipped, not raced for
    finally:
        await informer.release()
        await b_api.close()


async def test_claims_sharing_what_they_try_never_race_each_other(
    ipam: Ipam, controller: Manager
) -> None:
    """Two reconciles of one controller (each with its own hint, loaded
    afresh) share the set of addresses being tried: no lost race between
    them, and the addresses stay lowest first."""
    await ipam.subnet("pair", "10.7.0.0/28", "10.7.0.1")
    subnet = await ipam.judged("pair", "Ready", capacity=13)
    trying: set[int] = set()
    got = await asyncio.gather(*(
        claim_address(ipam.client, subnet, ipam.owner, hint=TakenHint(pending=trying))
        for _ in range(4)))
    assert all(isinstance(g, Claimed) and g.conflicts == 0 for g in got), got
    assert sorted(g.address for g in got if isinstance(g, Claimed)) == [
        "10.7.0.2", "10.7.0.3", "10.7.0.4", "10.7.0.5"]
    assert not trying


async def test_release_returns_the_address(ipam: Ipam, controller: Manager) -> None:
    await ipam.subnet("pool", "10.2.0.0/28", "10.2.0.1")
    subnet = await ipam.judged("pool", "Ready", capacity=13)
    claims = [await claim_address(ipam.client, subnet, ipam.owner) for _ in range(3)]
    assert [c.address for c in claims if isinstance(c, Claimed)] == [
        "10.2.0.2", "10.2.0.3", "10.2.0.4"]
    await ipam.judged("pool", "Ready", allocated=3, allocatable=10)
    first = claims[0]
    assert isinstance(first, Claimed)
    assert await release(ipam.client, first.ipaddr)
    assert not await release(ipam.client, first.ipaddr)  # idempotent
    await ipam.judged("pool", "Ready", allocated=2, allocatable=11)
    again = await claim_address(ipam.client, subnet, ipam.owner)
    assert isinstance(again, Claimed) and again.address == "10.2.0.2"


async def test_exhausted_subnet(ipam: Ipam, controller: Manager) -> None:
    await ipam.subnet("tiny", "10.3.0.0/29", "10.3.0.1", excludeRanges=["10.3.0.5-10.3.0.6"])
    subnet = await ipam.judged("tiny", "Ready", capacity=3)
    hint = TakenHint()
    for _ in range(3):
        assert isinstance(await claim_address(ipam.client, subnet, ipam.owner, hint=hint), Claimed)
    out = await claim_address(ipam.client, subnet, ipam.owner, hint=hint)
    assert isinstance(out, NotClaimed) and out.exhausted
    assert out.message == "subnet tiny is exhausted: all 3 addresses are allocated"
    obj = await ipam.judged("tiny", "Exhausted", allocated=3, allocatable=0)
    assert ready_of(obj)["status"] == "False"
    assert ready_of(obj)["message"] == "all 3 addresses are allocated"
    event = await ipam.told("tiny", "Warning", "Exhausted")
    assert event.message == "all 3 addresses are allocated"
    assert event.involved_object.kind == "Subnet"
    assert event.source.component == "racksmith-subnet"
    # Still usable once an address comes back: the claimer's stale hint is
    # refreshed before it answers Exhausted.
    stored = await list_ipaddrs(ipam.client, ipam.ns, subnet="tiny")
    assert await release(ipam.client, stored[0])
    back = await claim_address(ipam.client, await ipam.get("tiny"), ipam.owner, hint=hint)
    assert isinstance(back, Claimed) and back.address == stored[0]["spec"]["address"]


async def test_overlapping_subnet_is_rejected(ipam: Ipam, controller: Manager) -> None:
    await ipam.subnet("older", "10.4.0.0/16")
    await ipam.judged("older", "Ready")
    await ipam.subnet("younger", "10.4.7.0/24")
    obj = await ipam.judged("younger", "Overlapping", allocatable=0)
    cond = ready_of(obj)
    assert cond["status"] == "False" and f"{ipam.ns}/older (10.4.0.0/16)" in cond["message"]
    out = await claim_address(ipam.client, obj, ipam.owner)
    assert isinstance(out, NotClaimed) and out.reason == "Overlapping"
    assert await list_ipaddrs(ipam.client, ipam.ns, subnet="younger") == []
    # The older one going away frees the younger one.
    event = await ipam.told("younger", "Warning", "Overlapping")
    assert event.message == cond["message"]
    await ipam.api.delete_namespaced_custom_object(GROUP, VERSION, ipam.ns, "subnets", "older")
    await ipam.judged("younger", "Ready", capacity=254)
    again = await ipam.told("younger", "Normal", "Ready")
    assert again.message == "254 of 254 addresses free"
    assert await ipam.events("older") == []


async def test_gateway_outside_the_cidr(ipam: Ipam, controller: Manager) -> None:
    await ipam.subnet("bad", "10.5.0.0/24", "10.6.0.1")
    obj = await ipam.judged("bad", "InvalidSpec")
    cond = ready_of(obj)
    assert cond["status"] == "False"
    assert cond["message"] == "spec.gateway: 10.6.0.1 is outside the cidr 10.5.0.0/24"
    event = await ipam.told("bad", "Warning", "InvalidSpec")
    assert (event.message, event.count) == (cond["message"], 1)
    out = await claim_address(ipam.client, obj, ipam.owner)
    assert isinstance(out, NotClaimed) and out.reason == "InvalidSpec"
