"""The kubeadm configuration file the agent writes, and reading it back.

Owns ``/etc/kubernetes/kubeadm-<phase>.yaml``: a YAML stream of kubeadm's
``ClusterConfiguration`` and ``InitConfiguration``/``JoinConfiguration``
(``kubeadm.k8s.io/v1beta4``), rendered from the kubeadm state item's
``params.cluster`` (filled in by ``planners.release``), followed by a
``racksmith.io/v1alpha1`` ``ClusterContext`` document holding that context
verbatim (kubeadm ignores documents of unknown groups with a warning). The
emulated kubelet reads the context back for ``controlPlaneCIDRs`` and
``kubernetesVersion``. An optional ``params.configuration`` mapping is
merged into the phase document (e.g. ``discovery`` for a real join). A
control-plane machine behind the API VIP's HAProxy (``planners.apivip``)
gets ``localAPIEndpoint`` (``advertiseAddress``, ``bindPort``) in its
InitConfiguration, or under ``controlPlane`` in its JoinConfiguration.

Also owns ``/etc/kubernetes/kubelet.conf`` as the emulated kubeadm writes
it (:func:`render_kubelet_conf`) and reading it back
(:func:`parse_kubelet_conf`). When the host has the kubelet's credentials
in kubeadm's layout — the cluster CA ``/etc/kubernetes/pki/ca.crt`` and
``/var/lib/kubelet/pki/kubelet-client-current.pem`` (the client certificate
``system:node:<node>`` of group ``system:nodes`` followed by its key; the
Machine controller writes both into the user data of a cluster with a
control plane of its own) — kubelet.conf is a kubeconfig for the cluster's
endpoint ``https://<apiServerVIP>:<apiServerPort>`` with those files; else
it names the node and carries no credentials (the kubelet then talks to
the management API). Paths inside are the host's paths.

The kubeadm item merges the join file the user data wrote
(:func:`read_join`: bootstrap token discovery and the certificate key,
``racksmith.controlplane.jointoken``) into the phase document, under the
item's own ``params.configuration``.

Pure except :func:`read_cluster_context`, :func:`has_kubelet_credentials`
and :func:`read_join`, which read through a ``Host``. Called by ``executors`` (kubeadm item),
``kubelet`` and ``kube``.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from racksmith.agent.host import Host, HostError
from racksmith.agent.kubeadm_fields import unknown_fields
from racksmith.controlplane.jointoken import JOIN_FILE

__all__ = [
    "CLUSTER_CA",
    "KUBEADM_PHASES",
    "KUBELET_CLIENT",
    "KUBELET_CONF",
    "KubeletConf",
    "cluster_endpoint",
    "config_path",
    "has_kubelet_credentials",
    "merged",
    "parse_kubelet_conf",
    "read_cluster_context",
    "read_join",
    "render_config",
    "render_kubelet_conf",
]

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
CONTEXT_API = "racksmith.io/v1alpha1"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
CLUSTER_CA = "/etc/kubernetes/pki/ca.crt"
KUBELET_CLIENT = "/var/lib/kubelet/pki/kubelet-client-current.pem"
"""The kubelet's client certificate PEM followed by its key PEM (kubeadm's layout)."""
DEFAULT_API_PORT = 6443
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
    local = _local_api_endpoint(cluster)
    if local and phase == "init":
        phase_doc["localAPIEndpoint"] = local
    elif local and "master" in (cluster.get("roles") or []):
        phase_doc["controlPlane"] = {"localAPIEndpoint": local}
    phase_doc = _merge(phase_doc, dict(configuration or {}))
    unknown = [*unknown_fields(cluster_doc), *unknown_fields(phase_doc)]
    if unknown:
        raise ValueError(f"kubeadm {KUBEADM_API} publishes no field {', '.join(unknown)}")
    context_doc = {"apiVersion": CONTEXT_API, "kind": "ClusterContext", **dict(cluster)}
    return yaml.safe_dump_all(
        [cluster_doc, phase_doc, context_doc], sort_keys=True, default_flow_style=False
    )


def cluster_endpoint(cluster: Mapping[str, Any]) -> str | None:
    """``https://<apiServerVIP>:<apiServerPort>`` of the cluster context (None:
    no VIP)."""
    vip = str(cluster.get("apiServerVIP") or "").strip()
    if not vip:
        return None
    try:
        host = f"[{vip}]" if ipaddress.ip_address(vip).version == 6 else vip
    except ValueError:
        host = vip  # a DNS name
    return f"https://{host}:{int(cluster.get('apiServerPort') or DEFAULT_API_PORT)}"


def has_kubelet_credentials(host: Host) -> bool:
    """The host has the cluster CA and the kubelet's client certificate."""
    return host.exists(CLUSTER_CA) and host.exists(KUBELET_CLIENT)


