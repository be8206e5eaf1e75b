"""Racksmith's controllers, one per kind, talking only through the API.

Owns: the list of controllers ``racksmith up`` runs (:func:`all_controllers`).
Each controller lives in its own package and is built from an ApiClient and
its collaborators; later issues add IPAM, Cluster/Machine, Volume and LCM
controllers here.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from racksmith.controllers.baremetalhost import baremetalhost_controller
from racksmith.controllers.ipam import subnet_controller
from racksmith.provisioner.base import Provisioner
from racksmith.runtime.controller import Controller


def all_controllers(
    api_client: Any,
    *,
    workers: int = 4,
    provisioner: Provisioner | None = None,
    registry: CollectorRegistry | None = None,
    ipam: bool = False,
) -> list[Controller]:
    """Every controller of this release: the BareMetalHost controller when a
    ``provisioner`` (the backend that drives servers) is given, and the IPAM
    (Subnet) controller when ``ipam`` is true — it needs no provisioner.
    ``registry`` receives the controllers' own metrics (pass the manager's)."""
    controllers: list[Controller] = []
    if provisioner is not None:
        controllers.append(
            baremetalhost_controller(api_client, provisioner, workers=workers, registry=registry)
        )
    if ipam:
        controllers.append(subnet_controller(api_client, workers=min(workers, 2)))
    return controllers
