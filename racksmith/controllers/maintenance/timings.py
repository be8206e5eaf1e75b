"""Waits of the GracefulRebootRequest controller.

Owns ``GracefulRebootTimings``: the defaults, which the composition root may
override and tests shrink. Every interval is in seconds of the injected
``Clock``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from racksmith.planners.maintenance import MaintenanceTimings


@dataclass(frozen=True)
class GracefulRebootTimings:
    """How often the graceful reboot controller looks again, and its node flow's waits."""

    poll: float = 5.0
    """Reconcile a request in progress at least this often (the node flow may ask sooner)."""
    default_drain_timeout: float = 600.0
    """Drain timeout when the request's Cluster cannot be read (else the Cluster's
    ``spec.update.drainTimeoutSeconds``): after it, a refused drain is Blocked."""
    node_flow: MaintenanceTimings = field(default_factory=MaintenanceTimings)
    """The waits of the node maintenance flow this controller runs."""

    def __post_init__(self) -> None:
        if self.poll <= 0 or self.default_drain_timeout <= 0:
            raise ValueError("graceful reboot timings must be > 0")
