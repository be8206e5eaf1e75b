"""Format checkers of CRD schemas."""

from __future__ import annotations

import pytest

from racksmith.apiserver.schema import check_format

CASES = [
    ("quantity", "1", True), ("quantity", "100m", True), ("quantity", "1.5Gi", True),
    ("quantity", "-2k", True), ("quantity", "+.5", True), ("quantity", "1e3", True),
    ("quantity", "1E-3", True), ("quantity", "5.", True), ("quantity", "1E", True),
    ("quantity", "1Ki", True), ("quantity", "", False), ("quantity", "1GB", False),
    ("quantity", "Gi", False), ("quantity", "1.2.3", False), ("quantity", "1 Gi", False),
    ("quantity", "1ki", False),
    ("date-time", "2024-02-29T12:00:00Z", True), ("date-time", "2024-02-29T12:00:00.123Z", True),
    ("date-time", "2024-02-29t12:00:00+02:00", True), ("date-time", "2023-02-29T12:00:00Z", False),
    ("date-time", "2024-01-01T25:00:00Z", False), ("date-time", "2024-01-01", False),
    ("date-time", "2024-01-01T10:00:00", False),
    ("date", "2024-01-31", True), ("date", "2024-02-30", False), ("date", "24-01-01", False),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True), ("uuid", "123e4567", False),
    ("uuid4", "123e4567-e89b-42d3-a456-426614174000", True),
    ("uuid4", "123e4567-e89b-12d3-a456-426614174000", False),
    ("ipv4", "10.0.0.1", True), ("ipv4", "256.0.0.1", False), ("ipv4", "::1", False),
    ("ipv4", "010.0.0.1", True),
    ("ipv6", "::1", True), ("ipv6", "fe80::1%eth0", False), ("ipv6", "10.0.0.1", False),
    ("cidr", "10.0.0.0/8", True), ("cidr", "10.0.0.1/33", False), ("cidr", "fd00::/64", True),
    ("cidr", "10.0.0.0", False),
    ("hostname", "example.com", True), ("hostname", "a-b.c", True), ("hostname", "-a.com", False),
    ("hostname", "a_b.com", False), ("hostname", "a" * 64, False),
    ("byte", "aGVsbG8=", True), ("byte", "", True), ("byte", "not base64!", False),
    ("mac", "00:1a:2b:3c:4d:5e", True), ("mac", "00:1a:2b", False),
    ("email", "a@b.c", True), ("email", "nope", False),
    ("uri", "https://x.io/a", True), ("uri", "/relative", False),
    ("duration", "1h30m", True), ("duration", "3d", True), ("duration", "soon", False),
    ("hexcolor", "#fff", True), ("hexcolor", "#ggg", False),
    ("password", "anything", True), ("made-up-format", "anything", True),
]


@pytest.mark.parametrize(("fmt", "value", "ok"), CASES)
def test_format(fmt: str, value: str, ok: bool) -> None:
    assert check_format(fmt, value) is ok
