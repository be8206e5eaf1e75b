"""Kinds of the ``lcm.racksmith.io`` group that drive node configuration and updates.

Owns LCMMachine (the state items one host's agent must apply, and what it
reports back) and the update-control kinds that follow MOSK:
ClusterUpdatePlan (a step-by-step, operator-commenced update),
UpdateGroup (which machines update together), UpdateAutoPause (alerts that
pause a plan) and GracefulRebootRequest. The maintenance locks and
requests of the same group live in ``maintenance``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
)
from racksmith.kinds.cluster import StateItem
from racksmith.kinds.common import Condition, LocalObjectReference, conditions_field

GROUP = "lcm.racksmith.io"
CATEGORIES = ("racksmith", "lcm")


# --- LCMMachine ----------------------------------------------------------------


class StateItemState(DocEnum):
    """Outcome of applying one state item."""

    PENDING = "Pending", "Not applied yet."
    RUNNING = "Running", "Being applied."
    APPLIED = "Applied", "Applied successfully with the current hash."
    FAILED = "Failed", "Applying failed; see error. Retried with back-off."


class LCMMachinePhase(DocEnum):
    """Summary of the agent's progress on the host."""

    PENDING = "Pending", "No agent has reported yet."
    DEPLOYING = "Deploying", "State items are being applied."
    READY = "Ready", "Every state item is applied with its current hash."
    FAILED = "Failed", "A state item failed; see its error."


class LCMMachineSpec(RacksmithModel):
    """What the agent on one host must apply."""

    machine_ref: LocalObjectReference = Field(description="Machine (same namespace) served.")
    cluster_name: str = Field(description="Cluster of the machine.")
    release: str = Field(description="ClusterRelease the state items were rendered from.")
    state_items: list[StateItem] = Field(
        default_factory=list,
        description="Rendered state items for this machine's roles, in apply order.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    paused: bool = Field(
        default=False, description="Stop applying items (e.g. during maintenance)."
    )


class StateItemStatus(RacksmithModel):
    """What the agent did with one state item."""

    name: str = Field(description="Name of the state item.")
    hash: str | None = Field(default=None, description="Hash of the item's spec when applied.")
    state: StateItemState = Field(default=StateItemState.PENDING, description="Outcome.")
    changed: bool | None = Field(default=None, description="True if applying changed the host.")
    error: str | None = Field(default=None, description="Error of the last attempt.")
    finished_at: datetime | None = Field(
        default=None, description="When the last attempt finished."
    )


