"""Kinds of the ``cluster.racksmith.io`` group: clusters, their machines, releases.

Owns Cluster (networks, API endpoint, target release), Machine (one host
joined as a node with roles) and ClusterRelease (the ordered state items
that install or upgrade a node, per role), plus the shared ``StateItem``
and ``Role`` types that LCMMachine renders. Node roles follow MetalK8s.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
    condition_column,
)
from racksmith.kinds.common import Condition, LabelSelector, ObjectReference, conditions_field
from racksmith.kinds.metal import Image

GROUP = "cluster.racksmith.io"
CATEGORIES = ("racksmith", "lifecycle")


class Role(DocEnum):
    """A node role; roles combine freely and every role implies ``node``."""

    MASTER = "master", "Runs the control-plane services."
    ETCD = "etcd", "Runs an etcd member."
    NODE = "node", "Runs workloads."
    INFRA = "infra", "Runs infrastructure services (monitoring, UIs)."
    BOOTSTRAP = "bootstrap", "Holds the package repository, registry and config (one per cluster)."


_ROLES_SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}


# --- Cluster -------------------------------------------------------------------


class ClusterNetworks(RacksmithModel):
    """Address ranges of the cluster."""

    control_plane_cidrs: list[str] = Field(
        default_factory=list,
        alias="controlPlaneCIDRs",
        description="Networks tried in order to find each host's control-plane address.",
    )
    workload_plane_cidrs: list[str] = Field(
        default_factory=list,
        alias="workloadPlaneCIDRs",
        description="Networks tried in order to find each host's workload-plane address.",
    )
    pods: str = Field(default="10.233.0.0/16", description="Pod network.")
    services: str = Field(default="10.96.0.0/12", description="Service network.")


class APIEndpoint(RacksmithModel):
    """An address and port where the cluster's Kubernetes API answers (Cluster API's
    ``APIEndpoint``)."""

    host: str = Field(min_length=1, max_length=253, description="IP address or DNS name.")
    port: int = Field(ge=1, le=65535, description="TCP port.")


class APIServer(RacksmithModel):
    """How clients reach the Kubernetes API of the cluster."""

    vip: str | None = Field(
        default=None, description="Virtual IP of the API, inside one of "
        "networks.controlPlaneCIDRs and held by no other cluster; empty uses the first "
        "control-plane machine's address."
    )
    port: int = Field(default=6443, ge=1, le=65535,
                      description="Port of the API on the VIP (or node address).")
    virtual_router_id: int | None = Field(
        default=None, ge=1, le=255, alias="virtualRouterID",
        description="VRRP virtual_router_id of the VIP (keepalived); empty: Racksmith "
        "allocates one unique among the clusters on overlapping control-plane networks.",
    )
    keepalived: bool = Field(
        default=True, description="Let Racksmith hold the VIP with keepalived (VRRP unicast)."
    )


class DrainTimeoutAction(DocEnum):
    """What an update does when a node's drain passes the drain timeout."""

    PAUSE = "Pause", "Start no further machine until the drain succeeds (it keeps retrying)."
    CONTINUE = "Continue", "Keep retrying the blocked drain while other machines go on."


class ClusterUpdatePolicy(RacksmithModel):
    """How the LCM update controller rolls a new release (or a reboot) through the cluster."""

    auto_commence: bool = Field(
        default=False,
        description="Create update plans with every step commenced (no operator go-ahead).",
    )
    drain_timeout_seconds: int = Field(
        default=600, ge=1,
        description="After this long a drain still refused by a PodDisruptionBudget is "
        "reported Blocked (naming the pod and the budget).",
    )
    on_drain_timeout: DrainTimeoutAction = Field(
        default=DrainTimeoutAction.PAUSE, description="What a blocked drain does to the plan."
    )
    max_unavailable: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="Label key (e.g. metal.racksmith.io/rack, topology.kubernetes.io/zone) → "
        "how many machines sharing one value of it may be in maintenance at once.",
    )
    node_duration_seconds: int = Field(
        default=600, ge=1,
        description="Estimated update time of one machine when no past run is known.",
    )


