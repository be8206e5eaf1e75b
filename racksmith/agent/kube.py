"""The agent's reads and writes, over kubernetes_asyncio.

Owns every API call of the agent: its LCMMachine (read; status subresource
by merge patch), the Node of the host (read, create, ``spec.unschedulable``
by merge patch, status subresource by merge patch), the pods bound to the node (list with
``spec.nodeName=<node>``; status subresource by merge patch), the node
Lease in ``kube-node-lease`` and, for the storage tasks, the node's Volumes (watch
with ``spec.nodeName=<node>``, read, metadata annotations by merge patch)
and StorageClasses (read). Nothing else in the package talks to the API; the
client is built in ``main`` and passed in.
"""

from __future__ import annotations

import base64
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import (
    ApiClient,
    Configuration,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    StorageV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.kinds.lcm import GROUP, LCMMachine
from racksmith.kinds.storage import GROUP as STORAGE_GROUP
from racksmith.kinds.storage import Volume
from racksmith.redact import register_secret
from racksmith.runtime.clock import Clock
from racksmith.runtime.source import KubeSource, Resource

__all__ = ["LEASE_NAMESPACE", "AgentKube", "api_client", "micro_time", "rfc3339"]

VERSION = LCMMachine.info.version
PLURAL = LCMMachine.info.plural
MERGE = "application/merge-patch+json"
LEASE_NAMESPACE = "kube-node-lease"
VOLUMES = Resource(STORAGE_GROUP, Volume.info.version, Volume.info.plural)
PODS = Resource("", "v1", "pods")
FIELD_MANAGER = "racksmith-agent"
# The client picks JSON patch (custom objects) or strategic merge (core) for a
# dict body; force RFC 7386 merge patch. Passed as ** because the bundled
# stubs do not declare the runtime's ``_content_type`` keyword.
_MERGE_PATCH: dict[str, Any] = {"_content_type": MERGE}


def rfc3339(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def api_client(server: str, token: str, ca_data: str | None, scratch: Path) -> ApiClient:
    """An ``ApiClient`` for ``server`` with a bearer ``token`` and CA (base64 PEM).

    The client reads the CA from a file while it is built; that file lives
    in the existing directory ``scratch`` only for that moment. Close with
    ``await c.close()``.
    """
    register_secret(token)  # never in a log line (racksmith.redact)
    configuration = Configuration(host=server.rstrip("/"))
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    if not ca_data:
        return ApiClient(configuration=configuration)
    fd, ca_file = tempfile.mkstemp(dir=scratch, prefix=".racksmith-agent-ca.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(ca_data))
        configuration.ssl_ca_cert = ca_file
        return ApiClient(configuration=configuration)
    finally:
        os.unlink(ca_file)


class AgentKube:
    """The agent's API access (see the module docstring). Every method may be repeated."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)
        self.coordination = CoordinationV1Api(api_client)
        self.storage = StorageV1Api(api_client)

    # --- LCMMachine -------------------------------------------------------------------

    async def get_lcm_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def patch_lcm_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch ``status`` into the LCMMachine's status subresource."""
        await self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": status},
            field_manager=FIELD_MANAGER, **_MERGE_PATCH,
        )

    # --- Node -------------------------------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            node = await self.core.read_node(name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(node)
        return out

    async def create_node(self, body: Any) -> dict[str, Any] | None:
        """Create the Node; None when it exists already (409)."""
        try:
            node = await self.core.create_node(body, field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(node)
        return out

    async def patch_node_status(self, name: str, status: dict[str, Any]) -> None:
        await self.core.patch_node_status(
            name, {"status": status}, field_manager=FIELD_MANAGER, **_MERGE_PATCH
        )

    async def is_unschedulable(self, node: str) -> bool | None:
        obj = await self.get_node(node)
        if obj is None:
            return None
        return bool((obj.get("spec") or {}).get("unschedulable"))

    async def set_unschedulable(self, node: str, value: bool) -> None:
        await self.core.patch_node(
            node, {"spec": {"unschedulable": value}},
            field_manager=FIELD_MANAGER, **_MERGE_PATCH,
        )

    # --- Pods -------------------------------------------------------------------------

    async def node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to ``node`` (field selector ``spec.nodeName``), all namespaces."""
        found = await self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node}")
        out: list[dict[str, Any]] = self.api_client.sanitize_for_serialization(found.items)
        return out

    def pod_source(self, node: str, clock: Clock) -> KubeSource:
        """List+watch of the pods bound to ``node`` (field selector ``spec.nodeName``)."""
        return KubeSource(self.api_client, PODS, field_selector=f"spec.nodeName={node}",
                          clock=clock)

    async def patch_pod_status(self, namespace: str, name: str,
                               status: dict[str, Any]) -> bool:
        """Merge-patch ``status`` into the pod's status subresource; False when
        the pod is gone (404)."""
        try:
            await self.core.patch_namespaced_pod_status(
                name, namespace, {"status": status}, field_manager=FIELD_MANAGER,
                **_MERGE_PATCH,
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # --- Lease ------------------------------------------------------------------------

    async def renew_lease(
        self, node: str, node_uid: str | None, duration: int, now: datetime
    ) -> None:
        """Create or renew Lease ``kube-node-lease/<node>`` held by the node."""
        stamp = micro_time(now)
        try:
            await self.coordination.patch_namespaced_lease(
                node, LEASE_NAMESPACE,
                {"spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                          "renewTime": stamp}},
                field_manager=FIELD_MANAGER, **_MERGE_PATCH,
            )
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        metadata: dict[str, Any] = {"name": node, "namespace": LEASE_NAMESPACE}
        if node_uid:
            metadata["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ]
        body: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                     "acquireTime": stamp, "renewTime": stamp},
        }
        try:
            await self.coordination.create_namespaced_lease(
                LEASE_NAMESPACE, body, field_manager=FIELD_MANAGER
            )
        except ApiException as exc:
            if exc.status != 409:  # created meanwhile: the next renewal patches it
                raise

    # --- Volumes and StorageClasses -------------------------------------------------

    def volume_source(self, node: str, clock: Clock) -> KubeSource:
        """List+watch of the Volumes of ``node`` (field selector ``spec.nodeName``)."""
        return KubeSource(self.api_client, VOLUMES, field_selector=f"spec.nodeName={node}",
                          clock=clock)

    async def get_volume(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_cluster_custom_object(
                VOLUMES.group, VOLUMES.version, VOLUMES.plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def annotate_volume(self, name: str, annotations: dict[str, str]) -> None:
        """Merge-patch ``annotations`` into the Volume's metadata."""
        await self.custom.patch_cluster_custom_object(
            VOLUMES.group, VOLUMES.version, VOLUMES.plural, name,
            {"metadata": {"annotations": annotations}},
            field_manager=FIELD_MANAGER, **_MERGE_PATCH,
        )

    async def get_storage_class(self, name: str) -> dict[str, Any] | None:
        try:
            obj = await self.storage.read_storage_class(name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(obj)
        return out
