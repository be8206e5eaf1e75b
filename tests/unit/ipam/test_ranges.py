"""Pools from Subnet specs: ranges, exclusions, capacity and validation messages."""

from __future__ import annotations

import pytest

from racksmith.ipam.ranges import AddressRange, InvalidSubnet, merge, parse_pool, subtract


@pytest.mark.parametrize(
    ("cidr", "gateway", "include", "exclude", "capacity", "first", "last"),
    [
        ("10.0.0.0/24", None, [], [], 254, "10.0.0.1", "10.0.0.254"),
        ("10.0.0.0/24", "10.0.0.1", [], [], 253, "10.0.0.2", "10.0.0.254"),
        ("10.0.0.0/24", "10.0.0.1", ["10.0.0.100-10.0.0.199"], [], 100, "10.0.0.100",
         "10.0.0.199"),
        ("10.0.0.0/24", None, ["10.0.0.10-10.0.0.20"], ["10.0.0.15"], 10, "10.0.0.10",
         "10.0.0.20"),
        ("10.0.0.0/24", None, [], ["10.0.0.1-10.0.0.9", "10.0.0.250-10.0.0.255"], 240,
         "10.0.0.10", "10.0.0.249"),
        ("10.0.0.0/24", None, ["10.0.0.0-10.0.0.255"], [], 254, "10.0.0.1", "10.0.0.254"),
        ("10.0.0.0/24", None, ["10.0.0.5", "10.0.0.6", "10.0.0.4-10.0.0.5"], [], 3, "10.0.0.4",
         "10.0.0.6"),
        ("10.0.0.0/31", None, [], [], 2, "10.0.0.0", "10.0.0.1"),
        ("10.0.0.7/32", None, [], [], 1, "10.0.0.7", "10.0.0.7"),
        ("10.0.0.0/30", "10.0.0.1", [], [], 1, "10.0.0.2", "10.0.0.2"),
        ("10.0.0.0/16", "10.0.0.1", [], [], 65533, "10.0.0.2", "10.0.255.254"),
        ("fd00::/120", "fd00::1", [], [], 255, "fd00::", "fd00::ff"),
        ("fd00::/64", None, ["fd00::10-fd00::1f"], [], 16, "fd00::10", "fd00::1f"),
    ],
)
def test_pools(cidr: str, gateway: str | None, include: list[str], exclude: list[str],
               capacity: int, first: str, last: str) -> None:
    pool = parse_pool(cidr, gateway, include, exclude)
    assert pool.capacity == capacity
    values = list(pool.values())
    assert len(values) == capacity
    assert pool.address(values[0]) == first and pool.address(values[-1]) == last
    assert pool.nth(0) == values[0] and pool.nth(capacity - 1) == values[-1]
    with pytest.raises(IndexError):
        pool.nth(capacity)
    if gateway:
        assert not pool.contains(gateway)
    for address in exclude:
        assert not pool.contains(address.split("-")[0])


def test_network_and_broadcast_are_never_allocatable() -> None:
    pool = parse_pool("192.168.1.0/24")
    assert not pool.contains("192.168.1.0") and not pool.contains("192.168.1.255")
    assert pool.contains("192.168.1.1") and not pool.contains("fd00::1")
    assert not pool.contains("garbage")


def test_an_exclusion_covering_everything_leaves_an_empty_pool() -> None:
    assert parse_pool("10.0.0.0/29", None, [], ["10.0.0.0-10.0.0.7"]).capacity == 0


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"cidr": "10.0.0.0"}, "spec.cidr", "CIDR notation"),
        ({"cidr": "10.0.0/24"}, "spec.cidr", "CIDR notation"),
        ({"cidr": "banana"}, "spec.cidr", "CIDR notation"),
        ({"cidr": "10.0.0.0/33"}, "spec.cidr", "CIDR notation"),
        ({"cidr": "10.0.0.1/24"}, "spec.cidr", "did you mean 10.0.0.0/24"),
        ({"cidr": "10.0.0.0/24", "gateway": "10.0.1.1"}, "spec.gateway",
         "10.0.1.1 is outside the cidr 10.0.0.0/24"),
        ({"cidr": "10.0.0.0/24", "gateway": "nope"}, "spec.gateway", "not an IP address"),
        ({"cidr": "10.0.0.0/24", "gateway": "fd00::1"}, "spec.gateway", "outside the cidr"),
        ({"cidr": "10.0.0.0/24", "include_ranges": ["10.0.0.5-10.0.1.5"]},
         "spec.includeRanges[0]", "outside the cidr"),
        ({"cidr": "10.0.0.0/24", "include_ranges": ["10.0.0.9-10.0.0.5"]},
         "spec.includeRanges[0]", "ends before it starts"),
        ({"cidr": "10.0.0.0/24", "exclude_ranges": ["10.0.0.1", "10.0.0.5-"]},
         "spec.excludeRanges[1]", "not an address or a range"),
        ({"cidr": "10.0.0.0/24", "exclude_ranges": ["10.0.0.1-fd00::1"]},
         "spec.excludeRanges[0]", "mixes IPv4 and IPv6"),
    ],
)
def test_invalid_specs_name_the_field(kwargs: dict[str, object], field: str, words: str
                                      ) -> None:
    with pytest.raises(InvalidSubnet) as caught:
        parse_pool(**kwargs)  # type: ignore[arg-type]
    problem = caught.value.problems[0]
    assert problem.field == field and words in problem.message
    assert str(caught.value).startswith(field)


def test_every_problem_is_reported() -> None:
    with pytest.raises(InvalidSubnet) as caught:
        parse_pool("10.0.0.0/24", "10.9.9.9", ["10.0.1.0-10.0.1.9"], ["x"])
    assert [p.field for p in caught.value.problems] == [
        "spec.gateway", "spec.includeRanges[0]", "spec.excludeRanges[0]"]


def test_merge_and_subtract() -> None:
    r = AddressRange
    assert merge([r(5, 9), r(1, 3), r(4, 4), r(20, 30), r(25, 26)]) == [r(1, 9), r(20, 30)]
    assert subtract([r(1, 10)], [r(0, 1), r(5, 6), r(10, 12)]) == [r(2, 4), r(7, 9)]
    assert subtract([r(1, 3), r(7, 9)], [r(2, 8)]) == [r(1, 1), r(9, 9)]
