"""The BareMetalHost controller's reads and writes, over kubernetes_asyncio.

Owns every API call the controller makes: hosts (object and status
subresource), Secrets (BMC credentials, config-drive inputs), profiles,
and inventories (created owned by their host). Nothing else in the package
talks to the API but the Events, which go through the runtime's
``EventRecorder``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.kinds.metal import GROUP, BareMetalHost
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import HOSTS, INVENTORIES, PROFILES
from racksmith.runtime.source import Resource

VERSION = BareMetalHost.info.version
COMPONENT = "racksmith-baremetalhost"
FIELD_MANAGER = "racksmith-baremetalhost"


@dataclass(frozen=True)
class SecretData:
    """A Secret's decoded data and version. Never log ``data``."""

    resource_version: str
    data: dict[str, bytes] = field(repr=False)


class Kube:
    """The controller's API access (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)

    async def get_host(self, key: ObjectKey) -> dict[str, Any] | None:
        return await self._get(HOSTS, key.namespace, key.name)

    async def get_profile(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(PROFILES, namespace, name)

    async def _get(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def get_secret(self, namespace: str, name: str) -> SecretData | None:
        try:
            secret = await self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        return SecretData(str(secret.metadata.resource_version or ""), data)

    async def replace_host(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """PUT the host (metadata changes); None if it is gone afterwards."""
        meta = obj["metadata"]
        try:
            out: dict[str, Any] = await self.custom.replace_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], HOSTS.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER,
            )
        except ApiException as exc:
            _conflict_or_raise(exc)
            return None
        return out

    async def replace_host_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """PUT the status subresource (optimistic: 409 → retry)."""
        meta = obj["metadata"]
        try:
            out: dict[str, Any] = await self.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], HOSTS.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER,
            )
        except ApiException as exc:
            _conflict_or_raise(exc)
            return None
        return out

    async def upsert_inventory(
        self, host: dict[str, Any], hardware: dict[str, Any], inspected_at: datetime,
        source: str,
    ) -> None:
        """Create or update the host's BareMetalHostInventory (same name, owned by it)."""
        meta = host["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        status = {"hardware": hardware, "inspectedAt": _time(inspected_at), "source": source}
        current = await self._get(INVENTORIES, namespace, name)
        if current is None:
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "BareMetalHostInventory",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "ownerReferences": [{
                        "apiVersion": f"{GROUP}/{VERSION}", "kind": "BareMetalHost",
                        "name": name, "uid": meta["uid"], "controller": True,
                        "blockOwnerDeletion": True,
                    }],
                },
                "spec": {"hostRef": {"name": name}},
            }
            try:
                current = await self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, INVENTORIES.plural, body,
                    field_manager=FIELD_MANAGER,
                )
            except ApiException as exc:
                _conflict_or_raise(exc)
        assert current is not None
        current["status"] = status
        try:
            await self.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, namespace, INVENTORIES.plural, name, current,
                field_manager=FIELD_MANAGER,
            )
        except ApiException as exc:
            _conflict_or_raise(exc)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and retry."""


def _conflict_or_raise(exc: ApiException) -> None:
    if exc.status == 409:
        raise Conflict("conflicting write, retrying with a fresh read") from None
    if exc.status == 404:
        return
    raise exc
