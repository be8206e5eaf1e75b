"""The kubeadm configuration file the agent writes, and reading it back.

Owns ``/etc/kubernetes/kubeadm-<phase>.yaml``: a YAML stream of kubeadm's
``ClusterConfiguration`` and ``InitConfiguration``/``JoinConfiguration``
(``kubeadm.k8s.io/v1beta4``), rendered from the kubeadm state item's
``params.cluster`` (filled in by ``planners.release``), followed by a
``racksmith.io/v1alpha1`` ``ClusterContext`` document holding that context
verbatim (kubeadm ignores documents of unknown groups with a warning). The
emulated kubelet reads the context back for ``controlPlaneCIDRs`` and
``kubernetesVersion``. An optional ``params.configuration`` mapping is
merged into the phase document (e.g. ``discovery`` for a real join).

Pure except :func:`read_cluster_context`, which reads through a ``Host``.
Called by ``executors`` (kubeadm item) and ``kubelet``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from racksmith.agent.host import Host
from racksmith.agent.kubeadm_fields import unknown_fields

__all__ = [
    "KUBEADM_PHASES",
    "KUBELET_CONF",
    "config_path",
    "read_cluster_context",
    "render_config",
    "render_kubelet_conf",
]

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
CONTEXT_API = "racksmith.io/v1alpha1"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
KUBEADM_PHASES = ("init", "join")


def config_path(phase: str) -> str:
    return f"/etc/kubernetes/kubeadm-{phase}.yaml"


def render_config(
    phase: str, cluster: Mapping[str, Any], node_name: str,
    configuration: Mapping[str, Any] | None = None,
) -> str:
    """The kubeadm config stream for ``phase`` (``init`` or ``join``).
    Raises ValueError naming any field of the kubeadm documents (ours or
    ``configuration``'s) that kubeadm v1beta4 does not publish
    (``kubeadm_fields``)."""
    networking = {
        k: v for k, v in (("podSubnet", cluster.get("podSubnet")),
                          ("serviceSubnet", cluster.get("serviceSubnet"))) if v
    }
    # The cluster's CAs come from the management plane (racksmith.controlplane.pki,
    # ECDSA P-256) as kubeadm's external-CA files under /etc/kubernetes/pki:
    # kubeadm issues the rest with the same algorithm.
    cluster_doc: dict[str, Any] = {"apiVersion": KUBEADM_API, "kind": "ClusterConfiguration",
                                   "certificatesDir": "/etc/kubernetes/pki",
                                   "encryptionAlgorithm": "ECDSA-P256"}
    if cluster.get("name"):
        cluster_doc["clusterName"] = cluster["name"]
    if cluster.get("kubernetesVersion"):
        cluster_doc["kubernetesVersion"] = _k8s_version(str(cluster["kubernetesVersion"]))
    if cluster.get("apiServerVIP"):
        port = cluster.get("apiServerPort") or 6443
        cluster_doc["controlPlaneEndpoint"] = f"{cluster['apiServerVIP']}:{port}"
    if networking:
        cluster_doc["networking"] = networking
    phase_doc: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration" if phase == "init" else "JoinConfiguration",
        "nodeRegistration": {"name": node_name, "taints": []},
    }
    phase_doc = _merge(phase_doc, dict(configuration or {}))
    unknown = [*unknown_fields(cluster_doc), *unknown_fields(phase_doc)]
    if unknown:
        raise ValueError(f"kubeadm {KUBEADM_API} publishes no field {', '.join(unknown)}")
    context_doc = {"apiVersion": CONTEXT_API, "kind": "ClusterContext", **dict(cluster)}
    return yaml.safe_dump_all(
        [cluster_doc, phase_doc, context_doc], sort_keys=True, default_flow_style=False
    )


def render_kubelet_conf(cluster: Mapping[str, Any], node_name: str, server: str) -> str:
    """The emulated ``kubelet.conf``: a kubeconfig naming the node, no credentials."""
    name = str(cluster.get("name") or "kubernetes")
    user = f"system:node:{node_name}"
    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "contexts": [{"name": f"{user}@{name}", "context": {"cluster": name, "user": user}}],
        "current-context": f"{user}@{name}",
        "users": [{"name": user, "user": {}}],
    }, sort_keys=True)


def read_cluster_context(host: Host) -> dict[str, Any]:
    """The ``ClusterContext`` of the kubeadm config on ``host`` ({} if none)."""
    for phase in KUBEADM_PHASES:
        raw = host.read_file(config_path(phase))
        if raw is None:
            continue
        try:
            docs = list(yaml.safe_load_all(raw))
        except yaml.YAMLError:
            continue
        for doc in docs:
            if isinstance(doc, dict) and doc.get("apiVersion") == CONTEXT_API:
                return {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
    return {}


def _k8s_version(version: str) -> str:
    return version if version.startswith("v") else f"v{version}"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