def render_kubelet_conf(cluster: Mapping[str, Any], node_name: str, server: str,
                        *, credentials: bool = False) -> str:
    """The emulated ``kubelet.conf``: a kubeconfig naming the node.

    With ``credentials`` (the host has :data:`CLUSTER_CA` and
    :data:`KUBELET_CLIENT`) and a cluster endpoint, its server is the
    cluster's endpoint and it names those files (client certificate and key
    both :data:`KUBELET_CLIENT`, as kubeadm writes it); else its server is
    ``server`` (the management API) and it carries no credentials."""
    name = str(cluster.get("name") or "kubernetes")
    user = f"system:node:{node_name}"
    endpoint = cluster_endpoint(cluster) if credentials else None
    entry: dict[str, Any] = {"server": endpoint or server}
    auth: dict[str, Any] = {}
    if endpoint is not None:
        entry["certificate-authority"] = CLUSTER_CA
        auth = {"client-certificate": KUBELET_CLIENT, "client-key": KUBELET_CLIENT}
    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": entry}],
        "contexts": [{"name": f"{user}@{name}", "context": {"cluster": name, "user": user}}],
        "current-context": f"{user}@{name}",
        "users": [{"name": user, "user": auth}],
    }, sort_keys=True)


@dataclass(frozen=True)
class KubeletConf:
    """What a kubelet.conf says of the API it reaches (host paths)."""

    server: str
    certificate_authority: str | None = None
    certificate_authority_data: str | None = None
    """The CA embedded (base64 PEM), as the real kubeadm writes kubelet.conf."""
    client_certificate: str | None = None
    client_key: str | None = None

    @property
    def has_credentials(self) -> bool:
        """A client certificate (a file) and the CA to verify the server with."""
        return bool((self.certificate_authority or self.certificate_authority_data)
                    and self.client_certificate)


def parse_kubelet_conf(raw: bytes | str | None) -> KubeletConf | None:
    """The current context's server, CA (file or embedded) and client
    certificate/key files of a kubelet.conf (None: no file, not a
    kubeconfig, or no server). An embedded client certificate or key
    (``client-*-data``) is not used: kubeadm names the rotated files.
    The agent looks at the file before each node-side call, so the result
    is kept per content (it is immutable), parsed by libyaml on a miss."""
    if raw is None:
        return None
    return _parse_kubelet_conf(raw)


@functools.lru_cache(maxsize=8)
def _parse_kubelet_conf(raw: bytes | str) -> KubeletConf | None:
    try:
        doc = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    context = _named(doc.get("contexts"), doc.get("current-context")).get("context") or {}
    if not isinstance(context, dict):
        return None
    cluster = _named(doc.get("clusters"), context.get("cluster")).get("cluster") or {}
    user = _named(doc.get("users"), context.get("user")).get("user") or {}
    if not isinstance(cluster, dict) or not isinstance(user, dict):
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        return None

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    cert = text(user.get("client-certificate"))
    return KubeletConf(server=server,
                       certificate_authority=text(cluster.get("certificate-authority")),
                       certificate_authority_data=text(
                           cluster.get("certificate-authority-data")),
                       client_certificate=cert,
                       client_key=text(user.get("client-key")) or cert)


def _named(entries: Any, name: Any) -> dict[str, Any]:
    """The entry called ``name`` of a kubeconfig list (the only one when
    ``name`` is unset); {} if none."""
    items = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    if not name and len(items) == 1:
        return items[0]
    return next((e for e in items if e.get("name") == name), {})


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


def read_join(host: Host, phase: str) -> dict[str, Any]:
    """The ``phase`` part of the join file the user data wrote
    (``racksmith.controlplane.jointoken.JOIN_FILE``: bootstrap token
    discovery, certificate key); {} without one. Raises ValueError for a file
    that is not YAML (never quoting it: it holds a token)."""
    try:
        raw = host.read_file(JOIN_FILE)
    except (OSError, HostError):
        return {}
    if raw is None:
        return {}
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ValueError(f"{JOIN_FILE} is not YAML") from None
    part = doc.get(phase) if isinstance(doc, dict) else None
    return dict(part) if isinstance(part, dict) else {}


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in (mappings deeply, ``extra`` wins)."""
    return _merge(dict(base), dict(extra))


def _local_api_endpoint(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """kubeadm's ``localAPIEndpoint`` of a control-plane machine: where its
    API server listens when the API VIP's HAProxy holds the endpoint's port
    (``planners.apivip``: ``advertiseAddress``, ``apiServerBindPort``)."""
    local: dict[str, Any] = {}
    if cluster.get("advertiseAddress"):
        local["advertiseAddress"] = str(cluster["advertiseAddress"])
    if cluster.get("apiServerBindPort"):
        local["bindPort"] = int(cluster["apiServerBindPort"])
    return local


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
