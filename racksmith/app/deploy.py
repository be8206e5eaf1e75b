"""The kustomize base of ``racksmith manifests``: the controllers on a real cluster.

Owns :func:`kustomize_base`, pure: the files of a kustomize base (name →
YAML documents) that ``kubectl apply -k DIR`` installs on a Kubernetes
cluster:

* ``crds.yaml`` — every Racksmith CRD (what ``racksmith crds`` prints);
* ``namespace.yaml`` — ``racksmith-system``;
* ``rbac.yaml`` — the ServiceAccounts, least-privilege ClusterRoles and
  bindings of every controller and of the process (``racksmith rbac``:
  each controller's declared ``ACCESS``). No role of the host agents: the
  Machine controller gives each host a ServiceAccount, Role and RoleBinding
  of its own in its Machine's namespace (:mod:`racksmith.hostcreds`);
* ``controllers.yaml`` — a Deployment of ``racksmith controllers`` (2
  replicas, leader election, ``/healthz`` and ``/readyz`` probes on port
  8081, resource requests, a non-root read-only container) running as
  ``controller-manager``, each controller with its own ServiceAccount; the
  Ironic connection (ConfigMap ``racksmith-ironic``: URL; Secret
  ``racksmith-ironic-auth``: http_basic user and password, CA bundle);
* ``agent-bootstrap.yaml`` — Secret ``racksmith-system/racksmith-agent``,
  the API server URL and CA the Machine controller writes into hosts' user
  data (placeholders: set them for your cluster);
* ``kustomization.yaml`` — the list, and the controllers' image (``images:``,
  so ``kustomize edit set image`` changes it).

The image is built from ``deploy/Containerfile`` (building it is out of
scope on the project's CI machines: no container runtime there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from racksmith.app.identities import LABELS, MANAGER, NAMESPACE, identity_objects
from racksmith.kinds.crdgen import all_crds, kind_roles
from racksmith.runtime.access import Access

Obj = dict[str, Any]
IMAGE = "ghcr.io/racksmith/racksmith"
PORT = 8081


def _deployment(image: str) -> Obj:
    labels = {"app.kubernetes.io/name": "racksmith-controllers", **LABELS}
    probe = {"httpGet": {"path": "/healthz", "port": PORT}, "periodSeconds": 10}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "racksmith-controllers", "namespace": NAMESPACE,
                     "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "racksmith-controllers"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": MANAGER,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "controllers",
                        "image": image,
                        "args": ["controllers", "--listen", f"0.0.0.0:{PORT}",
                                 "--ironic-url", "$(IRONIC_URL)",
                                 "--ironic-username", "$(IRONIC_USERNAME)",
                                 "--ironic-password-file", "/etc/racksmith/ironic/password",
                                 "--ironic-ca", "/etc/racksmith/ironic/ca.crt",
                                 "--log-format", "json"],
                        "env": [
                            {"name": "IRONIC_URL", "valueFrom": {"configMapKeyRef": {
                                "name": "racksmith-ironic", "key": "url"}}},
                            {"name": "IRONIC_USERNAME", "valueFrom": {"secretKeyRef": {
                                "name": "racksmith-ironic-auth", "key": "username"}}},
                        ],
                        "ports": [{"name": "metrics", "containerPort": PORT}],
                        "livenessProbe": probe,
                        "readinessProbe": {**probe, "httpGet": {"path": "/readyz",
                                                                "port": PORT}},
                        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"},
                                      "limits": {"memory": "1Gi"}},
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "ironic", "mountPath": "/etc/racksmith/ironic",
                                          "readOnly": True},
                                         {"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [
                        {"name": "ironic", "secret": {"secretName": "racksmith-ironic-auth",
                                                      "defaultMode": 0o400}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def _ironic_connection() -> list[Obj]:
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "racksmith-ironic", "namespace": NAMESPACE,
                      "labels": dict(LABELS)},
         "data": {"url": "https://ironic.example:6385"}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "racksmith-ironic-auth", "namespace": NAMESPACE,
                      "labels": dict(LABELS)},
         "stringData": {"username": "CHANGE-ME", "password": "CHANGE-ME",
                        "ca.crt": "-----BEGIN CERTIFICATE-----\nCHANGE-ME\n"
                                  "-----END CERTIFICATE-----\n"}},
    ]


def _agent_bootstrap() -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "racksmith-agent", "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/part-of": "racksmith"}},
            "stringData": {"server": "https://CHANGE-ME:6443",
                           "ca.crt": "-----BEGIN CERTIFICATE-----\nCHANGE-ME\n"
                                     "-----END CERTIFICATE-----\n"}}


def kustomize_base(accesses: Mapping[str, Access], *, image: str = IMAGE,
                   tag: str = "latest") -> dict[str, list[Obj] | Obj]:
    """The files of the base (see the module docstring), in apply order."""
    identities = identity_objects(accesses)
    namespace, rbac = identities[0], identities[1:]
    files: dict[str, list[Obj] | Obj] = {
        "namespace.yaml": [namespace],
        "crds.yaml": all_crds(),
        "rbac.yaml": [*rbac, *kind_roles()],
        "controllers.yaml": [*_ironic_connection(), _deployment(image)],
        "agent-bootstrap.yaml": [_agent_bootstrap()],
    }
    files["kustomization.yaml"] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [name for name in files if name != "kustomization.yaml"],
        "images": [{"name": image, "newTag": tag}],
    }
    return files
