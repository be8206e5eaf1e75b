"""``racksmith kubeconfig --cluster NS/NAME``: a managed cluster's admin kubeconfig.

Owns reading the Secret ``<cluster>-kubeconfig`` (key ``value``, Cluster
API's convention) from the management API with the management kubeconfig,
and saying clearly why it cannot: no such Cluster, no Secret yet (with the
Cluster's own word, its ``ControlPlaneReachable`` or
``ControlPlaneEndpointValid`` condition), or a Secret without a usable
kubeconfig. The text is printed or merged by the caller; it is never logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from racksmith.controlplane.kubeconfig import (
    KubeconfigDamaged,
    kubeconfig_secret_name,
    kubeconfig_text,
)
from racksmith.runtime.client import Client
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.resources import CLUSTERS, SECRETS


class ClusterKubeconfigError(RuntimeError):
    """Why a cluster's kubeconfig cannot be had (never its content)."""


def parse_ref(ref: str) -> tuple[str, str]:
    """``NS/NAME`` (or ``NAME`` in ``default``) → (namespace, name)."""
    namespace, _, name = ref.rpartition("/")
    if not name or "/" in namespace:
        raise ValueError(f"{ref!r} is not NAMESPACE/NAME")
    return namespace or "default", name


def _why_not(cluster: Mapping[str, Any]) -> str:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    for wanted in ("ControlPlaneEndpointValid", "CertificatesAvailable",
                   "ControlPlaneReachable"):
        for cond in conditions:
            if cond.get("type") == wanted and cond.get("status") == "False":
                return f"{wanted}: {cond.get('reason')}: {cond.get('message')}"
    return "the Cluster controller has not written it yet"


async def cluster_kubeconfig(management: Path | None, namespace: str, name: str) -> str:
    """The admin kubeconfig of Cluster ``namespace/name``."""
    client = await api_client(management)
    api = Client(client, field_manager="racksmith-cli")
    try:
        cluster = await api.get(CLUSTERS, namespace, name, live=True)
        if cluster is None:
            raise ClusterKubeconfigError(f"Cluster {namespace}/{name} not found")
        secret = await api.get(SECRETS, namespace, kubeconfig_secret_name(name), live=True)
        if secret is None:
            raise ClusterKubeconfigError(
                f"Secret {namespace}/{kubeconfig_secret_name(name)} does not exist: "
                f"{_why_not(cluster)}")
        try:
            return kubeconfig_text(secret)
        except KubeconfigDamaged as exc:
            raise ClusterKubeconfigError(
                f"Secret {namespace}/{kubeconfig_secret_name(name)} {exc}") from None
    finally:
        await client.close()
