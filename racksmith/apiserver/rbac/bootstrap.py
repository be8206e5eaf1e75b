"""The built-in roles and bindings, applied at every start of the API server.

Owns :func:`bootstrap_objects`: kube-apiserver's user-facing ClusterRoles
(``cluster-admin``, and ``admin``/``edit``/``view`` aggregated from the
``system:aggregate-to-*`` roles, Kubernetes' own and Racksmith's), the
discovery roles every authenticated user has (``system:discovery``,
``system:basic-user``, ``system:public-info-viewer``), Racksmith's
``racksmith:operator``, the host agents' ``racksmith:agent`` (bound to
the group ``racksmith:agents`` of host identities, which the host restriction
narrows to each host's own objects) and the kubelets' ``system:node`` (its
node-side rules, bound to the group ``system:nodes`` of node identities,
narrowed likewise to each node's own objects), with their bindings. Like
kube-apiserver's bootstrap policy, an object carrying the annotation
``rbac.authorization.kubernetes.io/autoupdate: "false"`` is left as the
operator changed it; every other one is put back as declared here.

``view`` never grants Secrets; ``edit`` does (as in Kubernetes: it can run
pods that mount them anyway). Racksmith's aggregate-to-view also grants
reading the infrastructure an operator looks at: Nodes, PersistentVolumes,
StorageClasses, and GET through a managed cluster's proxy
(``clusters/proxy``; ``racksmith:aggregate-to-operator`` adds its writes);
Racksmith's own kinds aggregate into ``view`` and ``edit``
through the ClusterRoles their declarations make
(``racksmith.kinds.crdgen.kind_roles``, applied with the CRDs).
``racksmith:operator`` aggregates what view aggregates plus
``racksmith:aggregate-to-operator`` (the day-2 actions; docs/access.md has the
table), so a role added to view is added to operator too.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver.rbac.authorizer import AUTHENTICATED, PRIVILEGED_GROUP, UNAUTHENTICATED
from racksmith.apiserver.rbac.hostrestriction import AGENT_GROUP, NODES_GROUP
from racksmith.apiserver.rbac.rules import RBAC_GROUP

Obj = dict[str, Any]

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
AGGREGATE_TO_OPERATOR = "racksmith.io/aggregate-to-operator"
BOOTSTRAP_LABEL = "kubernetes.io/bootstrapping"

#: Racksmith's API groups (a unit test checks this against the kinds catalogue).
RACKSMITH_GROUPS = ("cluster.racksmith.io", "ipam.racksmith.io", "lcm.racksmith.io",
                    "metal.racksmith.io", "metal3.io", "storage.racksmith.io")

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]

OPERATOR_ROLE = "racksmith:operator"

#: The role names of ``racksmith user add --role``, each a group bound below.
ROLE_GROUPS = {"view": "racksmith:viewers", "operator": "racksmith:operators",
               "admin": "racksmith:admins"}
_ROLE_OF_GROUP = {"view": "view", "operator": "racksmith:operator", "admin": "cluster-admin"}
AGENT_ROLE = "racksmith:agent"
NODE_ROLE = "system:node"


def _rule(groups: list[str], resources: list[str], verbs: list[str],
          names: list[str] | None = None) -> Obj:
    rule: Obj = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _paths(paths: list[str], verbs: list[str] | None = None) -> Obj:
    return {"nonResourceURLs": paths, "verbs": verbs or ["get"]}


def _role(name: str, rules: list[Obj], *, labels: dict[str, str] | None = None,
          aggregate: str | None = None, extra_aggregate: str | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {BOOTSTRAP_LABEL: "rbac-defaults", **(labels or {})},
                 "annotations": {AUTOUPDATE: "true"}}
    obj: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": meta,
                "rules": rules}
    if aggregate is not None:
        selectors = [{"matchLabels": {f"{AGGREGATE_TO}{aggregate}": "true"}}]
        if extra_aggregate is not None:
            selectors.append({"matchLabels": {extra_aggregate: "true"}})
        obj["aggregationRule"] = {"clusterRoleSelectors": selectors}
        obj["rules"] = []
    return obj


def _binding(name: str, role: str, subjects: list[Obj]) -> Obj:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {BOOTSTRAP_LABEL: "rbac-defaults"},
                         "annotations": {AUTOUPDATE: "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects}


def _group(name: str) -> Obj:
    return {"apiGroup": RBAC_GROUP, "kind": "Group", "name": name}


_CORE_VIEW = ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
              "pods", "pods/log", "pods/status", "replicationcontrollers", "services",
              "services/status", "bindings", "events", "limitranges", "namespaces",
              "namespaces/status", "resourcequotas", "serviceaccounts"]
_CORE_EDIT = ["configmaps", "endpoints", "persistentvolumeclaims", "pods", "pods/eviction",
              "replicationcontrollers", "secrets", "serviceaccounts", "services", "events"]


def _node_rules() -> list[Obj]:
    """What a kubelet does (the node side of ``racksmith/agent/kube.py``): its
    Node and Lease, the pods and Volumes bound to it, StorageClasses."""
    return [
        _rule([""], ["nodes"], ["get", "list", "watch", "create", "patch", "update"]),
        _rule([""], ["nodes/status"], ["get", "patch", "update"]),
        _rule([""], ["pods"], ["get", "list", "watch"]),
        _rule([""], ["pods/status"], ["get", "patch", "update"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "patch", "update"]),
        _rule(["storage.racksmith.io"], ["volumes"], ["get", "list", "watch", "patch"]),
        _rule(["storage.k8s.io"], ["storageclasses"], ["get", "list", "watch"]),
    ]


def bootstrap_objects() -> list[Obj]:
    """Every built-in ClusterRole and ClusterRoleBinding, in apply order."""
    everything = "*"
    roles = [
        _role("cluster-admin", [_rule([everything], [everything], [everything]),
                                _paths([everything], [everything])]),
        _role("admin", [], aggregate="admin"),
        _role("edit", [], labels={f"{AGGREGATE_TO}admin": "true"}, aggregate="edit"),
        _role("view", [], labels={f"{AGGREGATE_TO}edit": "true"}, aggregate="view"),
        _role("system:aggregate-to-view", [
            _rule([""], _CORE_VIEW, READ),
            _rule(["apps", "batch", "autoscaling", "policy", "discovery.k8s.io",
                   "networking.k8s.io", "events.k8s.io"], [everything], READ),
        ], labels={f"{AGGREGATE_TO}view": "true"}),
        _role("system:aggregate-to-edit", [
            _rule([""], _CORE_EDIT, WRITE),
            _rule([""], ["secrets"], READ),
            _rule(["apps", "batch", "autoscaling", "policy", "networking.k8s.io"],
                  [everything], WRITE),
        ], labels={f"{AGGREGATE_TO}edit": "true"}),
        _role("system:aggregate-to-admin", [
            _rule([RBAC_GROUP], ["roles", "rolebindings"], READ + WRITE),
            _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
        ], labels={f"{AGGREGATE_TO}admin": "true"}),
        # Racksmith's own kinds reach view and edit through the roles the
        # kinds declare (racksmith.kinds.crdgen.kind_roles, applied with the
        # CRDs): explicit resources, never a group wildcard.
        _role("racksmith:aggregate-to-view", [
            _rule([""], ["nodes", "nodes/status", "persistentvolumes"], READ),
            _rule(["storage.k8s.io"], ["storageclasses"], READ),
            _rule(["coordination.k8s.io"], ["leases"], READ),
            # reads inside a managed cluster through the management API's
            # cluster proxy (racksmith.app.clusterproxy), as its identity there
            _rule(["cluster.racksmith.io"], ["clusters/proxy"], ["get"]),
        ], labels={f"{AGGREGATE_TO}view": "true"}),
        # racksmith:operator: everything that aggregates into view (so never
        # Secrets or RBAC) plus the day-2 actions of racksmith:aggregate-to-operator
        _role(OPERATOR_ROLE, [], aggregate="view", extra_aggregate=AGGREGATE_TO_OPERATOR),
        _role("racksmith:aggregate-to-operator", [
            _rule(["lcm.racksmith.io"], ["clusterupdateplans", "updateautopauses"],
                  ["patch", "update"]),
            _rule(["lcm.racksmith.io"], ["gracefulrebootrequests", "nodemaintenancerequests",
                                         "clustermaintenancerequests"], WRITE),
            _rule(["lcm.racksmith.io"], ["controlplanebackups"], ["create"]),
            _rule(["cluster.racksmith.io"], ["machines"], WRITE),
            _rule(["storage.racksmith.io"], ["volumes"], WRITE),
            _rule(["cluster.racksmith.io"], ["clusters/proxy"],
                  ["create", "delete", "patch", "update"]),
            _rule(["metal3.io"], ["baremetalhosts"], ["patch", "update"]),
            _rule([""], ["nodes"], ["patch", "update"]),
            _rule([""], ["pods/eviction"], ["create"]),
        ], labels={AGGREGATE_TO_OPERATOR: "true"}),
        # the node side of racksmith/agent/kube.py for a host whose kubelet
        # has no cluster credentials yet, narrowed by the host restriction to
        # the agent's own host; its LCMMachine, status and tokens are the
        # host's own Role (racksmith.hostcreds), plain RBAC
        _role(AGENT_ROLE, _node_rules()),
        # a kubelet's certificate (system:node:<node> in system:nodes): the
        # node side of racksmith:agent, narrowed to its own Node likewise
        _role(NODE_ROLE, _node_rules()),
        _role("system:discovery", [_paths(
            ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
             "/openapi/*", "/readyz", "/version", "/version/"])]),
        _role("system:public-info-viewer", [_paths(
            ["/healthz", "/livez", "/readyz", "/version", "/version/"])]),
        _role("system:basic-user", [
            _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews",
                                             "selfsubjectrulesreviews"], ["create"]),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
        ]),
    ]
    bindings = [
        _binding("cluster-admin", "cluster-admin", [_group(PRIVILEGED_GROUP)]),
        _binding("system:discovery", "system:discovery", [_group(AUTHENTICATED)]),
        _binding("system:basic-user", "system:basic-user", [_group(AUTHENTICATED)]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 [_group(AUTHENTICATED), _group(UNAUTHENTICATED)]),
        _binding(AGENT_ROLE, AGENT_ROLE, [_group(AGENT_GROUP)]),
        _binding(NODE_ROLE, NODE_ROLE, [_group(NODES_GROUP)]),
        # the roles of `racksmith user add --role` (racksmith.apiserver.users)
        *(_binding(group, _ROLE_OF_GROUP[role], [_group(group)])
          for role, group in ROLE_GROUPS.items()),
    ]
    return roles + bindings
