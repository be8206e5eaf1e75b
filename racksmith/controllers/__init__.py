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
from racksmith.provisioner.base import Provisioner
from racksmith.runtime.controller import Controller


def all_controllers(
    api_client: Any,
    *,
    workers: int = 4,
    provisioner: Provisioner | None = None,
    registry: CollectorRegistry | None = None,
) -> list[Controller]:
    """Every controller of this release: the BareMetalHost controller when a
    ``provisioner`` (the backend that drives servers) is given. ``registry``
    receives the controllers' own metrics (pass the manager's)."""
    controllers: list[Controller] = []
    if provisioner is not None:
        controllers.append(
            baremetalhost_controller(api_client, provisioner, workers=workers, registry=registry)
        )
    return controllers
