"""Racksmith's controllers, one per kind, talking only through the API.

Owns: the list of controllers ``racksmith up`` runs (:func:`all_controllers`).
Each controller lives in its own module and is built from an ApiClient and
the settings; later issues add BareMetalHost, IPAM, Cluster/Machine, Volume
and LCM controllers here.
"""

from __future__ import annotations

from typing import Any

from racksmith.runtime.controller import Controller


def all_controllers(api_client: Any, *, workers: int = 4) -> list[Controller]:
    """Every controller of this release (none yet: the kinds' controllers come
    with their issues)."""
    del api_client, workers
    return []
