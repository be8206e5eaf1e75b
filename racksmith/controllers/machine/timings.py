"""Waits of the Machine controller.

Owns ``MachineTimings``: the defaults, which the composition root may
override and tests shrink. Every interval is in seconds of the injected
``Clock``. The planner reads them from its input (``Observed.timings``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineTimings:
    """How long the Machine controller waits before looking again without an event."""

    retry_missing: float = 10.0
    """Look again for a Cluster, ClusterRelease or agent Secret that is missing."""
    retry_no_host: float = 30.0
    """Look again for a host when none matches (BareMetalHost events come sooner)."""
    retry_drain: float = 10.0
    """Evict again after a PodDisruptionBudget refused an eviction."""
    retry_terminating: float = 2.0
    """Look again at pods that are terminating on the node being drained."""
    resync: float = 300.0
    """Re-check a Machine at rest (Ready) this often."""
    cluster_unreachable: float = 10.0
    """Look again at a Machine whose Node is unknown (its cluster's API cannot be reached)."""
    shared_secrets: float = 10.0
    """How long the Secrets every Machine reads — the agent Secret and its
    cluster's PKI Secrets — are kept once read (a Secret changed in that
    time is used after it; one not found is read again every time). 0:
    read live on every reconcile. A Machine's own user-data Secret is
    always read live."""
    agent_token_seconds: int = 365 * 24 * 3600
    """Life of the token written into a host's user data (bound to its
    LCMMachine, so deleting the machine revokes it; the agent renews it when
    a fifth of its life is left)."""

    def __post_init__(self) -> None:
        if min(self.retry_missing, self.retry_no_host, self.retry_drain,
               self.retry_terminating, self.resync, self.cluster_unreachable) <= 0:
            raise ValueError("machine timings must be > 0")
        if self.shared_secrets < 0:
            raise ValueError("shared_secrets must be >= 0")
        if self.agent_token_seconds < 600:
            raise ValueError("agent_token_seconds must be at least 600 (the API's minimum)")
