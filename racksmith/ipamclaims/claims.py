"""Claiming and releasing addresses through the API: the allocation protocol.

Owns :func:`claim_address`, :func:`release` and :func:`list_ipaddrs`, used by
the Subnet controller (to count what is taken) and by the controllers that
need addresses (IpamHost rendering).

The protocol never hands out an address twice, whatever the number of
claimers: an address is claimed by **creating** the IPaddr object named
after the subnet and the address (:func:`~racksmith.ipamclaims.names.ipaddr_name`).
Names are unique per namespace and the API server's create is atomic, so of
two claimers racing for one address exactly one gets 201; the other gets 409
AlreadyExists and moves on to the next free address. What a claimer
believes is taken (its :class:`TakenHint`) only spares it requests: a stale
hint can cost a 409, never a duplicate. Releasing is deleting the IPaddr,
after which the address is free again.

Only subnets the Subnet controller accepted for their current spec are used:
a subnet that is invalid, overlaps an older one or has not been judged yet
is refused with a :class:`NotClaimed` result (never an exception), as is an
exhausted one (after re-reading what is taken, since others may have
released addresses meanwhile).

A claim is not idempotent: a caller that must not claim twice for the same
purpose looks its addresses up first (:func:`list_ipaddrs` by owner, a live
read: the cache may not show a claim made a moment ago).

Every call talks through the runtime's :class:`~racksmith.runtime.client.Client`
(given one, or the Client of the given ``ApiClient``), writing as IPAM's
field manager. What is taken is first read from the shared IPaddr cache when
one serves (a hint only: the create decides), once per hint however many
claims share it; while claiming, a candidate the cache shows taken (another
claimer's, learnt from the watch after the hint was loaded) is skipped
without a request, so claimers of separate processes rarely race for one
address; the re-read before an Exhausted answer is live, so an address
released a moment ago is found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from racksmith.ipam.allocator import free_values
from racksmith.ipam.ranges import InvalidSubnet, Pool, parse_pool
from racksmith.ipamclaims.names import (
    FIELD_MANAGER,
    OWNER_KIND_LABEL,
    OWNER_NAME_LABEL,
    READY,
    REASON_EXHAUSTED,
    REASON_INVALID,
    REASON_NOT_VALIDATED,
    REASON_OVERLAPPING,
    SUBNET_LABEL,
    ipaddr_name,
    label_value,
)
from racksmith.kinds.common import ConditionStatus, ObjectReference
from racksmith.kinds.ipam import IPaddr, Subnet
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, Conflict
from racksmith.runtime.resources import IPADDRS

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

_REFUSING = (REASON_INVALID, REASON_OVERLAPPING)


@dataclass(frozen=True, slots=True)
class Claimed:
    """The address is ours: ``ipaddr`` is the IPaddr object as created."""

    address: str
    ipaddr: dict[str, Any] = field(repr=False)
    conflicts: int = 0
    """How many addresses were lost to other claimers on the way."""

    @property
    def name(self) -> str:
        return str(self.ipaddr["metadata"]["name"])


@dataclass(frozen=True, slots=True)
class NotClaimed:
    """No address: ``reason`` is Exhausted, InvalidSpec, Overlapping or NotValidated."""

    reason: str
    message: str

    @property
    def exhausted(self) -> bool:
        return self.reason == REASON_EXHAUSTED


@dataclass
class TakenHint:
    """What one claimer believes is taken in one subnet (integers of the pool).

    Only a cache: the API server's create decides. Candidates are tried in
    ascending order from ``floor`` (every address below it is known taken),
    wrapping around to the start of the pool. Reuse one hint per subnet
    across claims to avoid re-listing; it is refreshed before an Exhausted
    answer.

    ``spread``: start at a random address instead of the lowest (``rng`` in
    [0, 1), e.g. ``random.random``). Claimers that race for one subnet (many
    replicas, many workers) then rarely want the same address: far fewer
    409s, at the price of addresses no longer being handed out lowest first.
    Safety does not depend on it.

    One hint may serve concurrent claims of one process (a controller's
    workers): an address one of them is trying is ``pending`` and skipped by
    the others, so a process never races itself.
    """

    used: set[int] = field(default_factory=set)
    floor: int | None = None
    loaded: bool = False
    spread: Callable[[], float] | None = None
    pending: set[int] = field(default_factory=set)
    """Addresses a claim of this process is trying right now."""
    loading: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)
    """Held while the hint is (re)loaded: concurrent claims sharing the hint
    wait for one load instead of each listing the subnet."""


async def claim_address(
    api: ApiClient | Client,
    subnet: Subnet | Mapping[str, Any],
    owner: ObjectReference,
    *,
    mac: str | None = None,
    hint: TakenHint | None = None,
    labels: Mapping[str, str] | None = None,
) -> Claimed | NotClaimed:
    """Claim the lowest address of ``subnet`` not yet taken, for ``owner``.

    ``owner`` becomes ``spec.ownerRef`` and the owner labels; with a ``uid``
    and in the subnet's namespace it is also a metadata owner reference, so
    the address is released when the owner is deleted. ``labels`` are added
    to the IPaddr's labels (e.g. which interface of the owner it is for), so
    the claimer can find its claim again after a crash. Raises
    :class:`~racksmith.runtime.errors.ApiError` only for unexpected API
    errors; every expected outcome is a result.
    """
    model = subnet if isinstance(subnet, Subnet) else Subnet.model_validate(subnet)
    refusal = refusal_of(model)
    if refusal is not None:
        return refusal
    try:
        pool = pool_of(model)
    except InvalidSubnet as exc:
        return NotClaimed(REASON_INVALID, f"subnet {model.metadata.name}: {exc}")
    namespace = model.metadata.namespace or "default"
    name = model.metadata.name or ""
    client = _client(api)
    hint = hint if hint is not None else TakenHint()
    conflicts = 0
    for attempt in range(2):
        if attempt:
            # The load before answering Exhausted is live: the cache may still
            # hold an address just released.
            async with hint.loading:
                await _load(client, namespace, name, pool, hint, live=True)
        elif not hint.loaded:
            # The first load may come from the cache (a stale hint costs a
            # 409, never a duplicate); one load for the claims sharing it.
            async with hint.loading:
                if not hint.loaded:
                    await _load(client, namespace, name, pool, hint, live=False)
        for value in _candidates(pool, hint):
            if value in hint.pending:
                continue
            address = pool.address(value)
            # What the shared cache shows taken (others' claims since the
            # load, learnt from the watch) costs no request; only before the
            # live re-read, which must not trust a cache that may be stale.
            if not attempt and client.in_cache(IPADDRS, namespace,
                                               ipaddr_name(name, address)):
                hint.used.add(value)
                continue
            body = ipaddr_body(model, pool, address, owner, mac, labels)
            hint.pending.add(value)
            try:
                created = await _create(client, namespace, body)
            finally:
                hint.pending.discard(value)
            # Candidates skip only addresses known taken or being tried, so
            # (without spread) everything below this one is taken now too.
            hint.used.add(value)
            hint.floor = value + 1
            if created is not None:
                return Claimed(address, created, conflicts)
            conflicts += 1
    return NotClaimed(REASON_EXHAUSTED, f"subnet {name} is exhausted: all {pool.capacity} "
                                        "addresses are allocated")


async def release(api: ApiClient | Client, ipaddr: Mapping[str, Any]) -> bool:
    """Delete ``ipaddr`` (an IPaddr object): its address returns to the pool.

    Guarded by the object's uid, so an address re-claimed by someone else
    meanwhile is left alone. True if this call deleted it, False if it was
    already gone or is now someone else's. Safe to call repeatedly.
    """
    meta = ipaddr.get("metadata") or {}
    uid = meta.get("uid")
    try:
        return await _client(api).delete(IPADDRS, meta.get("namespace") or "default",
                                         str(meta["name"]), uid=str(uid) if uid else None)
    except Conflict:
        # The uid precondition failed: the name was re-claimed by someone
        # else. A definite answer ("not ours"), not a stale read to retry.
        return False


async def list_ipaddrs(
    api: ApiClient | Client, namespace: str, *, subnet: str | None = None,
    owner_name: str | None = None, live: bool = True,
) -> list[dict[str, Any]]:
    """The IPaddrs of ``namespace``, filtered by subnet and/or owner name labels.

    Live by default: a caller checking what it holds before claiming must
    see its own claims of a moment ago, which the cache may not show yet.
    ``live=False`` reads the shared IPaddr cache when one serves."""
    labels: dict[str, str] = {}
    if subnet is not None:
        labels[SUBNET_LABEL] = subnet
    if owner_name is not None:
        labels[OWNER_NAME_LABEL] = owner_name
    return await _client(api).list(IPADDRS, namespace, labels=labels, live=live)


def refusal_of(subnet: Subnet) -> NotClaimed | None:
    """Why ``subnet`` must not be used for allocation now, if it must not."""
    name = subnet.metadata.name
    status = subnet.status
    ready = next((c for c in (status.conditions if status else []) if c.type == READY), None)
    generation = subnet.metadata.generation
    if ready is None or (generation is not None and ready.observed_generation != generation):
        return NotClaimed(REASON_NOT_VALIDATED, f"subnet {name} has not been validated yet "
                                                "by the Subnet controller; retry later")
    if ready.status != ConditionStatus.TRUE and ready.reason in _REFUSING:
        return NotClaimed(ready.reason or REASON_INVALID,
                          f"subnet {name} is not usable: {ready.message}")
    return None


def pool_of(subnet: Subnet) -> Pool:
    """The subnet's pool; raises InvalidSubnet."""
    spec = subnet.spec
    return parse_pool(spec.cidr, spec.gateway, spec.include_ranges, spec.exclude_ranges)


