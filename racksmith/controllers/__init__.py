"""Racksmith's controllers, one per kind, talking only through the API.

Owns: the list of controllers ``racksmith up`` runs (:func:`all_controllers`),
the options of the cluster layer (:class:`ClusterOptions`) and every
controller's waits in one place (:class:`ControllerTimings`). Each
controller lives in its own package and is built from an ApiClient and its
collaborators; its timings are declared there, next to it. Controllers never
import one another (import-linter's independence contract): what two of them
share lives outside ``racksmith.controllers`` (``racksmith.runtime.resources``,
``racksmith.runtime.conditions``, ``racksmith.kinds.hostannotations``,
``racksmith.ipamclaims``), and a collaborator one controller takes from
another is injected here (the update controller's node flow is the
maintenance package's ``NodeMaintenance``). So is the process's one
``EventRecorder`` (``racksmith.runtime.events``): every controller, and the
node flow, records its core v1 Events through it under its own component,
sharing its repeat cache.

Identities: every controller declares what it reads and writes (``ACCESS``,
next to it; :data:`CONTROLLER_ACCESS` gathers them by controller name, the
update controller's with the node flow's it is given). With ``client_for``
each controller is built on its own client (its own ServiceAccount, see
``racksmith.app.identities``), and writes its Events through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from racksmith.controllers.baremetalhost import BareMetalHostSettings, baremetalhost_controller
from racksmith.controllers.baremetalhost.controller import ACCESS as BAREMETALHOST_ACCESS
from racksmith.controllers.cluster import cluster_controller
from racksmith.controllers.cluster.controller import ACCESS as CLUSTER_ACCESS
from racksmith.controllers.firmware import FirmwareTimings, firmware_controller
from racksmith.controllers.firmware.controller import ACCESS as FIRMWARE_ACCESS
from racksmith.controllers.ipam import subnet_controller
from racksmith.controllers.ipam.subnet import ACCESS as SUBNET_ACCESS
from racksmith.controllers.ipamhost import (
    IpamHostTimings,
    ipamhost_controller,
    l2template_controller,
)
from racksmith.controllers.ipamhost.host import ACCESS as IPAMHOST_ACCESS
from racksmith.controllers.ipamhost.template import ACCESS as L2TEMPLATE_ACCESS
from racksmith.controllers.machine import MachineTimings, machine_controller
from racksmith.controllers.machine.controller import ACCESS as MACHINE_ACCESS
from racksmith.controllers.maintenance import (
    GracefulRebootTimings,
    NodeMaintenance,
    graceful_reboot_controller,
)
from racksmith.controllers.maintenance.flow import ACCESS as NODE_FLOW_ACCESS
from racksmith.controllers.maintenance.reboot import ACCESS as GRACEFUL_REBOOT_ACCESS
from racksmith.controllers.update import AlertmanagerSource, UpdateTimings, update_controller
from racksmith.controllers.update.controller import ACCESS as UPDATE_ACCESS
from racksmith.controllers.volume import (
    VolumeTimings,
    claim_binder_controller,
    volume_controller,
)
from racksmith.controllers.volume.binder import ACCESS as CLAIM_BINDER_ACCESS
from racksmith.controllers.volume.controller import ACCESS as VOLUME_ACCESS
from racksmith.controlplane.identities import cluster_rbac
from racksmith.kinds.metal import Image
from racksmith.provisioner.base import Provisioner
from racksmith.runtime.access import Access
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.controller import Controller
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.planes import ClusterPlane

CONTROLLER_ACCESS: dict[str, Access] = {
    "baremetalhost": BAREMETALHOST_ACCESS,
    "firmware": FIRMWARE_ACCESS,
    "subnet": SUBNET_ACCESS,
    "ipamhost": IPAMHOST_ACCESS,
    "l2template": L2TEMPLATE_ACCESS,
    "machine": MACHINE_ACCESS,
    "cluster": CLUSTER_ACCESS,
    "volume": VOLUME_ACCESS,
    "claim-binder": CLAIM_BINDER_ACCESS,
    "update": UPDATE_ACCESS + NODE_FLOW_ACCESS,
    "graceful-reboot": GRACEFUL_REBOOT_ACCESS,
}
"""What each controller of :func:`all_controllers` reads and writes, by its name."""

CLUSTER_IDENTITIES: tuple[str, ...] = ("machine", "update", "graceful-reboot", "volume",
                                       "claim-binder")
"""The controllers that work inside managed clusters (Nodes, pods, PDBs, PVs,
Volumes, maintenance requests and locks): each gets an identity of its own
in every cluster (``racksmith.controlplane.identities``), with its ACCESS as
a ClusterRole there (``racksmith rbac --in-cluster``)."""


@dataclass(frozen=True)
class ClusterOptions:
    """What the cluster layer (Machine, Cluster, IpamHost, L2Template
    controllers) needs from the composition root.

    ``default_image``: the OS image for releases without ``spec.osImage``.
    ``agent_secret``: (namespace, name) of the Secret with the API URL, CA and
    token written into host agents' user data.
    ``alertmanager_url``: base URL of a Prometheus Alertmanager v2 API (or of
    the emulator's built-in alert source) read by the update controller for
    UpdateAutoPause; None: no alert ever fires.
    ``backup_before_update``: the update controller asks for a
    ControlPlaneBackup before a plan's first step starts (a backup controller
    runs: ``racksmith.controllers.backup``).
    ``clusters``: the per-cluster tracker (``racksmith.runtime.clusters``)
    whose probes of each cluster's endpoint set ``ControlPlaneReachable``;
    None: endpoints are not probed.
    ``reach``: where the management plane connects to reach an address of
    the site (the virtual datacenter's loopback image of it,
    ``racksmith.loopback``); None: the address itself. It is the server of
    each cluster's kubeconfig and of the tracker's clients.
    ``plane_for``: each cluster-side controller's way into the managed
    clusters, by identity name (``racksmith.runtime.planes``; built by the
    composition root); None: every cluster's node-side objects are in the
    management API.
    ``workload_identities``: identities of workloads that run inside every
    cluster besides the controllers (the reference workload controller of
    the virtual datacenter), with what they read and write: each gets a
    certificate and a role there as a controller does.
    """

    default_image: Image | None = None
    agent_secret: tuple[str, str] = ("racksmith-system", "racksmith-agent")
    alertmanager_url: str | None = None
    backup_before_update: bool = False
    clusters: ClusterClients | None = None
    reach: Callable[[str], str] | None = None
    plane_for: Callable[[str], ClusterPlane] | None = None
    workload_identities: Mapping[str, Access] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerTimings:
    """The waits of every controller (poll intervals, retry delays, resync
    periods), for the composition root to pass; each field is the
    controller's own settings object with its defaults. Tests shrink them.

    The Subnet, L2Template, Cluster and claim binder controllers have no
    timed waits (they act on events only).
    """

    baremetalhost: BareMetalHostSettings = field(default_factory=BareMetalHostSettings)
    """BareMetalHost controller: polls, back-off and call budget."""
    firmware: FirmwareTimings = field(default_factory=FirmwareTimings)
    """Firmware (HostFirmwareSettings) controller."""
    ipamhost: IpamHostTimings = field(default_factory=IpamHostTimings)
    """IpamHost controller."""
    machine: MachineTimings = field(default_factory=MachineTimings)
    """Machine controller."""
    volume: VolumeTimings = field(default_factory=VolumeTimings)
    """Volume controller."""
    update: UpdateTimings = field(default_factory=UpdateTimings)
    """LCM update controller, with its node maintenance flow."""
    graceful_reboot: GracefulRebootTimings = field(default_factory=GracefulRebootTimings)
    """GracefulRebootRequest controller, with its node maintenance flow."""


DEFAULT_WORKERS = 16
"""Workers per controller, at most (``racksmith up``/``controllers --workers``). Only
the BareMetalHost controller takes them all — each worker waits on one Ironic call,
and at 1,000 hosts 4 workers left Ironic a fifth idle (bench/scale.py, docs/
benchmarks.md); the others are capped at 1, 2 or 4 (their work is API-bound)."""

VOLUME_WORKERS = 4
"""Volume controller workers, at most. Each reconcile is a few round trips
to the cluster's own API (another process, over TLS), so its workers wait
on the network rather than the CPU: 4 instead of 2 took 100 Volumes from
apply to Available in 1.47 s instead of 1.70 s, and 8 gained little more
(1.38 s; bench/volumes.py)."""


CLUSTER_RBAC_FILE = "/etc/kubernetes/racksmith/cluster-rbac.yaml"
"""Where a control-plane machine's user data puts the controllers' roles
inside its cluster (applied by the cluster's init, docs/control-plane.md)."""


def in_cluster_access(workloads: Mapping[str, Access] | None = None) -> dict[str, Access]:
    """What each identity inside a managed cluster reads and writes there:
    the controllers of :data:`CLUSTER_IDENTITIES` and ``workloads``."""
    return {**{name: CONTROLLER_ACCESS[name] for name in CLUSTER_IDENTITIES},
            **(workloads or {})}


def cluster_rbac_manifest(workloads: Mapping[str, Access] | None = None) -> bytes:
    """The ClusterRoles and bindings of the identities that work inside a
    managed cluster (``racksmith rbac --in-cluster``), as a YAML stream."""
    objects = cluster_rbac({name: access.policy_rules()
                            for name, access in in_cluster_access(workloads).items()})
    return yaml.safe_dump_all(objects, sort_keys=True).encode()


def all_controllers(
    api_client: Any,
    *,
    workers: int = DEFAULT_WORKERS,
    provisioner: Provisioner | None = None,
    registry: CollectorRegistry | None = None,
    ipam: bool = False,
    cluster: ClusterOptions | None = None,
    timings: ControllerTimings | None = None,
    recorder: EventRecorder | None = None,
    client_for: Callable[[str], Any] | None = None,
) -> list[Controller]:
    """Every controller of this release: the BareMetalHost and firmware
    controllers when a ``provisioner`` (the backend that drives servers) is given, the IPAM
    (Subnet) controller when ``ipam`` is true — it needs no provisioner — and
    the cluster layer (Machine, Cluster, IpamHost, L2Template, Volume, the
    pre-bound claim binder, the LCM update controller and the graceful
    reboot controller) when ``cluster`` is given. ``registry`` receives
    the controllers' own metrics (pass the manager's). ``timings``: every
    controller's waits (None: the defaults). ``recorder``: where every
    controller records its Events (None: one over ``api_client``).
    ``client_for``: the client of the controller of that name
    (:data:`CONTROLLER_ACCESS`), None: ``api_client`` for every one."""
    t = timings if timings is not None else ControllerTimings()
    events = recorder if recorder is not None else EventRecorder(api_client, "racksmith")

    def c(name: str) -> Any:
        return client_for(name) if client_for is not None else api_client

    def plane(name: str) -> ClusterPlane | None:
        return cluster.plane_for(name) if cluster is not None and \
            cluster.plane_for is not None else None

    controllers: list[Controller] = []
    if provisioner is not None:
        controllers.append(
            baremetalhost_controller(c("baremetalhost"), provisioner, workers=workers,
                                     registry=registry, settings=t.baremetalhost,
                                     recorder=events)
        )
        controllers.append(firmware_controller(c("firmware"), provisioner, workers=min(workers, 4),
                                               timings=t.firmware, recorder=events))
    if ipam or cluster is not None:
        controllers.append(subnet_controller(c("subnet"), workers=min(workers, 2),
                                             recorder=events))
    if cluster is not None:
        controllers.extend([
            ipamhost_controller(c("ipamhost"), workers=min(workers, 2), timings=t.ipamhost,
                                recorder=events),
            l2template_controller(c("l2template"), workers=1, recorder=events),
            machine_controller(c("machine"), default_image=cluster.default_image,
                               agent_secret=cluster.agent_secret, workers=min(workers, 4),
                               timings=t.machine, recorder=events, plane=plane("machine"),
                               control_plane_files={CLUSTER_RBAC_FILE: cluster_rbac_manifest(
                                   cluster.workload_identities)}),
            cluster_controller(c("cluster"), workers=1, recorder=events,
                               clusters=cluster.clusters,
                               identities=tuple(in_cluster_access(cluster.workload_identities)),
                               reach=cluster.reach),
            volume_controller(c("volume"), workers=min(workers, VOLUME_WORKERS), timings=t.volume,
                              recorder=events, plane=plane("volume")),
            claim_binder_controller(c("claim-binder"), workers=1, plane=plane("claim-binder")),
            update_controller(c("update"), workers=1,
                              node_flow=partial(NodeMaintenance, recorder=events),
                              plane=plane("update"),
                              alert_source=(AlertmanagerSource(cluster.alertmanager_url)
                                            if cluster.alertmanager_url else None),
                              timings=t.update, recorder=events,
                              backup_before_update=cluster.backup_before_update),
            graceful_reboot_controller(c("graceful-reboot"), workers=1,
                                       timings=t.graceful_reboot, recorder=events,
                                       plane=plane("graceful-reboot")),
        ])
    return controllers