class ClusterSpec(RacksmithModel):
    """Desired state of a cluster."""

    networks: ClusterNetworks = Field(
        default_factory=ClusterNetworks,
        description="Address ranges.",
        json_schema_extra={"default": {}},
    )
    api_server: APIServer = Field(
        default_factory=APIServer,
        description="API endpoint.",
        json_schema_extra={"default": {}},
    )
    control_plane_endpoint: APIEndpoint | None = Field(
        default=None,
        description="Where clients reach the API when it is not the VIP (an external load "
        "balancer, the virtual datacenter's proxy); empty: the VIP and apiServer.port.",
    )
    release: str = Field(description="Name of the ClusterRelease to run.")
    max_worker_upgrade_count: int = Field(
        default=1, ge=1, description="How many worker machines may be updated at once."
    )
    update: ClusterUpdatePolicy = Field(
        default_factory=ClusterUpdatePolicy,
        description="How updates and graceful reboots roll through the cluster.",
        json_schema_extra={"default": {}},
    )


class ClusterStatus(RacksmithModel):
    """Observed state of a cluster."""

    machines_ready: int | None = Field(default=None, ge=0, description="Machines in phase Ready.")
    machines_total: int | None = Field(default=None, ge=0, description="Machines of the cluster.")
    release: str | None = Field(default=None, description="Release every machine runs now.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    control_plane_endpoint: APIEndpoint | None = Field(
        default=None,
        description="Where the cluster's API is reached (the kubeconfig's server).",
    )
    virtual_router_id: int | None = Field(
        default=None, ge=1, le=255, alias="virtualRouterID",
        description="VRRP virtual_router_id keepalived holds the VIP with (kept once "
        "allocated).",
    )
    conditions: list[Condition] = conditions_field()


CONTROL_PLANE_ENDPOINT_VALID = "ControlPlaneEndpointValid"
"""The Cluster condition saying its API endpoint (the VIP) is sound; False
with the refusal's reason, no machine of the cluster starts deploying (the
Machine controller reads it)."""
ENDPOINT_WAITING = "WaitingForEndpoint"
"""Its reason while the endpoint is simply not known yet (not a refusal)."""
CONTROL_PLANE_QUORUM = "ControlPlaneQuorum"
"""The Cluster condition saying its number of control-plane machines is odd
(stacked etcd's quorum); while False no machine of the cluster starts
deploying (the Machine controller reads it)."""


class Cluster(Resource):
    """A Kubernetes cluster built from bare-metal machines."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="Cluster",
        plural="clusters",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Release", ".spec.release", description="Desired release."),
            PrinterColumn("Current", ".status.release", description="Running release."),
            PrinterColumn("Ready", ".status.machinesReady", "integer", "Ready machines."),
            PrinterColumn("Total", ".status.machinesTotal", "integer", "All machines."),
            PrinterColumn("Endpoint", ".status.controlPlaneEndpoint.host",
                          description="Host of the cluster's API endpoint."),
            age_column(),
            PrinterColumn("VIP", ".spec.apiServer.vip", description="API VIP.", priority=1),
        ),
    )

    spec: ClusterSpec = Field(description="Desired state.")
    status: ClusterStatus | None = Field(default=None, description="Observed state.")


# --- Machine -------------------------------------------------------------------


class MachinePhase(DocEnum):
    """Where a machine is in its life."""

    PENDING = "Pending", "Waiting for a matching host."
    PROVISIONING = "Provisioning", "The host is being provisioned with the OS image."
    DEPLOYING = "Deploying", "The agent is applying the release's state items."
    READY = "Ready", "The node is part of the cluster and up to date."
    DELETING = "Deleting", "The node is being drained and removed, the host released."
    FAILED = "Failed", "An unrecoverable error; see conditions."


class AddressType(DocEnum):
    """Kind of a machine address."""

    INTERNAL_IP = "InternalIP", "Address on the control-plane network."
    EXTERNAL_IP = "ExternalIP", "Address reachable from outside the cluster."
    WORKLOAD_IP = "WorkloadIP", "Address on the workload-plane network."
    HOSTNAME = "Hostname", "Host name."


class MachineAddress(RacksmithModel):
    """An address of a machine."""

    type: AddressType = Field(description="Kind of address.")
    address: str = Field(description="The address.")


class MachineSpec(RacksmithModel):
    """Desired state of a machine."""

    cluster_name: str = Field(description="Cluster (same namespace) the machine joins.")
    roles: list[Role] = Field(
        default_factory=lambda: [Role.NODE],
        description="Node roles.",
        json_schema_extra={**_ROLES_SET, "default": ["node"]},
    )
    host_selector: LabelSelector | None = Field(
        default=None, description="Which BareMetalHost to use; the first free match is claimed."
    )
    l2_template_selector: LabelSelector | None = Field(
        default=None,
        alias="l2TemplateSelector",
        description="Which L2Template to use; empty uses the cluster's default.",
    )
    host_profile: str | None = Field(
        default=None, description="BareMetalHostProfile (same namespace) for disks and kernel."
    )
    upgrade_index: int | None = Field(
        default=None, ge=0, description="Order within its update group; lower goes first."
    )


class MachineStatus(RacksmithModel):
    """Observed state of a machine."""

    phase: MachinePhase | None = Field(default=None, description="Life-cycle phase.")
    node_ref: ObjectReference | None = Field(default=None, description="The Kubernetes Node.")
    host_ref: ObjectReference | None = Field(default=None, description="The claimed BareMetalHost.")
    addresses: list[MachineAddress] = Field(default_factory=list, description="Addresses.")
    release: str | None = Field(default=None, description="Release the machine runs now.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    conditions: list[Condition] = conditions_field()


class Machine(Resource):
    """One bare-metal host joined to a cluster as a node with roles."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="Machine",
        plural="machines",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Cluster", ".spec.clusterName", description="Cluster joined."),
            PrinterColumn("Roles", ".spec.roles", description="Node roles."),
            PrinterColumn("Phase", ".status.phase", description="Life-cycle phase."),
            PrinterColumn("Node", ".status.nodeRef.name", description="Kubernetes node."),
            age_column(),
            PrinterColumn("Host", ".status.hostRef.name", description="Claimed host.", priority=1),
            PrinterColumn("Release", ".status.release", description="Running.", priority=1),
            condition_column("Ready", "Ready", priority=1),
        ),
        selectable_fields=(".spec.clusterName",),
    )

    spec: MachineSpec = Field(description="Desired state.")
    status: MachineStatus | None = Field(default=None, description="Observed state.")


