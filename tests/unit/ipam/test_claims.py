"""The claim protocol against an in-memory stand-in for the API's atomic
create: random interleavings of claimers (each with its own stale hint) and
releases never hand out an address twice and never leak one.

The real API server is exercised by tests/integration/test_ipam.py; this
fake (a runtime Client) only models "create fails with AlreadyExists if
the name exists".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.ipamclaims.claims import (
    Claimed,
    NotClaimed,
    TakenHint,
    claim_address,
    ipaddr_body,
    pool_of,
    refusal_of,
    release,
)
from racksmith.ipamclaims.names import SUBNET_LABEL, ipaddr_name, label_value
from racksmith.kinds.common import ObjectReference
from racksmith.kinds.ipam import Subnet
from racksmith.runtime.client import Client
from racksmith.runtime.errors import AlreadyExists, Conflict
from racksmith.runtime.resource import Resource


class FakeApi(Client):
    """Just enough of the runtime Client: names are unique, create is atomic."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(cast(Any, None))
        self.objects: dict[str, dict[str, Any]] = {}
        self.rng = rng
        self.uid = 0

    def with_field_manager(self, field_manager: str) -> Client:
        return self

    async def _yield(self) -> None:
        for _ in range(self.rng.randrange(3)):
            await asyncio.sleep(0)

    async def create(self, resource: Resource, body: Mapping[str, Any], *,
                     namespace: str | None = None) -> dict[str, Any]:
        await self._yield()
        name = body["metadata"]["name"]
        if name in self.objects:
            raise AlreadyExists(409, "AlreadyExists", f"{name} exists")
        self.uid += 1
        obj = {**body, "metadata": {**body["metadata"], "uid": str(self.uid)}}
        self.objects[name] = obj
        return obj

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   labels: Mapping[str, str] | str | None = None,
                   fields: Mapping[str, str] | None = None,
                   live: bool = False) -> list[dict[str, Any]]:
        await self._yield()
        assert isinstance(labels, Mapping)
        label = labels[SUBNET_LABEL]
        return [o for o in self.objects.values()
                if o["metadata"]["labels"][SUBNET_LABEL] == label]

    async def delete(self, resource: Resource, namespace: str | None, name: str, *,
                     uid: str | None = None, resource_version: str | None = None,
                     propagation: str | None = None) -> bool:
        await self._yield()
        obj = self.objects.get(name)
        if obj is None:
            return False
        if uid and uid != obj["metadata"]["uid"]:
            raise Conflict(409, "Conflict", "uid precondition failed")
        del self.objects[name]
        return True


def subnet(cidr: str = "10.0.0.0/27", gateway: str | None = "10.0.0.1", reason: str = "Ready",
           status: str = "True", generation: int = 1, observed: int = 1) -> Subnet:
    return Subnet.model_validate({
        "apiVersion": "ipam.racksmith.io/v1alpha1", "kind": "Subnet",
        "metadata": {"name": "net", "namespace": "default", "generation": generation},
        "spec": {"cidr": cidr, "gateway": gateway},
        "status": {"conditions": [{"type": "Ready", "status": status, "reason": reason,
                                   "message": "m", "observedGeneration": observed}]},
    })


OWNER = ObjectReference(api_version="ipam.racksmith.io/v1alpha1", kind="IpamHost",
                        name="host-1", namespace="default", uid="u-1")


def test_names_and_bodies() -> None:
    assert ipaddr_name("net", "10.0.0.5") == "net-10-0-0-5"
    assert ipaddr_name("net", "FD00::5") == "net-fd00--5"
    assert label_value("a" * 64) is None and label_value("-x") is None
    assert label_value("host-1") == "host-1"
    net = subnet()
    body = ipaddr_body(net, pool_of(net), "10.0.0.5", OWNER, "52:54:00:00:00:01")
    assert body["metadata"]["labels"] == {
        SUBNET_LABEL: "net", "ipam.racksmith.io/owner-kind": "IpamHost",
        "ipam.racksmith.io/owner-name": "host-1"}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["spec"] == {
        "address": "10.0.0.5", "cidr": "10.0.0.5/27", "gateway": "10.0.0.1",
        "mac": "52:54:00:00:00:01", "subnetRef": {"name": "net"},
        "ownerRef": {"apiVersion": "ipam.racksmith.io/v1alpha1", "kind": "IpamHost",
                     "name": "host-1", "namespace": "default", "uid": "u-1"}}


