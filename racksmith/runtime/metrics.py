"""Prometheus metrics of the runtime, registered on an explicit registry.

One ``RuntimeMetrics`` per registry, shared by every controller of a process
(each series is labelled with the controller name). Never touches
prometheus_client's global registry.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

RESULTS = ("done", "requeue_after", "conflict", "error", "permanent_error")
"""Values of the ``result`` label of ``racksmith_reconcile_total``."""


class RuntimeMetrics:
    """Reconcile counters, durations, errors, queue depth and leadership."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.reconciles = Counter(
            "racksmith_reconcile_total",
            "Reconciles by controller and result.",
            ["controller", "result"],
            registry=self.registry,
        )
        self.errors = Counter(
            "racksmith_reconcile_errors_total",
            "Reconciles that raised (temporary, permanent or unexpected errors).",
            ["controller"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "racksmith_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "racksmith_workqueue_depth",
            "Keys ready in the work queue.",
            ["controller"],
            registry=self.registry,
        )
        self.queue_adds = Counter(
            "racksmith_workqueue_adds_total",
            "Keys received from the controller's sources.",
            ["controller"],
            registry=self.registry,
        )
        self.retries = Counter(
            "racksmith_workqueue_retries_total",
            "Keys requeued with backoff after an error.",
            ["controller"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "racksmith_leader_is_leader",
            "1 while this process holds the leader lease.",
            ["lease"],
            registry=self.registry,
        )

    def track_queue_depth(self, controller: str, depth: Callable[[], float]) -> None:
        """Report ``depth()`` as the queue depth of ``controller`` at scrape time."""
        self.queue_depth.labels(controller=controller).set_function(depth)

    def init_controller(self, controller: str) -> None:
        """Create every series of ``controller`` at zero so they are scraped early."""
        for result in RESULTS:
            self.reconciles.labels(controller=controller, result=result)
        self.errors.labels(controller=controller)
        self.queue_adds.labels(controller=controller)
        self.retries.labels(controller=controller)
        self.duration.labels(controller=controller)

    def count(self, controller: str, result: str) -> float:
        """Current value of ``racksmith_reconcile_total`` (handy in tests)."""
        value = self.registry.get_sample_value(
            "racksmith_reconcile_total", {"controller": controller, "result": result}
        )
        return value or 0.0

    def error_count(self, controller: str) -> float:
        value = self.registry.get_sample_value(
            "racksmith_reconcile_errors_total", {"controller": controller}
        )
        return value or 0.0
