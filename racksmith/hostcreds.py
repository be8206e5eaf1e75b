"""A host agent's credentials in the management API: their names and rights.

Owns the naming of what ties a host agent to its machine, shared by the
Machine controller (which makes them), the embedded API server's host
restriction (which recognises them) and the agent (which renews its token):

* ServiceAccount ``racksmith-host-<machine>`` in the machine's namespace:
  the host agent's identity (one per host, as each kubelet has a user of
  its own);
* Secret ``<machine>-user-data``: the user data that carries the token.
  The token is bound to it (TokenRequest ``boundObjectRef`` kind Secret,
  name and uid, as kube allows), so deleting the Secret — which deleting
  the Machine does — revokes the token on any kube-apiserver;
* Role and RoleBinding ``racksmith-host-<machine>``: the host's rights,
  plain RBAC with ``resourceNames`` (:func:`host_role_rules`): its own
  LCMMachine (get; list and watch pinned with
  ``fieldSelector=metadata.name=<machine>``, which RBAC treats as a get of
  that name), its status, and new tokens of its own ServiceAccount. Nothing
  else in the management API: the node side (Node, Lease, pods, Volumes)
  is the cluster's own API, reached with the kubelet's certificate.

The ServiceAccount, Role and RoleBinding are owned by the Machine (garbage
collected with it); the Machine controller deletes the Secret itself when
the Machine goes. Pure data; imports nothing of Racksmith's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["HOST_PREFIX", "LCM_GROUP", "RBAC_GROUP", "bound_to_user_data", "host_objects",
           "host_role_rules", "host_service_account", "machine_of", "user_data_secret"]

HOST_PREFIX = "racksmith-host-"
"""Prefix of a host's ServiceAccount, Role and RoleBinding names."""
LCM_GROUP = "lcm.racksmith.io"
RBAC_GROUP = "rbac.authorization.k8s.io"


def host_service_account(machine: str) -> str:
    """The ServiceAccount (and Role, RoleBinding) of ``machine``'s host agent."""
    return f"{HOST_PREFIX}{machine}"


def machine_of(service_account: str) -> str | None:
    """The machine whose host agent ``service_account`` is (None: not a host's)."""
    if not service_account.startswith(HOST_PREFIX):
        return None
    return service_account[len(HOST_PREFIX):] or None


def user_data_secret(machine: str) -> str:
    """The Secret holding ``machine``'s user data (its agent token is bound to it)."""
    return f"{machine}-user-data"


def host_role_rules(machine: str) -> list[dict[str, Any]]:
    """The rules of ``machine``'s host Role (see the module docstring)."""
    return [
        {"apiGroups": [LCM_GROUP], "resources": ["lcmmachines"],
         "verbs": ["get", "list", "watch"], "resourceNames": [machine]},
        {"apiGroups": [LCM_GROUP], "resources": ["lcmmachines/status"],
         "verbs": ["get", "patch", "update"], "resourceNames": [machine]},
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
         "resourceNames": [host_service_account(machine)]},
    ]


def host_objects(namespace: str, machine: str,
                 metadata: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """``machine``'s ServiceAccount, Role and RoleBinding, in create order.
    ``metadata``: more of each object's metadata (labels, ownerReferences)."""
    name = host_service_account(machine)

    def meta() -> dict[str, Any]:
        return {**copy.deepcopy(dict(metadata or {})), "name": name, "namespace": namespace}

    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": meta(),
         "rules": host_role_rules(machine)},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": meta(),
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def bound_to_user_data(machine: str, uid: str) -> dict[str, str]:
    """The TokenRequest ``boundObjectRef`` of ``machine``'s host agent token:
    its user-data Secret of uid ``uid``."""
    return {"kind": "Secret", "apiVersion": "v1", "name": user_data_secret(machine), "uid": uid}
