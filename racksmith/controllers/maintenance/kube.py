"""The maintenance package's reads and writes, over kubernetes_asyncio.

Owns every API call of the node flow and the graceful reboot controller:
NodeMaintenanceRequests and NodeWorkloadLocks (cluster-scoped), Machines,
LCMMachines, BareMetalHosts, GracefulRebootRequests (and their status
subresource), ClusterUpdatePlans (existence only), Nodes, Pods, their
Eviction subresource and PodDisruptionBudgets. Objects travel as raw dicts.
Patches are RFC 7386 merge patches (``None`` removes a key); a 404 on a
patch or delete means the object is gone (returned as False / ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi, PolicyV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.runtime.source import Resource

FIELD_MANAGER = "racksmith-maintenance"
MERGE = "application/merge-patch+json"
# The client picks JSON patch (custom objects) or strategic merge (core) for a
# dict body; force RFC 7386 merge patch. Passed as ** because the bundled
# stubs do not declare the runtime's ``_content_type`` keyword.
_MERGE_PATCH: dict[str, Any] = {"_content_type": MERGE}


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and decide again."""


@dataclass(frozen=True)
class EvictionRefused:
    """A 429 answer to an eviction: the Status message and its causes."""

    message: str
    causes: tuple[tuple[str, str], ...]
    """(reason, message) of each cause."""


class MaintenanceKube:
    """API access of the maintenance package (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)
        self.policy = PolicyV1Api(api_client)

    async def _raw(self, call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The JSON answer of a core API call, as sent (no typed model: a kubelet
        may write fields the client's models would refuse)."""
        resp = await call(*args, _preload_content=False, **kwargs)
        try:
            body = json.loads(await resp.read())
        finally:
            resp.release()
        return body if isinstance(body, dict) else {}

    # --- custom objects ---------------------------------------------------------

    async def get(self, res: Resource, namespace: str | None, name: str
                  ) -> dict[str, Any] | None:
        """A namespaced (or, with ``namespace`` None, cluster-scoped) object."""
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
                   field_selector: str | None = None, label_selector: str | None = None
                   ) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        if field_selector:
            kwargs["field_selector"] = field_selector
        if label_selector:
            kwargs["label_selector"] = label_selector
        if namespace is None:
            out = await self.custom.list_cluster_custom_object(
                res.group, res.version, res.plural, **kwargs)
        else:
            out = await self.custom.list_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, **kwargs)
        return [i for i in out.get("items") or [] if isinstance(i, dict)]

    async def create_cluster_object(self, res: Resource, body: dict[str, Any]) -> None:
        try:
            await self.custom.create_cluster_custom_object(
                res.group, res.version, res.plural, body, field_manager=FIELD_MANAGER)
        except ApiException as exc:
            _raise_conflict(exc)

    async def patch(self, res: Resource, namespace: str | None, name: str,
                    body: dict[str, Any]) -> bool:
        """Merge-patch an object; False if it is gone."""
        try:
            if namespace is None:
                await self.custom.patch_cluster_custom_object(
                    res.group, res.version, res.plural, name, body,
                    field_manager=FIELD_MANAGER, **_MERGE_PATCH)
            else:
                await self.custom.patch_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, name, body,
                    field_manager=FIELD_MANAGER, **_MERGE_PATCH)
        except ApiException as exc:
            if exc.status == 404:
                return False
            _raise_conflict(exc)
        return True

    async def replace_status(self, res: Resource, obj: dict[str, Any]) -> bool:
        """PUT the status subresource of namespaced ``obj`` (optimistic); False if gone."""
        meta = obj["metadata"]
        try:
            await self.custom.replace_namespaced_custom_object_status(
                res.group, res.version, meta["namespace"], res.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 404:
                return False
            _raise_conflict(exc)
        return True

    async def delete(self, res: Resource, namespace: str | None, name: str) -> None:
        """Delete; gone already is fine."""
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

    # --- nodes, pods, budgets ----------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            return await self._raw(self.core.read_node, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def list_nodes(self) -> list[dict[str, Any]]:
        out = await self._raw(self.core.list_node)
        return [i for i in out.get("items") or [] if isinstance(i, dict)]

    async def patch_node(self, name: str, body: dict[str, Any]) -> bool:
        """Merge-patch a Node; False if it is gone."""
        try:
            await self._raw(self.core.patch_node, name, body, field_manager=FIELD_MANAGER,
                            **_MERGE_PATCH)
        except ApiException as exc:
            if exc.status == 404:
                return False
            _raise_conflict(exc)
        return True

    async def node_pods(self, node: str) -> list[dict[str, Any]]:
        out = await self._raw(self.core.list_pod_for_all_namespaces,
                              field_selector=f"spec.nodeName={node}")
        return [p for p in out.get("items") or []
                if isinstance(p, dict) and (p.get("spec") or {}).get("nodeName") == node]

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._raw(self.core.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def evict(self, namespace: str, name: str) -> EvictionRefused | None:
        """Evict a pod; the refusal when a disruption budget says no (429)."""
        body: Any = {"apiVersion": "policy/v1", "kind": "Eviction",
                     "metadata": {"name": name, "namespace": namespace}}
        try:
            await self.core.create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 429:
                return _refusal(exc)
            raise
        return None

    async def list_pdbs(self, namespace: str) -> list[dict[str, Any]]:
        out = await self._raw(self.policy.list_namespaced_pod_disruption_budget, namespace)
        return [i for i in out.get("items") or [] if isinstance(i, dict)]


def _raise_conflict(exc: ApiException) -> NoReturn:
    if exc.status == 409:
        raise Conflict("conflicting write, deciding again from a fresh read") from None
    raise exc


def _refusal(exc: ApiException) -> EvictionRefused:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    message = str(body.get("message") or exc.reason or exc.status)
    causes = tuple(
        (str(c.get("reason") or ""), str(c.get("message") or ""))
        for c in (body.get("details") or {}).get("causes") or [] if isinstance(c, dict))
    return EvictionRefused(message, causes)