def test_refusals() -> None:
    assert refusal_of(subnet()) is None
    assert refusal_of(subnet(reason="Exhausted", status="False")) is None
    refused = refusal_of(subnet(reason="Overlapping", status="False"))
    assert refused is not None and refused.reason == "Overlapping"
    stale = refusal_of(subnet(generation=2, observed=1))
    assert stale is not None and stale.reason == "NotValidated"


async def test_claim_release_and_exhaustion() -> None:
    api: Any = FakeApi(random.Random(0))
    net = subnet(cidr="10.0.0.0/29")  # 5 addresses: .2-.6
    got = [await claim_address(api, net, OWNER) for _ in range(5)]
    assert [g.address for g in got if isinstance(g, Claimed)] == [
        f"10.0.0.{i}" for i in range(2, 7)]
    out = await claim_address(api, net, OWNER)
    assert isinstance(out, NotClaimed) and out.exhausted and "exhausted" in out.message
    first = got[0]
    assert isinstance(first, Claimed)
    assert await release(api, first.ipaddr) and not await release(api, first.ipaddr)
    again = await claim_address(api, net, OWNER)
    assert isinstance(again, Claimed) and again.address == "10.0.0.2"
    # The old object's uid no longer matches the re-claimed one: left alone.
    assert not await release(api, first.ipaddr)
    invalid = await claim_address(api, subnet(cidr="10.0.0.1/29"), OWNER)
    assert isinstance(invalid, NotClaimed) and invalid.reason == "InvalidSpec"


async def test_spread_starts_anywhere_and_wraps() -> None:
    api: Any = FakeApi(random.Random(0))
    net = subnet(cidr="10.0.0.0/29")  # .2-.6
    hint = TakenHint(spread=lambda: 0.99)
    got = [await claim_address(api, net, OWNER, hint=hint) for _ in range(5)]
    assert [g.address for g in got if isinstance(g, Claimed)] == [
        "10.0.0.6", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]
    out = await claim_address(api, net, OWNER, hint=hint)
    assert isinstance(out, NotClaimed) and out.exhausted


async def test_concurrent_claims_sharing_a_hint_never_race_each_other() -> None:
    """The workers of one process share a hint: an address one is trying is
    skipped by the others, so they lose no race among themselves."""
    api: Any = FakeApi(random.Random(1))
    net = subnet(cidr="10.0.0.0/26")  # 61 addresses
    hint = TakenHint()
    got = await asyncio.gather(*(claim_address(api, net, OWNER, hint=hint) for _ in range(40)))
    claimed = [g for g in got if isinstance(g, Claimed)]
    assert len(claimed) == 40 and len({g.address for g in claimed}) == 40
    assert sum(g.conflicts for g in claimed) == 0
    assert hint.pending == set()
    # Lowest first all the same: the 40 lowest addresses (.2-.41: .1 is the gateway).
    assert sorted(int(g.address.rsplit(".", 1)[1]) for g in claimed) == list(range(2, 42))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), claimers=st.integers(1, 5), spread=st.booleans(),
       plan=st.lists(st.sampled_from(["claim", "claim", "release"]), max_size=40))
def test_racing_claimers_never_double_allocate_nor_leak(seed: int, claimers: int,
                                                        spread: bool, plan: list[str]) -> None:
    asyncio.run(_race(seed, claimers, spread, plan))


async def _race(seed: int, claimers: int, spread: bool, plan: list[str]) -> None:
    rng = random.Random(seed)
    api: Any = FakeApi(rng)
    net = subnet(cidr="10.0.0.0/28")  # 13 addresses
    capacity = pool_of(net).capacity
    hints = [TakenHint(spread=rng.random if spread else None) for _ in range(claimers)]
    held: set[str] = set()

    async def claimer(i: int, steps: list[str]) -> None:
        for step in steps:
            if step == "release" and api.objects:
                victim = rng.choice(sorted(api.objects))
                held.discard(api.objects[victim]["spec"]["address"])
                await release(api, api.objects[victim])
                continue
            out = await claim_address(api, net, OWNER, hint=hints[i])
            if isinstance(out, Claimed):
                assert out.address not in held, "handed out twice"
                held.add(out.address)
            else:
                assert out.exhausted

    await asyncio.gather(*(claimer(i, plan[i::claimers]) for i in range(claimers)))
    addresses = [o["spec"]["address"] for o in api.objects.values()]
    assert len(addresses) == len(set(addresses)) <= capacity
    assert set(addresses) == held
    # Nothing leaked: every address is either held by an object or claimable.
    fresh = [await claim_address(api, net, OWNER) for _ in range(capacity - len(addresses))]
    assert all(isinstance(f, Claimed) for f in fresh)
    assert len(api.objects) == capacity
