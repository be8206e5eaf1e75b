"""``racksmith volume``: Volume commands that apply the storage design's rules.

Owns: ``racksmith volume delete NAME``, which refuses — with the reason —
to delete a Volume whose PersistentVolume is Bound
(:func:`racksmith.planners.volumes.deletion_blocker`), where ``kubectl
delete`` would leave it Terminating until the claim goes. Talks to the API
through the kubeconfig like any client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.planners.volumes import deletion_blocker
from racksmith.runtime.kubeclient import api_client

GROUP, VERSION, PLURAL = "storage.racksmith.io", "v1alpha1", "volumes"


async def delete_volume(name: str, kubeconfig: Path | None) -> tuple[int, str]:
    """(exit code, message): 0 deleted, 1 refused or failed."""
    client = await api_client(kubeconfig)
    try:
        custom, core = CustomObjectsApi(client), CoreV1Api(client)
        try:
            await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return 1, f"volume {name} not found"
            raise
        pv: Any = None
        try:
            pv = client.sanitize_for_serialization(await core.read_persistent_volume(name))
        except ApiException as exc:
            if exc.status != 404:
                raise
        reason = deletion_blocker(name, pv)
        if reason is not None:
            return 1, f"refused: {reason}"
        await custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        return 0, f"volume {name} deleted (the device is released in the background)"
    finally:
        await client.close()
