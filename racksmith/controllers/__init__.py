"""Racksmith's controllers, one per kind, talking only through the API.

Owns: the list of controllers ``racksmith up`` runs (:func:`all_controllers`)
and the options of the cluster layer (:class:`ClusterOptions`). Each
controller lives in its own package and is built from an ApiClient and its
collaborators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from racksmith.controllers.baremetalhost import baremetalhost_controller
from racksmith.controllers.cluster import cluster_controller
from racksmith.controllers.ipam import subnet_controller
from racksmith.controllers.ipamhost import ipamhost_controller, l2template_controller
from racksmith.controllers.machine import machine_controller
from racksmith.controllers.maintenance import graceful_reboot_controller
from racksmith.controllers.update import AlertmanagerSource, update_controller
from racksmith.controllers.volume import claim_binder_controller, volume_controller
from racksmith.kinds.metal import Image
from racksmith.provisioner.base import Provisioner
from racksmith.runtime.controller import Controller


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
    """

    default_image: Image | None = None
    agent_secret: tuple[str, str] = ("racksmith-system", "racksmith-agent")
    alertmanager_url: str | None = None


def all_controllers(
    api_client: Any,
    *,
    workers: int = 4,
    provisioner: Provisioner | None = None,
    registry: CollectorRegistry | None = None,
    ipam: bool = False,
    cluster: ClusterOptions | None = None,
) -> list[Controller]:
    """Every controller of this release: the BareMetalHost controller when a
    ``provisioner`` (the backend that drives servers) is given, the IPAM
    (Subnet) controller when ``ipam`` is true — it needs no provisioner — and
    the cluster layer (Machine, Cluster, IpamHost, L2Template, Volume, the
    pre-bound claim binder, the LCM update controller and the graceful
    reboot controller) when ``cluster`` is given. ``registry`` receives
    the controllers' own metrics (pass the manager's)."""
    controllers: list[Controller] = []
    if provisioner is not None:
        controllers.append(
            baremetalhost_controller(api_client, provisioner, workers=workers, registry=registry)
        )
    if ipam or cluster is not None:
        controllers.append(subnet_controller(api_client, workers=min(workers, 2)))
    if cluster is not None:
        controllers.extend([
            ipamhost_controller(api_client, workers=min(workers, 2)),
            l2template_controller(api_client, workers=1),
            machine_controller(api_client, default_image=cluster.default_image,
                               agent_secret=cluster.agent_secret, workers=min(workers, 4)),
            cluster_controller(api_client, workers=1),
            volume_controller(api_client, workers=min(workers, 2)),
            claim_binder_controller(api_client, workers=1),
            update_controller(api_client, workers=1, alert_source=(
                AlertmanagerSource(cluster.alertmanager_url)
                if cluster.alertmanager_url else None)),
            graceful_reboot_controller(api_client, workers=1),
        ])
    return controllers