class LCMMachineStatus(RacksmithModel):
    """What the agent reports."""

    phase: LCMMachinePhase | None = Field(default=None, description="Overall progress.")
    items: list[StateItemStatus] = Field(
        default_factory=list,
        description="Per state item outcome.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    heartbeat: datetime | None = Field(default=None, description="Last time the agent checked in.")
    agent_version: str | None = Field(default=None, description="Version of the agent.")
    release: str | None = Field(default=None, description="Release fully applied.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the agent last acted on."
    )
    reboot_required: bool | None = Field(
        default=None,
        description="An applied item needs a reboot (the host's /var/run/reboot-required "
        "exists); cleared by the next boot.",
    )
    conditions: list[Condition] = conditions_field()


class LCMMachine(Resource):
    """The configuration one host's agent must apply, and the agent's report."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="LCMMachine",
        plural="lcmmachines",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Cluster", ".spec.clusterName", description="Cluster."),
            PrinterColumn("Release", ".spec.release", description="Target release."),
            PrinterColumn("Phase", ".status.phase", description="Progress."),
            PrinterColumn("Heartbeat", ".status.heartbeat", "date", "Last agent check-in."),
            age_column(),
            PrinterColumn("Machine", ".spec.machineRef.name", description="Machine.", priority=1),
            PrinterColumn("Agent", ".status.agentVersion", description="Agent.", priority=1),
        ),
    )

    spec: LCMMachineSpec = Field(description="What to apply.")
    status: LCMMachineStatus | None = Field(default=None, description="Agent report.")


def lcm_change(obj: Mapping[str, Any]) -> Any:
    """What of a raw LCMMachine tells a change: its spec, generation and
    status without the agent's ``heartbeat`` (written every ``heartbeat``
    seconds by an idle agent), for ``racksmith.runtime.keys.on_change``."""
    status = dict(obj.get("status") or {})
    status.pop("heartbeat", None)
    return (obj.get("spec"), (obj.get("metadata") or {}).get("generation"),
            repr(sorted(status.items())))


# --- ClusterUpdatePlan ---------------------------------------------------------


class Impact(DocEnum):
    """How much a step disturbs users or workloads."""

    NONE = "none", "No visible effect."
    MINOR = "minor", "Short interruptions, retries succeed."
    MAJOR = "major", "Noticeable downtime or restarts."


class Granularity(DocEnum):
    """What a step updates at a time."""

    CLUSTER = "cluster", "The step acts on the cluster as a whole."
    MACHINE = "machine", "The step acts machine by machine."


class StepImpact(RacksmithModel):
    """Expected impact of a step."""

    users: Impact = Field(default=Impact.NONE, description="Impact on API and UI users.")
    workloads: Impact = Field(default=Impact.NONE, description="Impact on workloads.")
    info: str | None = Field(default=None, description="Details.")


class StepDuration(RacksmithModel):
    """Expected duration of a step."""

    estimated: str | None = Field(default=None, description="Estimate as a duration, e.g. 1h30m.")
    info: str | None = Field(default=None, description="What the estimate depends on.")


class UpdateStep(RacksmithModel):
    """One step of an update plan."""

    id: str = Field(description="Stable step id.")
    name: str = Field(description="Short name.")
    description: str | None = Field(default=None, description="What the step does.")
    constraints: str | None = Field(default=None, description="What must hold before it starts.")
    impact: StepImpact | None = Field(default=None, description="Expected impact.")
    duration: StepDuration | None = Field(default=None, description="Expected duration.")
    granularity: Granularity = Field(default=Granularity.CLUSTER, description="Unit of work.")
    commence: bool = Field(default=False, description="Set to true to let the step start.")


class PlanPhase(DocEnum):
    """State of an update plan."""

    NOT_STARTED = "NotStarted", "No step has commenced."
    IN_PROGRESS = "InProgress", "A step is running."
    AUTO_PAUSED = "AutoPaused", "An UpdateAutoPause alert fires; un-started steps lost commence."
    COMPLETED = "Completed", "Every step finished."
    FAILED = "Failed", "A step failed; see its message."


class StepPhase(DocEnum):
    """State of one step."""

    NOT_STARTED = "NotStarted", "Waiting for commence or for earlier steps."
    SCHEDULED = "Scheduled", "Commenced; starts after the previous step."
    IN_PROGRESS = "InProgress", "Running."
    AUTO_PAUSED = "AutoPaused", "Held because an alert fires."
    STUCK = "Stuck", "No progress for longer than expected; see message."
    COMPLETED = "Completed", "Finished."


class StepStatus(RacksmithModel):
    """Progress of one step."""

    id: str = Field(description="Step id.")
    phase: StepPhase = Field(default=StepPhase.NOT_STARTED, description="State of the step.")
    message: str | None = Field(default=None, description="Details.")
    progress: int | None = Field(default=None, ge=0, le=100, description="Percent done.")
    started_at: datetime | None = Field(default=None, description="Start time.")
    finished_at: datetime | None = Field(default=None, description="End time.")


class MachineProgress(RacksmithModel):
    """Update progress of one machine."""

    name: str = Field(description="Machine name.")
    step_id: str | None = Field(default=None, description="Step updating it.")
    phase: StepPhase = Field(default=StepPhase.NOT_STARTED, description="State on this machine.")
    message: str | None = Field(
        default=None, description="Details (e.g. a drain blocked by a PDB)."
    )
    progress: int | None = Field(default=None, ge=0, le=100, description="Percent done.")
    state: str | None = Field(
        default=None,
        description="Where the machine is in the node maintenance flow (Requested, "
        "WaitingForLocks, Draining, Blocked, LockFailed, Applying, Rebooting, WaitingForNode, "
        "Uncordoning, Done).",
    )
    started_at: datetime | None = Field(default=None, description="When its maintenance began.")
    finished_at: datetime | None = Field(default=None, description="When it ended.")


class ClusterUpdatePlanSpec(RacksmithModel):
    """An update of one cluster, split into steps the operator commences."""

    cluster: str = Field(description="Cluster (same namespace) to update.")
    source: str = Field(description="ClusterRelease the cluster runs.")
    target: str = Field(description="ClusterRelease to move to.")
    release_notes: str | None = Field(
        default=None, description="Link to or text of the release notes."
    )
    steps: list[UpdateStep] = Field(
        default_factory=list,
        description="Steps in execution order.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]},
    )


class ClusterUpdatePlanStatus(RacksmithModel):
    """Progress of the plan."""

    phase: PlanPhase | None = Field(default=None, description="State of the plan.")
    started_at: datetime | None = Field(default=None, description="When the first step started.")
    eta: datetime | None = Field(default=None, description="Estimated completion time.")
    steps: list[StepStatus] = Field(
        default_factory=list,
        description="Per step progress.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]},
    )
    machines: list[MachineProgress] = Field(
        default_factory=list,
        description="Per machine progress.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    firing_alerts: list[str] = Field(
        default_factory=list, description="UpdateAutoPause alerts firing now."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    backup: str | None = Field(
        default=None,
        description="The ControlPlaneBackup taken before the first step commenced (the "
        "step starts only once it completed).",
    )
    conditions: list[Condition] = conditions_field()


class ClusterUpdatePlan(Resource):
    """A cluster update as a list of steps, each started only when commenced."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="ClusterUpdatePlan",
        plural="clusterupdateplans",
        namespaced=True,
        categories=(*CATEGORIES, "maintenance"),
        printer_columns=(
            PrinterColumn("Cluster", ".spec.cluster", description="Cluster."),
            PrinterColumn("Source", ".spec.source", description="From release."),
            PrinterColumn("Target", ".spec.target", description="To release."),
            PrinterColumn("Phase", ".status.phase", description="State."),
            PrinterColumn("ETA", ".status.eta", "date", "Estimated completion."),
            age_column(),
        ),
    )

    spec: ClusterUpdatePlanSpec = Field(description="The plan.")
    status: ClusterUpdatePlanStatus | None = Field(default=None, description="Progress.")


