"""Which subnets overlap, and which of two overlapping subnets wins.

Owns :func:`overlapping`: given every Subnet's cidr with its age, the older
subnet of an overlapping pair keeps its addresses and the younger one is
rejected (never used for allocation), so an address can never belong to two
usable pools. Only *accepted* subnets reject younger ones: subnets are judged
oldest first, and one that is rejected (or invalid) blocks nobody. Ties on
creation time are broken by namespace/name, so every replica reaches the
same verdict. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from racksmith.ipam.ranges import Network


@dataclass(frozen=True, slots=True)
class SubnetCidr:
    """A subnet as far as overlap goes: who, how old, which network."""

    namespace: str
    name: str
    created: str
    """metadata.creationTimestamp (RFC 3339 UTC, so it sorts as text)."""
    cidr: str
    valid: bool = True
    """False when the spec is invalid for other reasons: it then blocks nobody."""

    @property
    def age_key(self) -> tuple[str, str, str]:
        return (self.created, self.namespace, self.name)

    def network(self) -> Network | None:
        try:
            return ipaddress.ip_network(self.cidr.strip(), strict=False)
        except ValueError:
            return None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.cidr})"


def overlaps(a: Network, b: Network) -> bool:
    """Whether two networks share an address (never across IP versions)."""
    return a.version == b.version and a.overlaps(b)  # type: ignore[arg-type]


def overlapping(subject: SubnetCidr, others: Sequence[SubnetCidr]) -> list[SubnetCidr]:
    """The older, accepted subnets among ``others`` that overlap ``subject``.

    A non-empty answer (oldest first) means ``subject`` is rejected.
    Unparsable cidrs overlap nothing (they are InvalidSpec on their own).
    """
    mine = subject.network()
    if mine is None:
        return []
    older = sorted((o for o in others if o.age_key < subject.age_key
                    and (o.namespace, o.name) != (subject.namespace, subject.name)),
                   key=lambda s: s.age_key)
    accepted: list[tuple[SubnetCidr, Network]] = []
    for other in older:
        theirs = other.network()
        if theirs is None or not other.valid:
            continue
        if not any(overlaps(theirs, net) for _, net in accepted):
            accepted.append((other, theirs))
    return [other for other, theirs in accepted if overlaps(mine, theirs)]
