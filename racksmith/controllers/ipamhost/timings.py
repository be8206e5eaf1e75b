"""Waits of the IpamHost controller.

Owns ``IpamHostTimings``: the defaults, which the composition root may
override and tests shrink. Every interval is in seconds of the injected
``Clock``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IpamHostTimings:
    """How often the IpamHost controller looks again without an event."""

    pending_retry: float = 30.0
    """Re-check a host Pending on addresses this often (a Subnet event comes sooner)."""

    def __post_init__(self) -> None:
        if self.pending_retry <= 0:
            raise ValueError("pending_retry must be > 0")