# --- UpdateGroup, UpdateAutoPause, GracefulRebootRequest -------------------------


class UpdateGroupSpec(RacksmithModel):
    """How a set of machines is updated."""

    index: int = Field(ge=0, description="Groups run in ascending index; equal indices together.")
    concurrent_updates: int = Field(
        default=1, ge=1, description="Machines of the group updated at once."
    )
    reboot_if_update_requires: bool = Field(
        default=True, description="Reboot machines when the update needs it."
    )


class UpdateGroup(Resource):
    """A set of machines updated together.

    Machines join by the label ``lcm.racksmith.io/update-group: <name>``.
    Each cluster has ``<cluster>-control`` (concurrency 1, first) and
    ``<cluster>-default`` (concurrency = maxWorkerUpgradeCount).
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="UpdateGroup",
        plural="updategroups",
        namespaced=True,
        categories=(*CATEGORIES, "maintenance"),
        printer_columns=(
            PrinterColumn("Index", ".spec.index", "integer", "Order."),
            PrinterColumn("Concurrency", ".spec.concurrentUpdates", "integer", "Parallelism."),
            PrinterColumn(
                "Reboot", ".spec.rebootIfUpdateRequires", "boolean", "Reboot when required."
            ),
            age_column(),
        ),
    )

    spec: UpdateGroupSpec = Field(description="Update policy.")


class UpdateAutoPauseSpec(RacksmithModel):
    """Alerts that pause updates."""

    alerts: list[str] = Field(
        default_factory=list, description="Alert names; while one fires, plans auto-pause."
    )


class UpdateAutoPause(Resource):
    """Alerts that pause the update plans of its namespace while they fire."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="UpdateAutoPause",
        plural="updateautopauses",
        namespaced=True,
        categories=(*CATEGORIES, "maintenance"),
        printer_columns=(age_column(),),
    )

    spec: UpdateAutoPauseSpec = Field(
        default_factory=UpdateAutoPauseSpec, description="Pausing alerts."
    )


class GracefulRebootRequestSpec(RacksmithModel):
    """Which machines to reboot."""

    machines: list[str] = Field(
        default_factory=list, description="Machine names; empty means every machine."
    )


