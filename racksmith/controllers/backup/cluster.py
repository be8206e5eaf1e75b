"""Where a managed cluster's own store is, for a ControlPlaneBackup that names it.

Owns :func:`cluster_store`, which reads a :class:`~racksmith.snapshots.ClusterStore`
(the etcd members of a cluster's stacked control plane and a client
certificate for them) from the management API: the Cluster (its control-plane networks),
its control-plane Machines (role master, not being deleted: each one runs an
etcd member on its control-plane address, kubeadm's stacked layout), and
the Secret ``<cluster>-etcd`` (the cluster's etcd CA, Cluster API's name),
from which a client certificate is issued for this one snapshot, as
kubeadm's ``healthcheck-client`` is. ``reach`` maps a member's address to
where the management plane connects (the virtual datacenter's loopback
image). Every problem is a :class:`SnapshotFailed` naming objects, never a
secret. Called by ``controller``; the snapshot itself is the
``Snapshotter``'s.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from racksmith.controlplane.pki import PkiDamaged, issue_client, parse_pair
from racksmith.controlplane.pki import secret_name as pki_secret_name
from racksmith.runtime.client import Client
from racksmith.runtime.resources import CLUSTERS, MACHINES, SECRETS
from racksmith.snapshots import ClusterStore, SnapshotFailed

ETCD_CLIENT_PORT = 2379
CLIENT_USER = "racksmith-backup"


def member_addresses(machines: Sequence[Mapping[str, Any]], cluster: str,
                     cidrs: Sequence[str]) -> list[str]:
    """The control-plane addresses of the cluster's masters (raw Machines of its
    namespace), in Machine name order: each one's InternalIP inside the
    control-plane networks (the first such), else its first InternalIP."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            continue
    found: list[tuple[str, str]] = []
    for raw in machines:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        if spec.get("clusterName") != cluster or meta.get("deletionTimestamp") or \
                "master" not in (spec.get("roles") or []):
            continue
        internal = [a.get("address") for a in (raw.get("status") or {}).get("addresses") or []
                    if a.get("type") == "InternalIP" and a.get("address")]
        inside = [a for a in internal if _within(a, networks)]
        chosen = (inside or internal or [None])[0]
        if chosen:
            found.append((str(meta.get("name") or ""), str(chosen)))
    return [address for _, address in sorted(found)]


def _within(address: str, networks: list[Any]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in n for n in networks)


async def cluster_store(client: Client, namespace: str, name: str,
                        reach: Callable[[str], str] | None = None) -> ClusterStore:
    """The store of Cluster ``namespace/name`` (module docstring)."""
    cluster = await client.get(CLUSTERS, namespace, name, live=True)
    if cluster is None:
        raise SnapshotFailed(f"Cluster {namespace}/{name} not found")
    cidrs = ((cluster.get("spec") or {}).get("networks") or {}).get("controlPlaneCIDRs") or []
    machines = await client.list(MACHINES, namespace, live=True)
    addresses = member_addresses(machines, name, cidrs)
    if not addresses:
        raise SnapshotFailed(f"Cluster {namespace}/{name} has no control-plane machine "
                             "with an address: no etcd member to snapshot")
    secret_id = pki_secret_name(name, "etcd")
    try:
        ca = parse_pair(name, "etcd", await client.get(SECRETS, namespace, secret_id,
                                                       live=True))
    except PkiDamaged as exc:
        raise SnapshotFailed(f"the cluster's etcd CA: {exc}") from None
    leaf = issue_client(ca, CLIENT_USER)
    mapped = [reach(a) if reach is not None else a for a in addresses]
    return ClusterStore(cluster=f"{namespace}/{name}",
                        endpoints=tuple(f"https://{a}:{ETCD_CLIENT_PORT}" for a in mapped),
                        ca_pem=ca.cert_pem, cert_pem=leaf.cert_pem, key_pem=leaf.key_pem)
