"""Names the LCM update controller shares with the rest of Racksmith.

Owns the controller's field manager and Event component, the labels and annotations of
``docs/design/maintenance-contracts.md`` ("Names, labels, annotations") it
reads or writes, the node flow's state names as the controller sees them,
and the condition types of a ClusterUpdatePlan. The resources it reads and
writes are in ``racksmith.runtime.resources``.
"""

from __future__ import annotations

from racksmith.kinds import lcm, maintenance
from racksmith.planners import maintenance as maintenance_planner
from racksmith.planners.maintenance import NodeState

PLAN_API_VERSION = lcm.ClusterUpdatePlan.info.api_version
GROUP_API_VERSION = lcm.UpdateGroup.info.api_version
CMR_API_VERSION = maintenance.ClusterMaintenanceRequest.info.api_version
FIELD_MANAGER = "racksmith-update"
CONTROLLER_NAME = "update"
COMPONENT = "racksmith-update"
"""The source of its Events."""

# Labels, annotations and flow states: the node flow planner's (the contract's strings).
OWNER_LABEL = maintenance_planner.OWNER_LABEL
CLUSTER_LABEL = maintenance_planner.CLUSTER_LABEL
MACHINE_LABEL = maintenance_planner.MACHINE_LABEL
NAMESPACE_ANNOTATION = maintenance_planner.NAMESPACE_ANNOTATION
RELEASE_ANNOTATION = maintenance_planner.RELEASE_ANNOTATION
UPDATE_GROUP_LABEL = maintenance_planner.UPDATE_GROUP_LABEL
BLOCKED = NodeState.BLOCKED.value
LOCK_FAILED = NodeState.LOCK_FAILED.value
READY_TO_FINISH = NodeState.READY_TO_FINISH.value
DONE = "Done"
"""What the plan's status records for a finished machine."""
plan_owner = maintenance_planner.plan_owner
hashed_owner_prefix = maintenance_planner.hashed_owner_prefix
PLAN_OWNER_PREFIX = maintenance_planner.PLAN_OWNER_PREFIX
reboot_owner = maintenance_planner.reboot_owner

# Plan condition types.
COND_BLOCKED = "Blocked"
COND_LOCK_FAILED = "LockFailed"
COND_AUTO_PAUSED = "AutoPaused"
COND_ALERTS_REACHABLE = "AlertSourceReachable"
COND_BACKUP = "BackupTaken"
"""A plan's pre-update ControlPlaneBackup completed (the first step waits for it)."""
BACKUP_API_VERSION = lcm.ControlPlaneBackup.info.api_version


def backup_name(namespace: str, plan: str, uid: str) -> str:
    """The ControlPlaneBackup taken before plan ``namespace/plan`` (of uid ``uid``) starts."""
    return f"pre-update-{namespace}-{plan}-{uid[:8]}"[:253]


def plan_name(cluster_name: str, target: str) -> str:
    """Name of the ClusterUpdatePlan moving ``cluster_name`` to ``target``."""
    return f"{cluster_name}-{target}"


def cmr_name(namespace: str, cluster_name: str) -> str:
    """Name of the ClusterMaintenanceRequest of a cluster (cluster-scoped)."""
    return f"{namespace}.{cluster_name}"


def control_group(cluster_name: str) -> str:
    """The default UpdateGroup of a cluster's master/etcd machines."""
    return f"{cluster_name}-control"


def default_group(cluster_name: str) -> str:
    """The default UpdateGroup of a cluster's other machines."""
    return f"{cluster_name}-default"