class GracefulRebootRequestStatus(RacksmithModel):
    """Progress of the reboots."""

    phase: PlanPhase | None = Field(default=None, description="InProgress, Completed or Failed.")
    machines: list[MachineProgress] = Field(
        default_factory=list,
        description="Per machine progress.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    conditions: list[Condition] = conditions_field()


class GracefulRebootRequest(Resource):
    """Reboot machines one by one (cordon, drain, reboot, uncordon), in upgrade order.

    Its name is the name of the cluster (same namespace) whose machines reboot.
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="GracefulRebootRequest",
        plural="gracefulrebootrequests",
        namespaced=True,
        categories=(*CATEGORIES, "maintenance"),
        printer_columns=(
            PrinterColumn("Phase", ".status.phase", description="Progress."),
            age_column(),
        ),
    )

    spec: GracefulRebootRequestSpec = Field(
        default_factory=GracefulRebootRequestSpec, description="Machines to reboot."
    )
    status: GracefulRebootRequestStatus | None = Field(default=None, description="Progress.")


class BackupReason(DocEnum):
    """Why a backup was taken."""

    MANUAL = "Manual", "Asked for by a user (kubectl create)."
    SCHEDULED = "Scheduled", "racksmith up --backup-every."
    PRE_UPDATE = "PreUpdate", "Before the first step of a ClusterUpdatePlan."


class BackupPhase(DocEnum):
    """State of a backup."""

    PENDING = "Pending", "Not taken yet."
    RUNNING = "Running", "Being taken."
    COMPLETED = "Completed", "Taken and verified; the file is in the backup folder."
    FAILED = "Failed", "Could not be taken; see the message."


class PlanReference(RacksmithModel):
    """A ClusterUpdatePlan."""

    namespace: str = Field(description="Namespace of the plan.")
    name: str = Field(description="Name of the plan.")


class BackupClusterReference(RacksmithModel):
    """A managed Cluster whose own store is backed up."""

    namespace: str = Field(description="Namespace of the Cluster.")
    name: str = Field(description="Name of the Cluster.")


class ControlPlaneBackupSpec(RacksmithModel):
    """What the backup is for."""

    reason: BackupReason = Field(default=BackupReason.MANUAL, description="Why it is taken.")
    plan_ref: PlanReference | None = Field(
        default=None, description="The plan it was taken before (reason PreUpdate)."
    )
    cluster: BackupClusterReference | None = Field(
        default=None,
        description="A managed cluster: back up its own store (an etcd snapshot of its "
        "stacked members) instead of the management plane's.",
    )


class ControlPlaneBackupStatus(RacksmithModel):
    """The backup file and what it holds."""

    phase: BackupPhase | None = Field(default=None, description="State of the backup.")
    file: str | None = Field(default=None, description="Path of the backup file.")
    size: int | None = Field(default=None, ge=0, description="Size of the file in bytes.")
    sha256: str | None = Field(default=None, description="SHA-256 of the file.")
    resource_version: int | None = Field(
        default=None, ge=0, description="The API store's resourceVersion in the backup."
    )
    objects: int | None = Field(default=None, ge=0, description="Objects in the backup.")
    encrypted: bool | None = Field(default=None, description="Encrypted with the key file.")
    started_at: datetime | None = Field(default=None, description="When it started.")
    completed_at: datetime | None = Field(default=None, description="When it was written.")
    verified_at: datetime | None = Field(
        default=None, description="When it was last verified (checksums, integrity)."
    )
    message: str | None = Field(default=None, description="Why it failed.")


class ControlPlaneBackup(Resource):
    """One backup of the control plane (the API store, Ironic's database, the PKI and
    the tokens), taken by ``racksmith up``: create one to take a backup now."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="ControlPlaneBackup",
        plural="controlplanebackups",
        namespaced=False,
        short_names=("cpb",),
        categories=(*CATEGORIES, "backup"),
        printer_columns=(
            PrinterColumn("Phase", ".status.phase", description="State."),
            PrinterColumn("Reason", ".spec.reason", description="Why it was taken."),
            PrinterColumn("Cluster", ".spec.cluster.name",
                          description="The managed cluster whose store it holds."),
            PrinterColumn("RV", ".status.resourceVersion", "integer",
                          "The store's resourceVersion in the backup."),
            PrinterColumn("Size", ".status.size", "integer", "Bytes."),
            PrinterColumn("File", ".status.file", description="The backup file.", priority=1),
            age_column(),
        ),
    )

    spec: ControlPlaneBackupSpec = Field(
        default_factory=ControlPlaneBackupSpec, description="Why it is taken.",
        # A backup made by hand may have no spec at all: the default {} lets
        # the server (and kube-apiserver) default spec.reason inside it.
        json_schema_extra={"default": {}},
    )
    status: ControlPlaneBackupStatus | None = Field(default=None, description="The file.")
