"""Tunables of the BareMetalHost controller (intervals, back-off, call budget).

Owns the defaults; the composition root may override them and tests shrink
them. Every interval is in seconds of the injected ``Clock``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BareMetalHostSettings:
    """How often and how hard the controller talks to the provisioner."""

    poll_floor: float = 2.0
    """Never poll an operation in progress more often than this."""
    poll_default: float = 10.0
    """Poll interval when the provisioner suggests none."""
    steady_poll: float = 300.0
    """Re-check power and adoption of settled hosts this often."""
    error_backoff_base: float = 10.0
    """First retry after an error; doubles with ``status.errorCount``."""
    error_backoff_cap: float = 600.0
    """Longest wait between retries after errors."""
    backend_retry_base: float = 5.0
    """First retry while the backend is unreachable (doubling)."""
    backend_retry_cap: float = 120.0
    """Longest wait while the backend is unreachable."""
    jitter: float = 0.1
    """Relative jitter of every back-off."""
    calls_per_minute: int = 30
    """Provisioner calls allowed per host per minute (beyond: wait)."""
    delete_error_attempts: int = 3
    """Failed deprovision/power-off attempts after which a deletion goes on anyway."""

    def __post_init__(self) -> None:
        if self.calls_per_minute < 1:
            raise ValueError("calls_per_minute must be >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if self.poll_floor < 0 or self.error_backoff_cap < self.error_backoff_base:
            raise ValueError("invalid intervals")
