"""Waits of the Volume controller.

Owns ``VolumeTimings``: the defaults, which the composition root may
override and tests shrink. Every interval is in seconds of the injected
``Clock``. The planner reads them from its input (``Observed.timings``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VolumeTimings:
    """How often the Volume controller looks again without an event."""

    job_poll: float = 2.0
    """Look at a Volume whose agent job runs this often (its events come sooner)."""
    resync: float = 300.0
    """Re-check a Volume at rest (Available, Bound or Failed PV) this often."""

    def __post_init__(self) -> None:
        if self.job_poll <= 0 or self.resync <= 0:
            raise ValueError("volume timings must be > 0")
