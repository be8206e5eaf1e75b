"""The addresses of one IpamHost: reuse what it holds, claim what it lacks,
release what it no longer needs.

Owns :func:`assign` and :func:`release_unneeded`. An IpamHost holds the
IPaddrs labelled ``ipam.racksmith.io/ipamhost=<host>`` whose ``spec.ownerRef``
names it (same namespace, same uid). For each ``(interface, subnet)`` the
template asks for, the IPaddr labelled with that interface in that subnet is
reused; only when there is none is an address claimed
(:func:`racksmith.ipamclaims.claims.claim_address`, which creates the
IPaddr with those labels in one atomic create). So a reconcile interrupted
at any point finds its claims again and never claims twice for one request;
two hosts can never share an address (the claim protocol's guarantee).

IPaddrs of an earlier IpamHost with the same name (another uid) are never
reused: the garbage collector may delete them at any time. They count as
unneeded and are released like any address the template stopped asking for.
Claims and releases go through the runtime's Client
(:mod:`racksmith.ipamclaims.claims`). The reconciler's workers share, per
subnet, the set of addresses being tried (each claim's hint is loaded afresh
from the cache, so an address released meanwhile is found, but an address
another worker is trying is skipped): one controller never races itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.ipamhost.names import INTERFACE_LABEL, IPAMHOST_LABEL
from racksmith.ipamclaims.claims import Claimed, TakenHint, claim_address, release
from racksmith.ipamclaims.names import (
    REASON_EXHAUSTED,
    REASON_NOT_VALIDATED,
    SUBNET_LABEL,
    label_value,
)
from racksmith.kinds.common import ObjectReference
from racksmith.kinds.ipam import IpamHost, Subnet
from racksmith.planners.netplan import AddressRequest
from racksmith.runtime.client import Client


@dataclass
class Assignment:
    """The outcome of :func:`assign`."""

    allocations: dict[AddressRequest, str] = field(default_factory=dict)
    used: list[dict[str, Any]] = field(default_factory=list)
    """The IPaddrs behind ``allocations`` (reused or just claimed)."""
    claimed: list[str] = field(default_factory=list)
    """Names of the IPaddrs claimed by this call."""
    pending: list[str] = field(default_factory=list)
    """Requests that may succeed later (exhausted, not yet validated subnets)."""
    errors: list[str] = field(default_factory=list)
    """Requests that cannot succeed until something is fixed."""
    waiting_on: list[Subnet] = field(default_factory=list)
    """Subnets whose status change may let a pending request through."""


def owner_of(host: IpamHost) -> ObjectReference:
    """The owner reference an IpamHost's IPaddrs carry."""
    meta = host.metadata
    return ObjectReference(api_version=IpamHost.info.api_version, kind=IpamHost.info.kind,
                           name=meta.name or "", namespace=meta.namespace, uid=meta.uid)


def is_held_by(ipaddr: dict[str, Any], host: IpamHost, *, any_uid: bool = False) -> bool:
    """``ipaddr`` belongs to ``host`` (with ``any_uid``: to any host of its name)."""
    meta = ipaddr.get("metadata") or {}
    ref = (ipaddr.get("spec") or {}).get("ownerRef") or {}
    if (meta.get("labels") or {}).get(IPAMHOST_LABEL) != host.metadata.name:
        return False
    if ref.get("kind") != IpamHost.info.kind or ref.get("name") != host.metadata.name:
        return False
    if (ref.get("namespace") or meta.get("namespace")) != host.metadata.namespace:
        return False
    return any_uid or ref.get("uid") in (None, host.metadata.uid)


def find_held(held: Iterable[dict[str, Any]], request: AddressRequest, subnet: Subnet
              ) -> dict[str, Any] | None:
    """The IPaddr among ``held`` for ``request`` in ``subnet`` (lowest name if several)."""
    found = [
        ip for ip in held
        if (ip.get("metadata") or {}).get("namespace") == subnet.metadata.namespace
        and ((ip.get("metadata") or {}).get("labels") or {}).get(SUBNET_LABEL)
        == subnet.metadata.name
        and ((ip.get("metadata") or {}).get("labels") or {}).get(INTERFACE_LABEL)
        == request.interface
    ]
    return min(found, key=lambda ip: str(ip["metadata"]["name"])) if found else None


async def assign(client: Client, host: IpamHost, requests: Sequence[AddressRequest],
                 subnets: dict[str, tuple[Subnet, dict[str, Any]]],
                 held: Sequence[dict[str, Any]], *,
                 trying: dict[tuple[str, str], set[int]] | None = None) -> Assignment:
    """An address for every request: reused from ``held`` or claimed now.

    ``subnets`` maps each layout name to the Subnet (model and raw object);
    ``held`` are the host's IPaddrs (:func:`is_held_by`). Every request is
    tried, so one exhausted subnet does not hide the problems of another;
    addresses claimed while another request fails stay held by the host.
    ``trying``: per (namespace, subnet), the addresses the caller's other
    concurrent assigns are trying (the hints' shared ``pending`` set; each
    assign still loads what is taken afresh, so released addresses are found).
    """
    out = Assignment()
    owner = owner_of(host)
    trying = trying if trying is not None else {}
    hints: dict[str, TakenHint] = {}
    for request in requests:
        subnet, raw = subnets[request.subnet]
        found = find_held(held, request, subnet)
        if found is not None:
            out.allocations[request] = str(found["spec"]["address"])
            out.used.append(found)
            continue
        if label_value(request.interface) is None:
            out.errors.append(f"interface {request.interface!r} cannot be recorded in an "
                              f"IPaddr label; use a name of letters, digits, '-', '_', '.'")
            continue
        labels = {IPAMHOST_LABEL: owner.name, INTERFACE_LABEL: request.interface}
        subnet_name = subnet.metadata.name or ""
        hint = hints.get(subnet_name)
        if hint is None:
            pending = trying.setdefault((subnet.metadata.namespace or "", subnet_name), set())
            hint = hints[subnet_name] = TakenHint(pending=pending)
        got = await claim_address(client, raw, owner, mac=request.mac, hint=hint, labels=labels)
        if isinstance(got, Claimed):
            out.allocations[request] = got.address
            out.used.append(got.ipaddr)
            out.claimed.append(got.name)
            continue
        what = f"interface {request.interface} from subnet {request.subnet!r}: {got.message}"
        if got.reason in (REASON_EXHAUSTED, REASON_NOT_VALIDATED):
            out.pending.append(what)
            out.waiting_on.append(subnet)
        else:
            out.errors.append(what)
    return out


async def release_unneeded(client: Client, held: Iterable[dict[str, Any]],
                           used: Iterable[dict[str, Any]]) -> list[str]:
    """Release every IPaddr of ``held`` not in ``used``; the names released."""
    keep = {(ip["metadata"].get("namespace"), ip["metadata"]["name"]) for ip in used}
    out = []
    for ip in held:
        meta = ip["metadata"]
        if (meta.get("namespace"), meta["name"]) not in keep and await release(client, ip):
            out.append(str(meta["name"]))
    return out
