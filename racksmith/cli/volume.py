"""``racksmith volume``: Volume commands that apply the storage design's rules.

Owns: ``racksmith volume delete NAME``, which refuses — with the reason —
to delete a Volume whose PersistentVolume is Bound
(:func:`racksmith.planners.volumes.deletion_blocker`), where ``kubectl
delete`` would leave it Terminating until the claim goes. Talks to the API
through the kubeconfig with the runtime ``Client`` (live reads: a command
has no cache).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from racksmith.planners.volumes import deletion_blocker
from racksmith.runtime.client import Client
from racksmith.runtime.errors import ApiError
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.resources import PVS, VOLUMES


async def delete_volume(name: str, kubeconfig: Path | None) -> tuple[int, str]:
    """(exit code, message): 0 deleted, 1 refused or failed."""
    client = await api_client(kubeconfig)
    try:
        api = Client(client, field_manager="racksmith-cli")
        if await api.get(VOLUMES, None, name, live=True) is None:
            return 1, f"volume {name} not found"
        pv: Any = await api.get(PVS, None, name, live=True)
        reason = deletion_blocker(name, pv)
        if reason is not None:
            return 1, f"refused: {reason}"
        if not await api.delete(VOLUMES, None, name):
            return 1, f"volume {name} not found"
        return 0, f"volume {name} deleted (the device is released in the background)"
    except ApiError as exc:
        return 1, f"volume {name}: {exc}"
    finally:
        await client.close()
