"""Kubernetes quantities as byte counts, for the disk-layout planner.

Owns the conversion of ``Quantity`` values ("100Gi", "500M", 1024, "1e9")
to integer bytes (rounded up) and back to a short human form for messages.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}

MiB = 2**20
GiB = 2**30


def to_bytes(value: int | str) -> int:
    """``value`` in bytes, rounded up; raises ValueError on a malformed quantity."""
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"negative size {value}")
        return value
    text = value.strip()
    number: Decimal
    try:
        if text[-2:] in _BINARY:
            number = Decimal(text[:-2]) * _BINARY[text[-2:]]
        elif text and text[-1] in _DECIMAL and not text[-1].isdigit():
            number = Decimal(text[:-1]) * _DECIMAL[text[-1]]
        else:
            number = Decimal(text)
    except (InvalidOperation, IndexError):
        raise ValueError(f"{value!r} is not a quantity") from None
    if number < 0 or not number.is_finite():
        raise ValueError(f"{value!r} is not a non-negative size")
    return math.ceil(number)


def human(size: int) -> str:
    """A short binary rendering of ``size`` bytes for messages ("100Gi", "1.5Ti")."""
    for suffix, unit in (("Ti", 2**40), ("Gi", GiB), ("Mi", MiB), ("Ki", 2**10)):
        if size >= unit:
            amount = size / unit
            text = f"{amount:.2f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return f"{size}B"
