"""The management plane's controllers as identities of their own inside a
managed cluster. Pure.

Owns, for a controller NAME that works inside managed clusters:

* :func:`identity_secret` — Secret ``<cluster>-racksmith-NAME`` (type
  ``kubernetes.io/tls``: ``tls.crt``, ``tls.key``, ``ca.crt``) with a
  client certificate the cluster CA issued for user ``racksmith:NAME`` in
  group ``racksmith:controllers`` — what kube-apiserver's x509
  authenticator (and ``racksmith apiserver --client-ca-file``) reads;
* :func:`cluster_rbac` — inside the cluster, ClusterRole
  ``racksmith:controller:NAME`` with the controller's own ``ACCESS`` rules
  and a ClusterRoleBinding to that user, applied at the cluster's bootstrap
  (never by the management plane with the admin kubeconfig, which is for
  people);
* :func:`needs_renewal` — a certificate within ``RENEW_BEFORE`` of its end
  (or unusable) is issued again.

The caller passes the rules as plain RBAC PolicyRules (the runtime's
``Access.policy_rules()``), so this module stays below the runtime.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography import x509

from racksmith.controlplane.pki import CLUSTER_NAME_LABEL, KeyPair, issue_client, secret_bytes

CONTROLLERS_GROUP = "racksmith:controllers"
CONTROLLER_LABEL = "racksmith.io/controller"
RENEW_BEFORE = dt.timedelta(days=30)


def user_name(controller: str) -> str:
    return f"racksmith:{controller}"


def cluster_role_name(controller: str) -> str:
    return f"racksmith:controller:{controller}"


def identity_secret_name(cluster: str, controller: str) -> str:
    return f"{cluster}-racksmith-{controller}"


def identity_secret(namespace: str, cluster: str, controller: str, ca: KeyPair
                    ) -> dict[str, Any]:
    """A fresh client certificate for ``controller`` in ``cluster``, as a Secret."""
    pair = issue_client(ca, user_name(controller), (CONTROLLERS_GROUP,))
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": identity_secret_name(cluster, controller), "namespace": namespace,
                     "labels": {CLUSTER_NAME_LABEL: cluster, CONTROLLER_LABEL: controller}},
        "data": {"tls.crt": _b64(pair.cert_pem), "tls.key": _b64(pair.key_pem),
                 "ca.crt": _b64(ca.cert_pem)},
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def needs_renewal(secret: Mapping[str, Any], ca: KeyPair, now: dt.datetime) -> bool:
    """Is the identity in ``secret`` unusable, not issued by ``ca``, or within
    ``RENEW_BEFORE`` of its end?"""
    cert_pem, key_pem = secret_bytes(secret, "tls.crt"), secret_bytes(secret, "tls.key")
    if not cert_pem or not key_pem or secret_bytes(secret, "ca.crt") != ca.cert_pem:
        return True
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cert.verify_directly_issued_by(ca.certificate())
        KeyPair(cert_pem, key_pem).private_key()
    except Exception:
        return True
    return cert.not_valid_after_utc - RENEW_BEFORE <= now


def cluster_rbac(rules: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """ClusterRole and ClusterRoleBinding per controller (name → PolicyRules),
    in apply order."""
    out: list[dict[str, Any]] = []
    for controller in sorted(rules):
        role = cluster_role_name(controller)
        labels = {"app.kubernetes.io/part-of": "racksmith", CONTROLLER_LABEL: controller}
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": role, "labels": labels},
                    "rules": [dict(r) for r in rules[controller]]})
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": role, "labels": labels},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                  "name": user_name(controller)}]})
    return out
