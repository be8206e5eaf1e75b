"""How ``racksmith up`` gives each cluster-side controller its way into the
managed clusters (``racksmith.runtime.planes``).

Owns :func:`planes`: with a per-cluster tracker (the clusters serve their
own API), one :class:`~racksmith.runtime.planes.RemotePlane` per controller
identity of ``racksmith.controllers.CLUSTER_IDENTITIES``, whose access to a
cluster is read from the management API by :class:`AccessReader` — the
endpoint of ``Cluster.status.controlPlaneEndpoint`` (as the management
plane reaches it, ``reach``) and the identity Secret
``<cluster>-racksmith-<controller>`` the Cluster controller issues
(``tls.crt``, ``tls.key``, ``ca.crt``). Without a tracker, every
controller's plane is the management API itself
(:class:`~racksmith.runtime.planes.SharedPlane`).

An access read is kept ``ttl`` seconds (a reconcile of a node-side
controller would otherwise read the identity Secret live every time): a
renewed identity or a moved endpoint is picked up within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from racksmith.controlplane.identities import identity_secret_name
from racksmith.controlplane.pki import secret_bytes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.clusters import ClusterAccess, ClusterClients
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.planes import ClusterPlane, RemotePlane, SharedPlane
from racksmith.runtime.resources import CLUSTERS, SECRETS


class AccessReader:
    """Reads (and keeps ``ttl`` seconds) how an identity reaches a cluster."""

    def __init__(self, management: Client, reach: Callable[[str], str] | None = None,
                 ttl: float = 60.0) -> None:
        self.management = management
        self.reach = reach
        self.ttl = ttl
        self._kept: dict[tuple[ObjectKey, str], tuple[float, ClusterAccess]] = {}

    async def __call__(self, key: ObjectKey, identity: str) -> ClusterAccess | None:
        now = time.monotonic()
        kept = self._kept.get((key, identity))
        if kept is not None and kept[0] > now:
            return kept[1]
        access = await self.read(key, identity)
        if access is None:
            self._kept.pop((key, identity), None)
        else:
            self._kept[(key, identity)] = (now + self.ttl, access)
        return access

    async def read(self, key: ObjectKey, identity: str) -> ClusterAccess | None:
        cluster = await self.management.get(CLUSTERS, key.namespace, key.name)
        if cluster is None:
            return None
        endpoint = (cluster.get("status") or {}).get("controlPlaneEndpoint") or {}
        host, port = endpoint.get("host"), endpoint.get("port")
        if not isinstance(host, str) or not host or not isinstance(port, int):
            return None
        secret = await self.management.get(
            SECRETS, key.namespace, identity_secret_name(key.name, identity), live=True)
        if secret is None:
            return None
        cert, private, ca = (secret_bytes(secret, k) for k in ("tls.crt", "tls.key", "ca.crt"))
        if not cert or not private or not ca:
            return None
        target = self.reach(host) if self.reach is not None else host
        return ClusterAccess(server=f"https://{target}:{port}", ca_pem=ca, cert_pem=cert,
                             key_pem=private)


def planes(client_for: Callable[[str], Client], identities: Iterable[str],
           clusters: ClusterClients | None, reach: Callable[[str], str] | None, *,
           reader: Any = None) -> dict[str, ClusterPlane]:
    """Each identity's plane (see the module docstring). ``reader``: the
    client that reads the Clusters and identity Secrets (the Cluster
    controller's, which issues them; None: each identity's own)."""
    out: dict[str, ClusterPlane] = {}
    shared = AccessReader(as_client(reader), reach) if reader is not None else None
    for identity in identities:
        management = client_for(identity)
        if clusters is None:
            out[identity] = SharedPlane(management)
        else:
            out[identity] = RemotePlane(
                management, clusters, identity,
                shared if shared is not None else AccessReader(management, reach), CLUSTERS)
    return out


__all__ = ["AccessReader", "planes"]
