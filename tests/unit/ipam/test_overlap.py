"""Overlapping subnets: the older accepted one wins, deterministically."""

from __future__ import annotations

import pytest

from racksmith.ipam.overlap import SubnetCidr, overlapping


def s(name: str, cidr: str, created: str = "2026-01-01T00:00:00Z", ns: str = "default",
      valid: bool = True) -> SubnetCidr:
    return SubnetCidr(ns, name, created, cidr, valid)


A = s("a", "10.0.0.0/16", "2026-01-01T00:00:00Z")
B = s("b", "10.0.5.0/24", "2026-01-02T00:00:00Z")
C = s("c", "10.0.5.128/25", "2026-01-03T00:00:00Z")
D = s("d", "10.1.0.0/16", "2026-01-04T00:00:00Z")


@pytest.mark.parametrize(
    ("subject", "others", "expected"),
    [
        (A, [A, B, C, D], []),
        (B, [A, B, C, D], [A]),
        (C, [A, B, C, D], [A]),  # B is rejected itself, so only A blocks C
        (C, [B, C], [B]),
        (D, [A, B, C, D], []),
        (s("v6", "fd00::/64"), [A, s("v6b", "fd00::/48", "2025-01-01T00:00:00Z")],
         [s("v6b", "fd00::/48", "2025-01-01T00:00:00Z")]),
        (s("x", "10.0.0.0/8", "2027-01-01T00:00:00Z"), [A, D], [A, D]),
        (s("bad", "nope"), [A], []),
        (B, [s("a", "10.0.0.0/16", valid=False)], []),
        (B, [s("z", "10.0.5.0/24", "2026-01-02T00:00:00Z", ns="other")],
         []),  # same age: "default" < "other", so b is the older one
        (s("b2", "10.0.5.0/24", "2026-01-02T00:00:00Z", ns="zz"),
         [s("b", "10.0.5.0/24", "2026-01-02T00:00:00Z")],
         [s("b", "10.0.5.0/24", "2026-01-02T00:00:00Z")]),
    ],
)
def test_overlapping(subject: SubnetCidr, others: list[SubnetCidr],
                     expected: list[SubnetCidr]) -> None:
    assert overlapping(subject, others) == expected


def test_names_in_messages() -> None:
    assert str(A) == "default/a (10.0.0.0/16)"
