"""A Subnet's address pool: parsing and validation of cidr, gateway and ranges.

Owns :func:`parse_pool`, which turns a Subnet's ``cidr``, ``gateway``,
``includeRanges`` and ``excludeRanges`` into a :class:`Pool` — the sorted,
disjoint ranges of addresses that may be handed out — or raises
:class:`InvalidSubnet` listing every problem, each naming its field
(``spec.cidr``, ``spec.gateway``, ``spec.includeRanges[1]``...).

Rules: the cidr must be a network address with its prefix (``10.0.0.0/24``,
not ``10.0.0.1/24``); the gateway and every range must lie inside it; a range
is one address or ``first-last`` with ``first <= last``. Never allocated: the
gateway, excluded ranges and, for IPv4 networks larger than a /31, the
network and broadcast addresses. An empty ``includeRanges`` means the whole
cidr. Addresses are handled as integers of one IP version. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a Subnet spec, naming the field it is about."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidSubnet(ValueError):
    """The Subnet spec cannot be used; ``problems`` lists why (at least one)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


@dataclass(frozen=True, slots=True, order=True)
class AddressRange:
    """An inclusive range of addresses, as integers (``first <= last``)."""

    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class Pool:
    """The allocatable addresses of a valid Subnet."""

    network: Network
    gateway: Address | None
    ranges: tuple[AddressRange, ...]
    """Sorted, disjoint, non-adjacent-merged ranges of allocatable addresses."""

    @property
    def version(self) -> int:
        return self.network.version

    @property
    def capacity(self) -> int:
        """How many addresses the pool can hand out."""
        return sum(r.size for r in self.ranges)

    def address(self, value: int) -> str:
        """The text form of the integer ``value`` (compressed for IPv6)."""
        return str(ipaddress.ip_address(value) if self.version == 4
                   else ipaddress.IPv6Address(value))

    def value(self, address: str) -> int | None:
        """``address`` as an integer of this pool's version; None if unparsable."""
        try:
            parsed = ipaddress.ip_address(address.strip())
        except ValueError:
            return None
        return int(parsed) if parsed.version == self.version else None

    def contains(self, address: str) -> bool:
        """Whether ``address`` is one the pool may hand out."""
        value = self.value(address)
        return value is not None and any(r.first <= value <= r.last for r in self.ranges)

    def nth(self, index: int) -> int:
        """The ``index``-th (0-based) allocatable address; IndexError past the end."""
        for r in self.ranges:
            if index < r.size:
                return r.first + index
            index -= r.size
        raise IndexError("address index outside the pool")

    def values(self, start: int | None = None) -> Iterator[int]:
        """The allocatable addresses in ascending order, from ``start`` on."""
        for r in self.ranges:
            if start is not None and r.last < start:
                continue
            first = r.first if start is None else max(r.first, start)
            yield from range(first, r.last + 1)


def parse_pool(
    cidr: str,
    gateway: str | None = None,
    include_ranges: Sequence[str] = (),
    exclude_ranges: Sequence[str] = (),
) -> Pool:
    """The pool of a Subnet spec; raises :class:`InvalidSubnet` (all problems)."""
    problems: list[Problem] = []
    try:
        if "/" not in cidr:
            raise ValueError("no prefix length")
        network: Network = ipaddress.ip_network(cidr.strip(), strict=True)
    except ValueError as exc:
        raise InvalidSubnet([Problem("spec.cidr", _cidr_message(cidr, exc))]) from None
    gw: Address | None = None
    if gateway:
        try:
            gw = ipaddress.ip_address(gateway.strip())
        except ValueError:
            problems.append(Problem("spec.gateway", f"{gateway!r} is not an IP address"))
        else:
            if gw not in network:
                problems.append(Problem("spec.gateway", f"{gateway} is outside the cidr {cidr}"))
                gw = None
    includes = _parse_ranges("spec.includeRanges", include_ranges, network, problems)
    excludes = _parse_ranges("spec.excludeRanges", exclude_ranges, network, problems)
    if problems:
        raise InvalidSubnet(problems)
    base = includes or [AddressRange(int(network.network_address),
                                     int(network.broadcast_address))]
    removed = list(excludes)
    if gw is not None:
        removed.append(AddressRange(int(gw), int(gw)))
    if network.version == 4 and network.prefixlen < 31:
        removed.append(AddressRange(int(network.network_address), int(network.network_address)))
        removed.append(AddressRange(int(network.broadcast_address),
                                    int(network.broadcast_address)))
    return Pool(network, gw, tuple(subtract(merge(base), merge(removed))))


def parse_range(text: str) -> tuple[Address, Address]:
    """``"a-b"`` or ``"a"`` as (first, last); raises ValueError with a message."""
    first_text, sep, last_text = text.strip().partition("-")
    if sep and not last_text:
        raise ValueError(f"{text!r} is not an address or a range first-last")
    try:
        first = ipaddress.ip_address(first_text.strip())
        last = ipaddress.ip_address(last_text.strip()) if sep else first
    except ValueError:
        raise ValueError(f"{text!r} is not an address or a range first-last") from None
    if first.version != last.version:
        raise ValueError(f"{text!r} mixes IPv4 and IPv6")
    if int(first) > int(last):
        raise ValueError(f"{text!r} ends before it starts")
    return first, last


def merge(ranges: Sequence[AddressRange]) -> list[AddressRange]:
    """``ranges`` sorted, with overlapping and adjacent ones joined."""
    out: list[AddressRange] = []
    for r in sorted(ranges):
        if out and r.first <= out[-1].last + 1:
            if r.last > out[-1].last:
                out[-1] = AddressRange(out[-1].first, r.last)
        else:
            out.append(r)
    return out


def subtract(base: Sequence[AddressRange], removed: Sequence[AddressRange]) -> list[AddressRange]:
    """The addresses of merged ``base`` not in merged ``removed``."""
    out: list[AddressRange] = []
    for r in base:
        first = r.first
        for cut in removed:
            if cut.last < first or cut.first > r.last:
                continue
            if cut.first > first:
                out.append(AddressRange(first, cut.first - 1))
            first = max(first, cut.last + 1)
        if first <= r.last:
            out.append(AddressRange(first, r.last))
    return out


def _parse_ranges(field: str, texts: Sequence[str], network: Network,
                  problems: list[Problem]) -> list[AddressRange]:
    out: list[AddressRange] = []
    for i, text in enumerate(texts):
        where = f"{field}[{i}]"
        try:
            first, last = parse_range(text)
        except ValueError as exc:
            problems.append(Problem(where, str(exc)))
            continue
        if first not in network or last not in network:
            problems.append(Problem(where, f"{text} is outside the cidr {network}"))
            continue
        out.append(AddressRange(int(first), int(last)))
    return out


def _cidr_message(cidr: str, exc: ValueError) -> str:
    if "has host bits set" in str(exc):
        try:
            proper = ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:  # pragma: no cover - strict parse failed only on host bits
            proper = None
        return f"{cidr!r} has host bits set (did you mean {proper}?)"
    return f"{cidr!r} is not a network in CIDR notation (e.g. 10.0.0.0/24): {exc}"
