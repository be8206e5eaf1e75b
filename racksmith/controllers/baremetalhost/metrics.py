"""Prometheus metrics of the BareMetalHost controller, on an explicit registry.

Owns ``racksmith_baremetalhost_transitions_total{from_state,to_state}``,
``racksmith_baremetalhost_provisioner_calls_total{operation,outcome}``,
``racksmith_baremetalhost_throttled_total`` and
``racksmith_baremetalhost_errors_total{error_type}``. Pass the manager's
registry to have them on ``/metrics``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class BareMetalHostMetrics:
    """The controller's counters."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.transitions = Counter(
            "racksmith_baremetalhost_transitions_total",
            "Provisioning-state transitions committed.",
            ["from_state", "to_state"],
            registry=self.registry,
        )
        self.calls = Counter(
            "racksmith_baremetalhost_provisioner_calls_total",
            "Calls to the provisioner by operation and outcome.",
            ["operation", "outcome"],
            registry=self.registry,
        )
        self.throttled = Counter(
            "racksmith_baremetalhost_throttled_total",
            "Reconciles put off because the host had used its provisioner calls "
            "for the minute.",
            registry=self.registry,
        )
        self.errors = Counter(
            "racksmith_baremetalhost_errors_total",
            "Host errors recorded in status, by errorType.",
            ["error_type"],
            registry=self.registry,
        )

    def value(self, name: str, labels: dict[str, str]) -> float:
        """Current value of a sample (tests)."""
        return self.registry.get_sample_value(name, labels) or 0.0