# --- ClusterRelease ------------------------------------------------------------


class StateItemPhase(DocEnum):
    """When in a node deployment a state item runs."""

    CHECKS = "checks", "Pre-flight checks; nothing is changed."
    CONFIGURATION = "configuration", "Configure the host (packages, files, services)."
    JOIN = "join", "Join the node to the cluster (kubeadm, etcd membership)."
    UNCORDON = "uncordon", "Final steps, then the node accepts workloads."


class StateItemType(DocEnum):
    """What a state item manages on the host."""

    FILE = "file", "A file with given content, mode and owner."
    PACKAGE = "package", "An OS package at a given version."
    SERVICE = "service", "A systemd unit state (enabled, running)."
    COMMAND = "command", "A command, run when its guard says so."
    KUBEADM = "kubeadm", "A kubeadm phase (init, join, upgrade)."


class StateItem(RacksmithModel):
    """One idempotent unit of host configuration the agent applies."""

    name: str = Field(description="Unique name of the item.")
    phase: StateItemPhase = Field(description="Deployment phase it belongs to.")
    roles: list[Role] = Field(
        default_factory=list,
        description="Roles whose nodes apply it; empty means every node.",
        json_schema_extra=_ROLES_SET,
    )
    type: StateItemType = Field(description="What it manages.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Type-specific parameters (free-form)."
    )
    requires_reboot: bool = Field(
        default=False,
        description="Applying this item with a change needs a reboot (kernel, firmware): the "
        "agent then reports rebootRequired and the update controller reboots the machine.",
    )


class ClusterReleaseSpec(RacksmithModel):
    """What a release installs."""

    version: str = Field(description="Release version, e.g. 1.4.0.")
    kubernetes_version: str | None = Field(
        default=None, description="Kubernetes version it deploys."
    )
    description: str | None = Field(default=None, description="Release notes summary.")
    os_image: Image | None = Field(
        default=None,
        description="OS image the machines are provisioned with; empty uses the controller's "
        "default (`racksmith up` sets it to the virtual datacenter's sample image).",
    )
    state_items: list[StateItem] = Field(
        default_factory=list,
        description="State items, applied in order within each phase.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class ClusterRelease(Resource):
    """A versioned, immutable recipe for the nodes of a cluster."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="ClusterRelease",
        plural="clusterreleases",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Version", ".spec.version", description="Release version."),
            PrinterColumn("Kubernetes", ".spec.kubernetesVersion", description="k8s version."),
            age_column(),
        ),
    )

    spec: ClusterReleaseSpec = Field(description="The recipe.")
