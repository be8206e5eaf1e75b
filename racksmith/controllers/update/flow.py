"""The seam to the node maintenance flow (one node, one owner).

Owns ``NodeFlow``, the protocol of the per-node executor the controller
drives (``racksmith.controllers.maintenance.flow.NodeMaintenance`` in
production, a fake in tests). The job and progress types are the flow
planner's (``racksmith.planners.maintenance``).
"""

from __future__ import annotations

from typing import Protocol

from racksmith.planners.maintenance import NodeJob, NodeProgress, RebootPolicy

__all__ = ["NodeFlow", "NodeJob", "NodeProgress", "RebootPolicy"]


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
