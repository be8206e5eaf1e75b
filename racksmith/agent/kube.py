"""The agent's reads and writes, through the runtime ``Client``.

Owns every API call of the agent: its LCMMachine (read; status subresource
by merge patch), the Node of the host (read, create, ``spec.unschedulable``
by merge patch, status subresource by merge patch), the pods bound to the node (list with
``spec.nodeName=<node>``; status subresource by merge patch), the node
Lease in ``kube-node-lease`` and, for the storage tasks, the node's Volumes (watch
with ``spec.nodeName=<node>``, read, metadata annotations by merge patch)
and StorageClasses (read). Nothing else in the package talks to the API; the
client is built in ``main`` and passed in. The Client's error model
(``NotFound``, ``AlreadyExists``...) is the only one it sees.

Reads are live except four, answered from a cache as controllers' are:
the pods of the node from the emulated kubelet's watch of them (the
informer of ``pod_source``; the kubelet's tick listed them live),
the LCMMachine from the agent's watch of it (the informer of
``lcm_source``, field selector ``metadata.name``: the agent's loop polls
it every few seconds, which was a live GET each time — 200 a second for
1,000 idle hosts — and now wakes on its events), a Volume from the node's
own Volume watch (the informer of ``volume_source``, field selector
``spec.nodeName``), each once it has listed — the object the event told of
or newer, with the agent's own patches offered to it so the next read sees
them —, and a StorageClass from a StorageClass informer while
``storage_class_cache`` runs. Before a cache has listed, the read is live.
(Measured: the live re-read of every Volume on every one of its events was
~5 GETs per volume, a third of the API server's requests in
``bench/volumes.py``.)
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import tempfile
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, Configuration

from racksmith.clock import Clock
from racksmith.election import micro_time
from racksmith.redact import register_secret
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.informer import SharedInformer
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.kubeclient import resolve_proxy_once
from racksmith.runtime.resources import (
    LCMMACHINES,
    NODES,
    PODS,
    STORAGE_CLASSES,
    VOLUMES,
)
from racksmith.runtime.source import KubeSource, Resource

__all__ = ["LEASE_NAMESPACE", "AgentKube", "api_client", "rfc3339"]

LEASE_NAMESPACE = "kube-node-lease"
LEASES = Resource("coordination.k8s.io", "v1", "leases")
FIELD_MANAGER = "racksmith-agent"


def rfc3339(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


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
        client = ApiClient(configuration=configuration)
        resolve_proxy_once(client)
        return client
    fd, ca_file = tempfile.mkstemp(dir=scratch, prefix=".racksmith-agent-ca.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(ca_data))
        configuration.ssl_ca_cert = ca_file
        client = ApiClient(configuration=configuration)
        resolve_proxy_once(client)
        return client
    finally:
        os.unlink(ca_file)


def _offer(informer: SharedInformer | None, written: dict[str, Any]) -> None:
    """Hand our own write's answer to the watch's cache: the next read sees it
    before its watch event does."""
    if informer is not None:
        informer.offer(written)


class AgentKube:
    """The agent's API access (see the module docstring). Every method may be
    repeated. Patches are RFC 7386 merge patches."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self._volumes: SharedInformer | None = None
        self._lcm: SharedInformer | None = None
        self._pods: SharedInformer | None = None

    async def _read(self, informer: SharedInformer | None, resource: Resource,
                    namespace: str | None, name: str) -> dict[str, Any] | None:
        """Object ``namespace/name`` (a copy) from ``informer`` once it has listed
        (None: gone, or outside its selector); a live GET before."""
        if informer is not None and informer.has_synced:
            found = informer.get(ObjectKey(namespace or "", name))
            return copy.deepcopy(found) if found is not None else None
        return await self.client.get(resource, namespace, name, live=True)

    # --- LCMMachine -------------------------------------------------------------------

    def lcm_source(self, namespace: str, name: str, clock: Clock) -> KubeSource:
        """List+watch of LCMMachine ``namespace/name`` alone (field selector
        ``metadata.name``, all a host identity may watch); its informer
        answers ``get_lcm_machine`` once it has listed."""
        source = KubeSource(self.api_client, LCMMACHINES, namespace=namespace,
                            field_selector=f"metadata.name={name}", clock=clock)
        self._lcm = source.informer
        return source

    async def get_lcm_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The LCMMachine (a copy) from the agent's watch of it once it has
        listed (None: gone); live before."""
        return await self._read(self._lcm, LCMMACHINES, namespace, name)

    async def patch_lcm_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch ``status`` into the LCMMachine's status subresource."""
        _offer(self._lcm, await self.client.patch(LCMMACHINES, namespace, name,
                                                  {"status": status}, status=True))

    # --- Node -------------------------------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        return await self.client.get(NODES, None, name, live=True)

    async def create_node(self, body: Any) -> dict[str, Any] | None:
        """Create the Node; None when it exists already (409)."""
        try:
            return await self.client.create(NODES, body)
        except AlreadyExists:
            return None

    async def patch_node_status(self, name: str, status: dict[str, Any]) -> None:
        await self.client.patch(NODES, None, name, {"status": status}, status=True)

    async def is_unschedulable(self, node: str) -> bool | None:
        obj = await self.get_node(node)
        if obj is None:
            return None
        return bool((obj.get("spec") or {}).get("unschedulable"))

    async def set_unschedulable(self, node: str, value: bool) -> None:
        await self.client.patch(NODES, None, node, {"spec": {"unschedulable": value}})

    # --- Pods -------------------------------------------------------------------------

    async def node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to ``node`` (field selector ``spec.nodeName``), all
        namespaces: copies from the node's pod watch once it has listed, live
        before."""
        informer = self._pods
        if informer is not None and informer.has_synced:
            return [copy.deepcopy(p) for p in informer.list()]
        return await self.client.list(PODS, fields={"spec.nodeName": node}, live=True)

    def pod_source(self, node: str, clock: Clock) -> KubeSource:
        """List+watch of the pods bound to ``node`` (field selector
        ``spec.nodeName``); its informer answers ``node_pods`` once it has listed."""
        source = KubeSource(self.api_client, PODS, field_selector=f"spec.nodeName={node}",
                            clock=clock)
        self._pods = source.informer
        return source

    async def patch_pod_status(self, namespace: str, name: str,
                               status: dict[str, Any]) -> bool:
        """Merge-patch ``status`` into the pod's status subresource; False when
        the pod is gone (404)."""
        try:
            out = await self.client.patch(PODS, namespace, name, {"status": status},
                                          status=True)
        except NotFound:
            return False
        _offer(self._pods, out)
        return True

    # --- Lease ------------------------------------------------------------------------

    async def renew_lease(
        self, node: str, node_uid: str | None, duration: int, now: datetime
    ) -> bool:
        """Create or renew Lease ``kube-node-lease/<node>`` held by the node;
        False when it did not exist (made now)."""
        stamp = micro_time(now)
        try:
            await self.client.patch(
                LEASES, LEASE_NAMESPACE, node,
                {"spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                          "renewTime": stamp}})
            return True
        except NotFound:
            pass
        metadata: dict[str, Any] = {"name": node, "namespace": LEASE_NAMESPACE}
        if node_uid:
            metadata["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ]
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                     "acquireTime": stamp, "renewTime": stamp},
        }
        try:
            await self.client.create(LEASES, body)
        except AlreadyExists:
            pass  # created meanwhile: the next renewal patches it
        return False

    # --- Volumes and StorageClasses -------------------------------------------------

    def volume_source(self, node: str, clock: Clock) -> KubeSource:
        """List+watch of the Volumes of ``node`` (field selector ``spec.nodeName``);
        its informer answers ``get_volume`` once it has listed."""
        source = KubeSource(self.api_client, VOLUMES, field_selector=f"spec.nodeName={node}",
                            clock=clock)
        self._volumes = source.informer
        return source

    async def get_volume(self, name: str) -> dict[str, Any] | None:
        """Volume ``name`` (a copy) from the node's Volume watch once it has
        listed (None: not a Volume of this node, or gone); live before."""
        return await self._read(self._volumes, VOLUMES, None, name)

    async def annotate_volume(self, name: str, annotations: dict[str, str]) -> None:
        """Merge-patch ``annotations`` into the Volume's metadata."""
        _offer(self._volumes, await self.client.patch(
            VOLUMES, None, name, {"metadata": {"annotations": annotations}}))

    @contextlib.asynccontextmanager
    async def storage_class_cache(self) -> AsyncIterator[None]:
        """While open, ``get_storage_class`` answers from a StorageClass informer
        (once it has listed)."""
        informer = self.client.informer(STORAGE_CLASSES)
        informer.acquire()
        try:
            yield
        finally:
            await informer.release()

    async def get_storage_class(self, name: str) -> dict[str, Any] | None:
        return await self.client.get(STORAGE_CLASSES, None, name)