def ipaddr_body(subnet: Subnet, pool: Pool, address: str, owner: ObjectReference,
                mac: str | None = None, extra_labels: Mapping[str, str] | None = None,
                ) -> dict[str, Any]:
    """The IPaddr object that claims ``address`` of ``subnet`` for ``owner``."""
    namespace = subnet.metadata.namespace or "default"
    subnet_name = subnet.metadata.name or ""
    labels = {**(extra_labels or {}), SUBNET_LABEL: subnet_name}
    for key, value in ((OWNER_KIND_LABEL, owner.kind or ""), (OWNER_NAME_LABEL, owner.name)):
        checked = label_value(value)
        if checked:
            labels[key] = checked
    metadata: dict[str, Any] = {"name": ipaddr_name(subnet_name, address),
                                "namespace": namespace, "labels": labels}
    if owner.uid and owner.kind and owner.api_version and owner.namespace in (None, namespace):
        metadata["ownerReferences"] = [{"apiVersion": owner.api_version, "kind": owner.kind,
                                        "name": owner.name, "uid": owner.uid}]
    spec: dict[str, Any] = {
        "address": address,
        "cidr": f"{address}/{pool.network.prefixlen}",
        "subnetRef": {"name": subnet_name},
        "ownerRef": owner.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    if subnet.spec.gateway:
        spec["gateway"] = subnet.spec.gateway
    if mac:
        spec["mac"] = mac
    return {"apiVersion": IPaddr.info.api_version, "kind": "IPaddr",
            "metadata": metadata, "spec": spec}


def _client(api: ApiClient | Client) -> Client:
    """The Client of ``api``, writing as IPAM's field manager."""
    return as_client(api).with_field_manager(FIELD_MANAGER)


async def _create(client: Client, namespace: str, body: dict[str, Any]
                  ) -> dict[str, Any] | None:
    """The created object, or None if the name is taken (someone else won)."""
    try:
        return await client.create(IPADDRS, body, namespace=namespace)
    except AlreadyExists:
        return None


async def _load(client: Client, namespace: str, subnet: str, pool: Pool,
                hint: TakenHint, *, live: bool) -> None:
    items = await list_ipaddrs(client, namespace, subnet=subnet, live=live)
    hint.used = set()
    for item in items:
        value = pool.value(str((item.get("spec") or {}).get("address") or ""))
        if value is not None:
            hint.used.add(value)
    hint.floor = None
    if hint.spread is not None and pool.capacity:
        hint.floor = pool.nth(min(int(hint.spread() * pool.capacity), pool.capacity - 1))
    hint.loaded = True


def _candidates(pool: Pool, hint: TakenHint) -> Iterator[int]:
    """Free addresses from the floor up, then from the bottom to the floor."""
    start = hint.floor
    yield from free_values(pool, hint.used, start)
    if start is not None:
        for value in free_values(pool, hint.used):
            if value >= start:
                return
            yield value

