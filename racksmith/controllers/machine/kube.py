"""The Machine controller's reads and writes, over kubernetes_asyncio.

Owns every API call the controller makes: Machines (object and status
subresource), Clusters, ClusterReleases, BareMetalHosts, IpamHosts,
LCMMachines, Secrets, Nodes, Pods and their Eviction subresource. Objects
travel as raw dicts (core objects are turned into dicts here). Nothing else
in the package talks to the API but the Events, which go through the
runtime's ``EventRecorder``.
Writes are optimistic: a 409 raises ``Conflict`` (re-read and decide
again); a 404 on a delete means done.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.controllers.machine.names import FIELD_MANAGER
from racksmith.runtime.resources import RELEASES
from racksmith.runtime.source import Resource


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and decide again."""


@dataclass(frozen=True)
class SecretData:
    """A Secret's decoded data and version. Never log ``data``."""

    resource_version: str
    data: dict[str, bytes] = field(repr=False)
    raw: dict[str, Any] = field(repr=False)


class Kube:
    """The controller's API access (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)

    def _plain(self, obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(obj)
        return out

    # --- custom objects -------------------------------------------------------

    async def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def get_release(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_cluster_custom_object(
                RELEASES.group, RELEASES.version, RELEASES.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def list_objects(self, res: Resource, namespace: str) -> list[dict[str, Any]]:
        out = await self.custom.list_namespaced_custom_object(
            res.group, res.version, namespace, res.plural)
        return [i for i in out.get("items") or [] if isinstance(i, dict)]

    async def create(self, res: Resource, namespace: str, body: dict[str, Any]) -> None:
        try:
            await self.custom.create_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, body,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            _raise_conflict(exc)

    async def replace(self, res: Resource, obj: dict[str, Any], *, status: bool = False
                      ) -> dict[str, Any] | None:
        """PUT ``obj`` (with its resourceVersion); None if it is gone."""
        meta = obj["metadata"]
        call = (self.custom.replace_namespaced_custom_object_status if status
                else self.custom.replace_namespaced_custom_object)
        try:
            out: dict[str, Any] = await call(
                res.group, res.version, meta["namespace"], res.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 404:
                return None
            _raise_conflict(exc)
        return out

    async def delete(self, res: Resource, namespace: str, name: str) -> None:
        try:
            await self.custom.delete_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    # --- secrets --------------------------------------------------------------

    async def get_secret(self, namespace: str, name: str) -> SecretData | None:
        try:
            secret = await self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        return SecretData(str(secret.metadata.resource_version or ""), data,
                          self._plain(secret))

    async def write_secret(self, namespace: str, body: Any,
                           current: SecretData | None) -> None:
        """Create the Secret ``body``, or replace ``current`` (optimistically)."""
        name = body["metadata"]["name"]
        try:
            if current is None:
                await self.core.create_namespaced_secret(namespace, body,
                                                         field_manager=FIELD_MANAGER)
            else:
                body["metadata"]["resourceVersion"] = current.resource_version
                await self.core.replace_namespaced_secret(name, namespace, body,
                                                          field_manager=FIELD_MANAGER)
        except ApiException as exc:
            _raise_conflict(exc)

    async def delete_secret(self, namespace: str, name: str) -> None:
        try:
            await self.core.delete_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    # --- nodes and pods -------------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            node = await self.core.read_node(name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self._plain(node)

    async def replace_node(self, raw: Any) -> None:
        try:
            await self.core.replace_node(raw["metadata"]["name"], raw,
                                         field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    async def delete_node(self, name: str) -> None:
        try:
            await self.core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    async def node_pods(self, node: str) -> list[dict[str, Any]]:
        out = await self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        return [self._plain(p) for p in out.items or []]

    async def evict(self, namespace: str, name: str) -> str | None:
        """Evict a pod; the refusal message when a disruption budget says no (429)."""
        body: Any = {"apiVersion": "policy/v1", "kind": "Eviction",
                     "metadata": {"name": name, "namespace": namespace}}
        try:
            await self.core.create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 429:
                return _status_message(exc)
            raise
        return None


def _raise_conflict(exc: ApiException) -> NoReturn:
    if exc.status == 409:
        raise Conflict("conflicting write, deciding again from a fresh read") from None
    raise exc


def _status_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return str(exc.reason or exc.status)
    message = str(body.get("message") or exc.reason or exc.status)
    causes = [str(c.get("message")) for c in (body.get("details") or {}).get("causes") or []
              if isinstance(c, dict) and c.get("message")]
    return f"{message} ({'; '.join(causes)})" if causes else message
