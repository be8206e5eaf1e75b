"""The node maintenance API of ``lcm.racksmith.io`` (MOSK's kinds, fields, states).

Owns ClusterMaintenanceRequest and NodeMaintenanceRequest (created by LCM
to announce maintenance), ClusterWorkloadLock and NodeWorkloadLock (held by
workload controllers; LCM proceeds only when they are inactive) and
NodeDeletionRequest. All are cluster-scoped.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
)

GROUP = "lcm.racksmith.io"
CATEGORIES = ("racksmith", "lcm", "maintenance")


class MaintenanceScope(DocEnum):
    """What a maintenance request may do."""

    OS = "os", "Drain, apply the update, and reboot if it requires one."
    DRAIN = "drain", "Drain only; no reboot."


class LockState(DocEnum):
    """State of a workload lock."""

    ACTIVE = "active", "LCM must not touch the node or cluster."
    INACTIVE = "inactive", "The controller moved its workload away; LCM may proceed."
    FAILED = "failed", "The controller cannot release the lock; see errorMessage."


class InactivationProgress(RacksmithModel):
    """How far a controller is in releasing its lock."""

    description: str | None = Field(default=None, description="What the controller is doing.")
    percentage: int | None = Field(default=None, ge=0, le=100, description="Percent done.")


class WorkloadLockStatus(RacksmithModel):
    """State of a workload lock, written by its controller."""

    state: LockState = Field(default=LockState.ACTIVE, description="Lock state.")
    error_message: str | None = Field(default=None, description="Why the lock failed.")
    release: str | None = Field(
        default=None, description="Release of the maintenance the lock was released for."
    )
    inactivation_progress: InactivationProgress | None = Field(
        default=None, description="Progress of the release."
    )


def _lock_columns(*extra: PrinterColumn) -> tuple[PrinterColumn, ...]:
    return (
        PrinterColumn("Controller", ".spec.controllerName", description="Lock holder."),
        *extra,
        PrinterColumn("State", ".status.state", description="Lock state."),
        age_column(),
        PrinterColumn("Error", ".status.errorMessage", description="Failure.", priority=1),
    )


class ClusterMaintenanceRequestSpec(RacksmithModel):
    """Announced cluster maintenance."""

    scope: MaintenanceScope = Field(description="What the maintenance may do.")
    release: str | None = Field(default=None, description="Release being rolled out.")


class ClusterMaintenanceRequest(Resource):
    """LCM announces maintenance of the cluster; deleting it ends the maintenance."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="ClusterMaintenanceRequest",
        plural="clustermaintenancerequests",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Scope", ".spec.scope", description="What it may do."),
            PrinterColumn("Release", ".spec.release", description="Release."),
            age_column(),
        ),
    )

    spec: ClusterMaintenanceRequestSpec = Field(description="The maintenance.")


class NodeMaintenanceRequestSpec(RacksmithModel):
    """Announced node maintenance."""

    node_name: str = Field(description="Node to maintain.")
    scope: MaintenanceScope = Field(description="drain: drain only; os: drain, maybe reboot.")
    release: str | None = Field(default=None, description="Release being rolled out.")


class NodeMaintenanceRequest(Resource):
    """LCM announces maintenance of one node; deleting it ends the maintenance."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="NodeMaintenanceRequest",
        plural="nodemaintenancerequests",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Node", ".spec.nodeName", description="Node."),
            PrinterColumn("Scope", ".spec.scope", description="What it may do."),
            PrinterColumn("Release", ".spec.release", description="Release."),
            age_column(),
        ),
        selectable_fields=(".spec.nodeName",),
    )

    spec: NodeMaintenanceRequestSpec = Field(description="The maintenance.")


class ClusterWorkloadLockSpec(RacksmithModel):
    """Who holds the lock."""

    controller_name: str = Field(description="Workload controller holding the lock.")


class ClusterWorkloadLock(Resource):
    """A workload controller's veto on cluster maintenance (one per controller)."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="ClusterWorkloadLock",
        plural="clusterworkloadlocks",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=_lock_columns(),
    )

    spec: ClusterWorkloadLockSpec = Field(description="Lock holder.")
    status: WorkloadLockStatus | None = Field(default=None, description="Lock state.")


class NodeWorkloadLockSpec(RacksmithModel):
    """Who holds the lock, on which node."""

    controller_name: str = Field(description="Workload controller holding the lock.")
    node_name: str = Field(description="Node the lock protects.")
    node_deletion_request_supported: bool = Field(
        default=False, description="The controller handles NodeDeletionRequests for this node."
    )


class NodeWorkloadLock(Resource):
    """A workload controller's veto on maintenance of one node."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="NodeWorkloadLock",
        plural="nodeworkloadlocks",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=_lock_columns(
            PrinterColumn("Node", ".spec.nodeName", description="Protected node.")
        ),
        selectable_fields=(".spec.nodeName", ".spec.controllerName"),
    )

    spec: NodeWorkloadLockSpec = Field(description="Lock holder and node.")
    status: WorkloadLockStatus | None = Field(default=None, description="Lock state.")


class NodeDeletionRequestSpec(RacksmithModel):
    """Which node is going away."""

    node_name: str = Field(description="Node to delete.")


class NodeDeletionRequest(Resource):
    """Announces that a node will be deleted, so controllers can move workloads for good."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="NodeDeletionRequest",
        plural="nodedeletionrequests",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Node", ".spec.nodeName", description="Node."),
            age_column(),
        ),
        selectable_fields=(".spec.nodeName",),
    )

    spec: NodeDeletionRequestSpec = Field(description="The node.")
