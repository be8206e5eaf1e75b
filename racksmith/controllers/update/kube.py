"""The update controller's reads and writes, over kubernetes_asyncio.

Owns every API call the controller makes itself (the node flow has its
own): Clusters, Machines, LCMMachines, ClusterUpdatePlans (object and status
subresource), UpdateGroups, UpdateAutoPauses, GracefulRebootRequests,
ClusterMaintenanceRequests, NodeMaintenanceRequests, ClusterWorkloadLocks and
Nodes. Objects travel as raw dicts. Writes are optimistic: a 409 raises
``Conflict`` (re-read and decide again); a 404 on a delete means done, on a
create of an existing object (409 AlreadyExists) too.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.controllers.update.names import FIELD_MANAGER
from racksmith.runtime.source import Resource


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and decide again."""


class Kube:
    """The controller's API access (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)

    async def get(self, res: Resource, namespace: str | None, name: str
                  ) -> dict[str, Any] | None:
        """One object (``namespace`` None: cluster-scoped); None if absent."""
        try:
            if namespace is None:
                obj: dict[str, Any] = await self.custom.get_cluster_custom_object(
                    res.group, res.version, res.plural, name)
            else:
                obj = await self.custom.get_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def list_objects(self, res: Resource, namespace: str | None = None, *,
                   label_selector: str | None = None) -> list[dict[str, Any]]:
        """Objects of one namespace, or of all (cluster-scoped kinds: all)."""
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if namespace is None:
            out = await self.custom.list_cluster_custom_object(
                res.group, res.version, res.plural, **kwargs)
        else:
            out = await self.custom.list_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, **kwargs)
        return [i for i in out.get("items") or [] if isinstance(i, dict)]

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any]
                     ) -> bool:
        """Create ``body``; False when it exists already."""
        try:
            if namespace is None:
                await self.custom.create_cluster_custom_object(
                    res.group, res.version, res.plural, body, field_manager=FIELD_MANAGER)
            else:
                await self.custom.create_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, body,
                    field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def replace(self, res: Resource, obj: dict[str, Any], *, status: bool = False
                      ) -> dict[str, Any] | None:
        """PUT namespaced ``obj`` (with its resourceVersion); None if it is gone."""
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

    async def delete(self, res: Resource, namespace: str | None, name: str) -> None:
        """Delete one object; absent is fine."""
        try:
            if namespace is None:
                await self.custom.delete_cluster_custom_object(
                    res.group, res.version, res.plural, name)
            else:
                await self.custom.delete_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, name)
        except ApiException as exc:
            if exc.status != 404:
                _raise_conflict(exc)

    async def node_ready(self, name: str) -> bool:
        """The Node exists and its Ready condition is True."""
        try:
            node = await self.core.read_node(name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        for cond in (node.status.conditions if node.status else None) or []:
            if cond.type == "Ready":
                return bool(cond.status == "True")
        return False


def _raise_conflict(exc: ApiException) -> NoReturn:
    if exc.status == 409:
        raise Conflict("conflicting write, deciding again from a fresh read") from None
    raise exc
