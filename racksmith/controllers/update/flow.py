"""The seam to the node maintenance flow (one node, one owner).

Owns ``NodeFlow``, the protocol of the per-node executor the controller
drives, and ``NodeFlowFactory``, how the composition root hands the
controller one (``racksmith.controllers.maintenance.NodeMaintenance`` in
production, which is itself a factory; a fake in tests). The controller
never imports the maintenance package: controllers do not import one
another. The job and progress types are the flow planner's
(``racksmith.planners.maintenance``).
"""

from __future__ import annotations

from typing import Any, Protocol

from racksmith.clock import Clock
from racksmith.planners.maintenance import (
    MaintenanceTimings,
    NodeJob,
    NodeProgress,
    RebootPolicy,
)
from racksmith.runtime.planes import ClusterPlane

__all__ = ["NodeFlow", "NodeFlowFactory", "NodeJob", "NodeProgress", "RebootPolicy"]


class NodeFlow(Protocol):
    """The per-node maintenance executor; every method may be called repeatedly."""

    async def advance(self, job: NodeJob) -> NodeProgress:
        """Perform the next write(s) of ``job`` and say where the node is."""
        ...

    async def finish(self, job: NodeJob) -> None:
        """End ``job``'s maintenance (delete its NodeMaintenanceRequest)."""
        ...

    async def sweep(self, owners_alive: set[str]) -> list[str]:
        """Clean up after crashes and owners not in ``owners_alive``; what was done."""
        ...


class NodeFlowFactory(Protocol):
    """Builds the node flow for an API client, with the controller's clock and
    the flow's waits (``UpdateTimings.node_flow``) and where the clusters'
    node-side objects are (``plane``; None: the management API). The
    ``NodeMaintenance`` class is one."""

    def __call__(self, api_client: Any, *, clock: Clock,
                 timings: MaintenanceTimings, plane: ClusterPlane | None) -> NodeFlow:
        ...
