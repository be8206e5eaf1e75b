"""Waits of the LCM update controller.

Owns ``UpdateTimings``: the defaults, which the composition root may
override and tests shrink. Every interval is in seconds of the injected
``Clock``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from racksmith.planners.maintenance import MaintenanceTimings


@dataclass(frozen=True)
class UpdateTimings:
    """How often the update controller looks again, and its node flow's waits."""

    active_requeue: float = 5.0
    """Reconcile a cluster with an active plan at least this often (the node
    flow may ask sooner)."""
    sweep_period: float = 30.0
    """Run the node flow's hygiene sweep at most this often."""
    node_flow: MaintenanceTimings = field(default_factory=MaintenanceTimings)
    """The waits of the node maintenance flow, passed to the ``node_flow``
    factory (unused when the caller gives a ready flow)."""

    def __post_init__(self) -> None:
        if self.active_requeue <= 0 or self.sweep_period < 0:
            raise ValueError("update timings: active_requeue > 0, sweep_period >= 0")
