"""The Volume controller's and the claim binder's reads and writes, over kubernetes_asyncio.

Owns every API call of the package: Volumes (object and status
subresource), PersistentVolumes (object and status subresource; the
embedded API server serves ``persistentvolumes/status`` as kube does, so
``status.phase`` is only written there, except at creation),
PersistentVolumeClaims (read, status subresource), StorageClasses and Nodes
(read). Objects travel as raw dicts. Nothing else in the package talks to
the API but the Events, which go through the runtime's ``EventRecorder``. Writes are optimistic (the
resourceVersion read): a 409 raises ``Conflict`` (re-read and decide
again); a 404 on a delete or a replace means the object is gone.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi, StorageV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.runtime.resources import VOLUMES


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and decide again."""


def _raise_conflict(exc: ApiException) -> NoReturn:
    if exc.status == 409:
        raise Conflict("conflicting write, deciding again from a fresh read") from None
    raise exc


class Kube:
    """The package's API access (see the module docstring)."""

    def __init__(self, api_client: Any, field_manager: str) -> None:
        self.api_client = api_client
        self.field_manager = field_manager
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)
        self.storage = StorageV1Api(api_client)

    def _plain(self, obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(obj)
        return out

    async def _read(self, call: Any, *args: Any) -> dict[str, Any] | None:
        try:
            obj = await call(*args)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj if isinstance(obj, dict) else self._plain(obj)

    async def _write(self, call: Any, *args: Any) -> dict[str, Any] | None:
        """A replace: the new object, None if the old one is gone."""
        try:
            obj = await call(*args, field_manager=self.field_manager)
        except ApiException as exc:
            if exc.status == 404:
                return None
            _raise_conflict(exc)
        return obj if isinstance(obj, dict) else self._plain(obj)

    # --- volumes --------------------------------------------------------------

    async def get_volume(self, name: str) -> dict[str, Any] | None:
        return await self._read(self.custom.get_cluster_custom_object,
                                VOLUMES.group, VOLUMES.version, VOLUMES.plural, name)

    async def replace_volume(self, obj: dict[str, Any], *, status: bool = False
                             ) -> dict[str, Any] | None:
        """PUT ``obj`` (with its resourceVersion), or its status; None if it is gone."""
        call = (self.custom.replace_cluster_custom_object_status if status
                else self.custom.replace_cluster_custom_object)
        return await self._write(call, VOLUMES.group, VOLUMES.version, VOLUMES.plural,
                                 obj["metadata"]["name"], obj)

    # --- persistent volumes and claims ---------------------------------------

    async def get_pv(self, name: str) -> dict[str, Any] | None:
        return await self._read(self.core.read_persistent_volume, name)

    async def create_pv(self, manifest: dict[str, Any]) -> None:
        """Create ``manifest`` (its ``status`` is kept at creation); 409: ``Conflict``."""
        body: Any = manifest
        try:
            await self.core.create_persistent_volume(body, field_manager=self.field_manager)
        except ApiException as exc:
            _raise_conflict(exc)

    async def replace_pv(self, obj: dict[str, Any], *, status: bool = False
                         ) -> dict[str, Any] | None:
        call = (self.core.replace_persistent_volume_status if status
                else self.core.replace_persistent_volume)
        return await self._write(call, obj["metadata"]["name"], obj)

    async def delete_pv(self, name: str) -> None:
        try:
            await self.core.delete_persistent_volume(name)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    async def get_pvc(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._read(self.core.read_namespaced_persistent_volume_claim,
                                name, namespace)

    async def claims_naming(self, volume_name: str) -> list[dict[str, Any]]:
        """Every PVC (all namespaces) whose ``spec.volumeName`` is ``volume_name``."""
        out = await self.core.list_persistent_volume_claim_for_all_namespaces()
        claims = [self._plain(c) for c in out.items or []]
        return [c for c in claims if (c.get("spec") or {}).get("volumeName") == volume_name]

    async def replace_pvc_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        meta = obj["metadata"]
        return await self._write(self.core.replace_namespaced_persistent_volume_claim_status,
                                 meta["name"], meta["namespace"], obj)

    # --- storage classes and nodes -------------------------------------------

    async def get_storage_class(self, name: str) -> dict[str, Any] | None:
        return await self._read(self.storage.read_storage_class, name)

    async def node_exists(self, name: str) -> bool:
        return await self._read(self.core.read_node, name) is not None
