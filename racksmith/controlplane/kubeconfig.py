"""A cluster's admin kubeconfig, for people: Cluster API's ``<cluster>-kubeconfig``.

Owns :func:`admin_kubeconfig` (a kubeconfig for the cluster's endpoint with
the cluster CA and a client certificate for ``kubernetes-admin`` in
``system:masters``, the cluster, user and context named as Cluster API
names them: ``<cluster>``, ``<cluster>-admin``, ``<cluster>-admin@<cluster>``),
:func:`kubeconfig_secret` (the Secret that holds it under the key
``value``) and :func:`check_kubeconfig` (is a stored one still usable for
this cluster: parseable, for the current endpoint, trusting the cluster's
CA, with a client certificate that CA issued). Controllers never use it:
they reach a cluster with identities of their own. Pure.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from racksmith.controlplane.endpoint import Endpoint
from racksmith.controlplane.pki import (
    CLUSTER_NAME_LABEL,
    SECRET_TYPE,
    KeyPair,
    issue_client,
    secret_bytes,
)

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUPS = ("system:masters",)
KUBECONFIG_KEY = "value"


class KubeconfigDamaged(ValueError):
    """A stored kubeconfig this cluster cannot use (the message never quotes it)."""


class KubeconfigStale(KubeconfigDamaged):
    """A sound kubeconfig of this cluster for an endpoint it no longer has."""


def kubeconfig_secret_name(cluster: str) -> str:
    return f"{cluster}-kubeconfig"


def names(cluster: str) -> tuple[str, str, str]:
    """(cluster entry, user entry, context) as Cluster API names them."""
    user = f"{cluster}-admin"
    return cluster, user, f"{user}@{cluster}"


def admin_kubeconfig(cluster: str, endpoint: Endpoint, ca: KeyPair) -> str:
    """A new admin kubeconfig (a fresh client certificate each call)."""
    client = issue_client(ca, ADMIN_USER, ADMIN_GROUPS)
    cluster_entry, user, context = names(cluster)
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": cluster_entry, "cluster": {
            "server": endpoint.url(),
            "certificate-authority-data": _b64(ca.cert_pem)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": _b64(client.cert_pem),
            "client-key-data": _b64(client.key_pem)}}],
        "contexts": [{"name": context, "context": {"cluster": cluster_entry, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return str(yaml.safe_dump(config, sort_keys=False))


def kubeconfig_secret(namespace: str, cluster: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
        "metadata": {"name": kubeconfig_secret_name(cluster), "namespace": namespace,
                     "labels": {CLUSTER_NAME_LABEL: cluster}},
        "data": {KUBECONFIG_KEY: _b64(text.encode())},
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_text(secret: Mapping[str, Any]) -> str:
    """The kubeconfig a Secret holds; raises :class:`KubeconfigDamaged`."""
    raw = secret_bytes(secret, KUBECONFIG_KEY)
    if raw is None:
        raise KubeconfigDamaged(f"has no usable key {KUBECONFIG_KEY!r}")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise KubeconfigDamaged(f"key {KUBECONFIG_KEY!r} is not text") from None


def check_kubeconfig(secret: Mapping[str, Any], cluster: str, endpoint: Endpoint,
                     ca: KeyPair) -> None:
    """Raise :class:`KubeconfigDamaged` (saying what is wrong, never quoting
    the file) unless the Secret's kubeconfig trusts the cluster CA and
    carries a client certificate that CA issued, and :class:`KubeconfigStale`
    when it does but points elsewhere than ``endpoint``."""
    try:
        config = yaml.safe_load(kubeconfig_text(secret))
    except yaml.YAMLError:
        raise KubeconfigDamaged("is not YAML") from None
    if not isinstance(config, dict):
        raise KubeconfigDamaged("is not a kubeconfig")
    current = config.get("current-context")
    context = _entry(config, "contexts", current, "context")
    entry = _entry(config, "clusters", context.get("cluster"), "cluster")
    user = _entry(config, "users", context.get("user"), "user")
    try:
        ca_pem = base64.b64decode(str(entry.get("certificate-authority-data", "")),
                                  validate=True)
        cert_pem = base64.b64decode(str(user.get("client-certificate-data", "")),
                                    validate=True)
        cert = x509.load_pem_x509_certificate(cert_pem)
        cert.verify_directly_issued_by(ca.certificate())
    except (ValueError, TypeError, InvalidSignature):
        raise KubeconfigDamaged("holds no client certificate issued by the cluster's "
                                "CA") from None
    if ca_pem.strip() != ca.cert_pem.strip():
        raise KubeconfigDamaged("does not trust the cluster's CA")
    if entry.get("server") != endpoint.url():
        raise KubeconfigStale(f"points at {entry.get('server')!r}, not the cluster's "
                              f"endpoint {endpoint.url()}")


def _entry(config: Mapping[str, Any], section: str, name: Any, key: str) -> dict[str, Any]:
    for item in config.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name and isinstance(
                item.get(key), dict):
            return dict(item[key])
    raise KubeconfigDamaged(f"has no {section[:-1]} {name!r}")
