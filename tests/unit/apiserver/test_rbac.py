"""The RBAC authorizer's pure parts: request attributes, rule matching, coverage,
bindings, aggregation and the built-in roles."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.apiserver.rbac.authorizer import Authorizer, Subject
from racksmith.apiserver.rbac.bootstrap import RACKSMITH_GROUPS, ROLE_GROUPS, bootstrap_objects
from racksmith.apiserver.rbac.requestinfo import request_attributes
from racksmith.apiserver.rbac.rules import Attributes, covers, describe, rule_allows
from racksmith.hostcreds import host_objects, host_service_account
from racksmith.kinds.registry import ALL_KINDS

Obj = dict[str, Any]


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/n/pods", {}, ("list", "", "pods", "", "n", "")),
    ("GET", "/api/v1/namespaces/n/pods", {"watch": "true"}, ("watch", "", "pods", "", "n", "")),
    ("GET", "/api/v1/namespaces/n/pods/p", {}, ("get", "", "pods", "", "n", "p")),
    ("GET", "/api/v1/namespaces/n/pods/p/log", {}, ("get", "", "pods", "log", "n", "p")),
    ("POST", "/api/v1/namespaces/n/pods/p/eviction", {},
     ("create", "", "pods", "eviction", "n", "p")),
    ("PATCH", "/api/v1/nodes/x/status", {}, ("patch", "", "nodes", "status", "", "x")),
    ("DELETE", "/apis/metal3.io/v1alpha1/namespaces/n/baremetalhosts", {},
     ("deletecollection", "metal3.io", "baremetalhosts", "", "n", "")),
    ("DELETE", "/api/v1/namespaces/n", {}, ("delete", "", "namespaces", "", "n", "n")),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", "", "", "")),
    ("GET", "/api/v1/namespaces/n/secrets", {"fieldSelector": "metadata.name=s"},
     ("list", "", "secrets", "", "n", "s")),
    ("PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:x", {},
     ("update", "rbac.authorization.k8s.io", "clusterroles", "", "", "system:x")),
])
def test_resource_requests_are_parsed_as_kube_apiserver_does(
        method: str, path: str, query: dict[str, str], expected: tuple[str, ...]) -> None:
    a = request_attributes(method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name) == expected


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/metal.racksmith.io",
                                  "/apis/metal.racksmith.io/v1alpha1", "/version", "/metrics",
                                  "/openapi/v3/apis/x"])
def test_other_paths_are_non_resource_requests(path: str) -> None:
    a = request_attributes("GET", path, {})
    assert not a.resource_request and a.verb == "get" and a.path == path


def res(verb: str, resource: str, group: str = "", ns: str = "n", name: str = "",
        sub: str = "") -> Attributes:
    return Attributes(verb=verb, api_group=group, resource=resource, subresource=sub,
                      namespace=ns, name=name)


def test_rule_matching() -> None:
    rule = {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}
    assert rule_allows(rule, res("get", "pods"))
    assert rule_allows(rule, res("get", "pods", sub="log", name="p"))
    assert not rule_allows(rule, res("get", "pods", sub="exec", name="p"))
    assert not rule_allows(rule, res("delete", "pods", name="p"))
    assert not rule_allows(rule, res("get", "pods", group="apps"))
    star_sub = {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]}
    assert rule_allows(star_sub, res("patch", "nodes", sub="status", name="x"))
    assert not rule_allows(star_sub, res("patch", "nodes", name="x"))
    named = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
             "resourceNames": ["c1"]}
    assert rule_allows(named, res("get", "configmaps", name="c1"))
    assert not rule_allows(named, res("get", "configmaps", name="c2"))
    assert not rule_allows(named, res("list", "configmaps"))  # a list names nothing
    paths = {"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}
    assert rule_allows(paths, Attributes(verb="get", resource_request=False, path="/apis/x/v1"))
    assert rule_allows(paths, Attributes(verb="get", resource_request=False, path="/version"))
    assert not rule_allows(paths, Attributes(verb="get", resource_request=False,
                                             path="/metrics"))
    assert not rule_allows(paths, res("get", "pods"))


def test_coverage_the_escalation_check() -> None:
    owner = [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]},
             {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}]
    assert covers(owner, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]) == []
    assert covers(owner, [{"apiGroups": ["apps"], "resources": ["deployments"],
                           "verbs": ["delete"]}]) == []
    assert covers(owner, [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]) \
        == ["get secrets"]
    # a wildcard asked for is covered only by a wildcard
    assert covers(owner, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]) \
        == ["* pods"]
    assert covers([], [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]) \
        == ["get /metrics"]


def binding(kind: str, name: str, role: str, subjects: list[Obj], ns: str = "",
            role_kind: str = "ClusterRole") -> Obj:
    meta: Obj = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}}


def authorizer() -> Authorizer:
    """The server's built-in roles and the kinds' (applied with the CRDs)."""
    from racksmith.kinds.crdgen import kind_roles

    a = Authorizer()
    for obj in [*bootstrap_objects(), *kind_roles()]:
        plural = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        a.load(plural, [obj])
    return a


VIEWER = Subject("alice", ("racksmith:viewers", "system:authenticated"))
OPERATOR = Subject("bob", ("racksmith:operators", "system:authenticated"))
AGENT = Subject("system:serviceaccount:default:racksmith-agent",
                ("racksmith:agents", "system:authenticated"))
NOBODY = Subject("eve", ("system:authenticated",))


def test_view_reads_everything_but_secrets_and_writes_nothing() -> None:
    a = authorizer()
    assert a.authorize(VIEWER, res("list", "baremetalhosts", "metal3.io"))
    assert a.authorize(VIEWER, res("watch", "machines", "cluster.racksmith.io", ns=""))
    assert a.authorize(VIEWER, res("get", "clusterupdateplans", "lcm.racksmith.io", name="p"))
    assert a.authorize(VIEWER, res("list", "nodes", ns=""))
    assert not a.authorize(VIEWER, res("get", "secrets", name="s"))
    assert not a.authorize(VIEWER, res("list", "secrets"))
    assert not a.authorize(VIEWER, res("delete", "baremetalhosts", "metal3.io",
                                       name="h"))
    assert not a.authorize(VIEWER, res("create", "clusterrolebindings",
                                       "rbac.authorization.k8s.io", ns=""))


def test_operator_does_the_day_two_actions_and_nothing_about_secrets_or_rbac() -> None:
    a = authorizer()
    assert a.authorize(OPERATOR, res("patch", "clusterupdateplans", "lcm.racksmith.io",
                                     name="p"))
    assert a.authorize(OPERATOR, res("create", "gracefulrebootrequests", "lcm.racksmith.io"))
    assert a.authorize(OPERATOR, res("patch", "baremetalhosts", "metal3.io", name="h"))
    assert not a.authorize(OPERATOR, res("delete", "baremetalhosts", "metal3.io",
                                         name="h"))
    assert not a.authorize(OPERATOR, res("get", "secrets", name="s"))
    assert not a.authorize(OPERATOR, res("create", "clusterrolebindings",
                                         "rbac.authorization.k8s.io", ns=""))


def test_the_agent_cannot_read_secrets_or_delete_namespaces() -> None:
    a = authorizer()
    assert a.authorize(AGENT, res("create", "leases", "coordination.k8s.io",
                                  ns="kube-node-lease"))
    assert not a.authorize(AGENT, res("get", "secrets", name="s"))
    assert not a.authorize(AGENT, res("delete", "namespaces", ns="default", name="default"))
    # LCMMachines are no group's: each host's own Role grants its own
    assert not a.authorize(AGENT, res("patch", "lcmmachines", "lcm.racksmith.io", sub="status",
                                      name="m"))
    assert not a.authorize(AGENT, res("get", "lcmmachines", "lcm.racksmith.io", name="m"))


def test_a_host_role_grants_its_own_machine_only() -> None:
    a = authorizer()
    for obj in host_objects("n", "m1"):
        if obj["kind"] != "ServiceAccount":
            a.load({"Role": "roles", "RoleBinding": "rolebindings"}[obj["kind"]], [obj])
    host = Subject(f"system:serviceaccount:n:{host_service_account('m1')}",
                   ("system:serviceaccounts", "system:serviceaccounts:n",
                    "system:authenticated"))
    lcm = "lcm.racksmith.io"
    assert a.authorize(host, res("get", "lcmmachines", lcm, name="m1"))
    assert a.authorize(host, res("watch", "lcmmachines", lcm, name="m1"))  # pinned by name
    assert a.authorize(host, res("patch", "lcmmachines", lcm, sub="status", name="m1"))
    assert a.authorize(host, res("create", "serviceaccounts", sub="token",
                                 name=host_service_account("m1")))
    assert not a.authorize(host, res("list", "lcmmachines", lcm))  # every one: no
    assert not a.authorize(host, res("get", "lcmmachines", lcm, name="m2"))
    assert not a.authorize(host, res("patch", "lcmmachines", lcm, sub="status", name="m2"))
    assert not a.authorize(host, res("patch", "lcmmachines", lcm, name="m1"))  # not its spec
    assert not a.authorize(host, res("get", "lcmmachines", lcm, ns="other", name="m1"))
    assert not a.authorize(host, res("create", "serviceaccounts", sub="token",
                                     name=host_service_account("m2")))
    assert not a.authorize(host, res("get", "secrets", name="m1-user-data"))


def test_everyone_authenticated_may_discover_and_ask_about_themselves() -> None:
    a = authorizer()
    assert a.authorize(NOBODY, Attributes(verb="get", resource_request=False, path="/apis"))
    assert a.authorize(NOBODY, res("create", "selfsubjectaccessreviews",
                                   "authorization.k8s.io", ns=""))
    assert not a.authorize(NOBODY, res("list", "pods"))
    assert not a.authorize(NOBODY, Attributes(verb="get", resource_request=False,
                                              path="/metrics"))


def test_role_bindings_grant_in_their_namespace_only() -> None:
    a = authorizer()
    a.observe("roles", "team", "pod-reader", {"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    a.observe("rolebindings", "team", "b", binding(
        "RoleBinding", "b", "pod-reader", [{"kind": "User", "name": "eve"}], ns="team",
        role_kind="Role"))
    a.observe("rolebindings", "team", "e", binding(
        "RoleBinding", "e", "edit", [{"kind": "ServiceAccount", "name": "ci"}], ns="team"))
    assert a.authorize(NOBODY, res("get", "pods", ns="team", name="p"))
    assert not a.authorize(NOBODY, res("get", "pods", ns="other", name="p"))
    ci = Subject("system:serviceaccount:team:ci", ())
    assert a.authorize(ci, res("create", "configmaps", ns="team"))
    assert a.authorize(ci, res("get", "secrets", ns="team", name="s"))  # edit reads secrets
    assert not a.authorize(ci, res("create", "configmaps", ns="other"))
    # a binding to a role that does not exist grants nothing; deletion takes effect
    a.observe("rolebindings", "team", "ghost", binding(
        "RoleBinding", "ghost", "no-such-role", [{"kind": "User", "name": "mallory"}],
        ns="team"))
    assert not a.authorize(Subject("mallory"), res("get", "pods", ns="team", name="p"))
    a.observe("rolebindings", "team", "b", None)
    assert not a.authorize(NOBODY, res("get", "pods", ns="team", name="p"))


def test_aggregation_follows_labels() -> None:
    a = authorizer()
    assert not a.authorize(VIEWER, res("list", "widgets", "example.com"))
    a.observe("clusterroles", "", "widget-view", {
        "metadata": {"name": "widget-view", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}]})
    assert a.authorize(VIEWER, res("list", "widgets", "example.com"))
    # view aggregates into edit into admin
    assert "widgets" in str(a.cluster_role_rules("admin"))


def test_system_masters_may_do_anything() -> None:
    assert Authorizer().authorize(Subject("root", ("system:masters",)),
                                  res("delete", "secrets", name="s"))


def test_denials_are_worded_as_kube_apiserver_words_them() -> None:
    assert describe(res("list", "secrets", ns="n"), "u") == \
        'User "u" cannot list resource "secrets" in API group "" in the namespace "n"'
    assert describe(res("patch", "nodes", ns="", sub="status"), "u") == \
        'User "u" cannot patch resource "nodes/status" in API group "" at the cluster scope'
    assert describe(Attributes(verb="get", resource_request=False, path="/metrics"), "u") == \
        'User "u" cannot get path "/metrics"'


def test_the_built_in_roles_cover_every_racksmith_group_and_role() -> None:
    groups = {k.info.group for k in ALL_KINDS}
    assert groups <= set(RACKSMITH_GROUPS)
    bound = {s["name"] for o in bootstrap_objects() if o["kind"] == "ClusterRoleBinding"
             for s in o["subjects"]}
    assert set(ROLE_GROUPS.values()) <= bound
