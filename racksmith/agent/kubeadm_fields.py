"""The fields kubeadm's ``kubeadm.k8s.io/v1beta4`` API publishes, as data.

Owns :data:`FIELDS` (kind → its fields, nested: a dict for an object, a
one-element list for a list of objects, ``SCALAR`` for anything else,
``ANY_MAP`` for a map of free keys such as ``featureGates``) and
:func:`unknown_fields`, the paths of a document that v1beta4 does not
publish. Read off kubeadm's published v1beta4 types (``InitConfiguration``,
``ClusterConfiguration``, ``JoinConfiguration`` and what they embed:
``NodeRegistrationOptions``, ``APIEndpoint``, ``Discovery``, ``Etcd``,
``Networking``, ``ControlPlaneComponent``, ``Arg``, ``EnvVar``,
``HostPathMount``, ``Patches``, ``Timeouts``, ``BootstrapToken``, core
``Taint``). The kubeadm item refuses a document with a field outside this
list rather than hand kubeadm something it would reject or ignore. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCALAR = "scalar"
ANY_MAP = "map"

_META = {"apiVersion": SCALAR, "kind": SCALAR}
_ARG = {"name": SCALAR, "value": SCALAR}
_ENV = {"name": SCALAR, "value": SCALAR, "valueFrom": ANY_MAP}
_MOUNT = {"name": SCALAR, "hostPath": SCALAR, "mountPath": SCALAR, "readOnly": SCALAR,
          "pathType": SCALAR}
_COMPONENT = {"extraArgs": [_ARG], "extraVolumes": [_MOUNT], "extraEnvs": [_ENV]}
_ENDPOINT = {"advertiseAddress": SCALAR, "bindPort": SCALAR}
_TAINT = {"key": SCALAR, "value": SCALAR, "effect": SCALAR, "timeAdded": SCALAR}
_NODE_REGISTRATION = {
    "name": SCALAR, "criSocket": SCALAR, "taints": [_TAINT], "kubeletExtraArgs": [_ARG],
    "ignorePreflightErrors": SCALAR, "imagePullPolicy": SCALAR, "imagePullSerial": SCALAR,
}
_TIMEOUTS = {k: SCALAR for k in (
    "controlPlaneComponentHealthCheck", "kubeletHealthCheck", "kubernetesAPICall",
    "etcdAPICall", "tlsBootstrap", "discovery", "upgradeManifests")}
_PATCHES = {"directory": SCALAR}
_BOOTSTRAP_TOKEN = {"token": SCALAR, "description": SCALAR, "ttl": SCALAR, "expires": SCALAR,
                    "usages": SCALAR, "groups": SCALAR}
_IMAGE = {"imageRepository": SCALAR, "imageTag": SCALAR}

FIELDS: dict[str, dict[str, Any]] = {
    "InitConfiguration": {
        **_META, "bootstrapTokens": [_BOOTSTRAP_TOKEN], "dryRun": SCALAR,
        "nodeRegistration": _NODE_REGISTRATION, "localAPIEndpoint": _ENDPOINT,
        "certificateKey": SCALAR, "skipPhases": SCALAR, "patches": _PATCHES,
        "timeouts": _TIMEOUTS,
    },
    "ClusterConfiguration": {
        **_META,
        "etcd": {
            "local": {**_IMAGE, "dataDir": SCALAR, "extraArgs": [_ARG], "extraEnvs": [_ENV],
                      "serverCertSANs": SCALAR, "peerCertSANs": SCALAR},
            "external": {"endpoints": SCALAR, "caFile": SCALAR, "certFile": SCALAR,
                         "keyFile": SCALAR},
        },
        "networking": {"serviceSubnet": SCALAR, "podSubnet": SCALAR, "dnsDomain": SCALAR},
        "kubernetesVersion": SCALAR, "controlPlaneEndpoint": SCALAR,
        "apiServer": {**_COMPONENT, "certSANs": SCALAR},
        "controllerManager": _COMPONENT, "scheduler": _COMPONENT,
        "dns": {**_IMAGE, "disabled": SCALAR}, "proxy": {"disabled": SCALAR},
        "certificatesDir": SCALAR, "imageRepository": SCALAR, "featureGates": ANY_MAP,
        "clusterName": SCALAR, "encryptionAlgorithm": SCALAR,
        "certificateValidityPeriod": SCALAR, "caCertificateValidityPeriod": SCALAR,
    },
    "JoinConfiguration": {
        **_META, "dryRun": SCALAR, "nodeRegistration": _NODE_REGISTRATION,
        "caCertPath": SCALAR,
        "discovery": {
            "bootstrapToken": {"token": SCALAR, "apiServerEndpoint": SCALAR,
                               "caCertHashes": SCALAR, "unsafeSkipCAVerification": SCALAR},
            "file": {"kubeConfigPath": SCALAR},
            "tlsBootstrapToken": SCALAR,
        },
        "controlPlane": {"localAPIEndpoint": _ENDPOINT, "certificateKey": SCALAR},
        "skipPhases": SCALAR, "patches": _PATCHES, "timeouts": _TIMEOUTS,
    },
}


def unknown_fields(document: Mapping[str, Any]) -> list[str]:
    """The dotted paths of ``document`` (a v1beta4 document of a kind in
    :data:`FIELDS`) that v1beta4 does not publish; ``[kind]`` for a kind it
    does not have."""
    kind = str(document.get("kind"))
    schema = FIELDS.get(kind)
    if schema is None:
        return [f"kind {kind!r}"]
    out: list[str] = []
    _walk(document, schema, kind, out)
    return out


def _walk(value: Any, schema: Any, path: str, out: list[str]) -> None:
    if schema == SCALAR or schema == ANY_MAP:
        return
    if isinstance(schema, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, schema[0], f"{path}[{i}]", out)
        return
    if not isinstance(value, Mapping):
        return
    for key, item in value.items():
        if key not in schema:
            out.append(f"{path}.{key}")
            continue
        _walk(item, schema[key], f"{path}.{key}", out)
