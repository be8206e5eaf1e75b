"""The host restriction: a host agent (or a kubelet's node identity) reaches only its
own machine's objects."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.apiserver.pki import HostIdentity
from racksmith.apiserver.rbac.bootstrap import bootstrap_objects
from racksmith.apiserver.rbac.hostrestriction import (
    HostRestriction,
    bound_token_check,
    no_relationship,
)
from racksmith.apiserver.rbac.requestinfo import request_attributes
from racksmith.apiserver.x509auth import user_of

HOST = HostIdentity("default", "m1", "uid-1")
OBJECTS: dict[tuple[str, str, str, str], dict[str, Any]] = {
    ("", "pods", "apps", "mine"): {"spec": {"nodeName": "m1"}},
    ("", "pods", "apps", "theirs"): {"spec": {"nodeName": "m2"}},
    ("storage.racksmith.io", "volumes", "", "v-mine"): {"spec": {"nodeName": "m1"}},
    ("storage.racksmith.io", "volumes", "", "v-theirs"): {"spec": {"nodeName": "m2"}},
}
LCM = "/apis/lcm.racksmith.io/v1alpha1/namespaces/default/lcmmachines"
VOLUMES = "/apis/storage.racksmith.io/v1alpha1/volumes"


async def lookup(group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    return OBJECTS.get((group, plural, namespace, name))


async def allows(method: str, path: str, **query: str) -> bool:
    attrs = request_attributes(method, path, query)
    return await HostRestriction(lookup).allows(HOST, attrs, query.get("fieldSelector", ""))


ALLOWED = [
    ("GET", f"{LCM}/m1", {}),
    ("GET", LCM, {"fieldSelector": "metadata.name=m1", "watch": "true"}),
    ("PATCH", f"{LCM}/m1/status", {}),
    ("PUT", f"{LCM}/m1/status", {}),
    ("POST", "/api/v1/nodes", {}),
    ("GET", "/api/v1/nodes/m1", {}),
    ("PATCH", "/api/v1/nodes/m1/status", {}),
    ("PATCH", "/api/v1/nodes/m1", {}),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}),
    ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/m1", {}),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=m1"}),
    ("GET", "/api/v1/pods", {"fieldSelector": "status.phase!=Failed,spec.nodeName==m1",
                             "watch": "1"}),
    ("PATCH", "/api/v1/namespaces/apps/pods/mine/status", {}),
    ("PATCH", "/api/v1/namespaces/apps/pods/gone/status", {}),  # a 404 follows
    ("GET", VOLUMES, {"fieldSelector": "spec.nodeName=m1"}),
    ("GET", f"{VOLUMES}/v-mine", {}),
    ("PATCH", f"{VOLUMES}/v-mine", {}),
    ("GET", "/apis/storage.k8s.io/v1/storageclasses/local", {}),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/racksmith-host-m1/token", {}),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {}),
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}),
    ("GET", "/apis", {}),
]
REFUSED = [
    ("GET", f"{LCM}/m2", {}),
    ("PATCH", f"{LCM}/m2/status", {}),
    ("PATCH", f"{LCM}/m1", {}),  # its spec is the Machine controller's
    ("DELETE", f"{LCM}/m1", {}),
    ("GET", LCM, {}),
    ("GET", "/apis/lcm.racksmith.io/v1alpha1/namespaces/other/lcmmachines/m1", {}),
    ("GET", "/api/v1/nodes", {}),
    ("PATCH", "/api/v1/nodes/m2/status", {}),
    ("DELETE", "/api/v1/nodes/m1", {}),
    ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/m2", {}),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/m1", {}),
    ("GET", "/api/v1/pods", {}),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=m2"}),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=m1x"}),
    ("PATCH", "/api/v1/namespaces/apps/pods/theirs/status", {}),
    ("DELETE", "/api/v1/namespaces/apps/pods/mine", {}),
    ("GET", f"{VOLUMES}/v-theirs", {}),
    ("GET", VOLUMES, {}),
    ("DELETE", f"{VOLUMES}/v-mine", {}),
    ("GET", "/api/v1/namespaces/default/secrets/s", {}),
    ("GET", "/api/v1/namespaces/default/configmaps", {}),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/other/token", {}),
    ("POST", "/api/v1/namespaces/other/serviceaccounts/racksmith-host-m1/token", {}),
    ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {}),
]


@pytest.mark.parametrize(("method", "path", "query"), ALLOWED)
async def test_its_own_objects_are_allowed(method: str, path: str, query: dict[str, str]
                                           ) -> None:
    assert await allows(method, path, **query)


@pytest.mark.parametrize(("method", "path", "query"), REFUSED)
async def test_everything_else_is_refused(method: str, path: str, query: dict[str, str]
                                          ) -> None:
    assert not await allows(method, path, **query)


def test_admission_checks_the_written_object() -> None:
    admit = HostRestriction.admit
    node = {"metadata": {"name": "m1", "labels": {"kubernetes.io/hostname": "m1"}}}
    assert admit(HOST, "", "nodes", "", node, None) is None
    assert "its own Node m1" in (admit(HOST, "", "nodes", "", {"metadata": {"name": "m2"}},
                                       None) or "")
    roled = {"metadata": {"name": "m1", "labels": {"node-role.kubernetes.io/master": ""}}}
    assert "node-role.kubernetes.io" in (admit(HOST, "", "nodes", "", roled, node) or "")
    assert admit(HOST, "", "nodes", "", roled, roled) is None  # unchanged: fine
    tainted = {"metadata": {"name": "m1"}, "spec": {"taints": [{"key": "k"}]}}
    assert admit(HOST, "", "nodes", "", tainted, node) is not None
    assert admit(HOST, "", "nodes", "", node, tainted) is not None  # nor remove one
    lease = {"metadata": {"name": "m1"}}
    assert admit(HOST, "coordination.k8s.io", "leases", "kube-node-lease", lease, None) is None
    assert admit(HOST, "coordination.k8s.io", "leases", "kube-node-lease",
                 {"metadata": {"name": "m2"}}, None) is not None
    assert admit(HOST, "", "configmaps", "default", {"metadata": {"name": "x"}}, None) is None


def test_an_agent_may_ask_only_for_a_token_bound_to_its_own_user_data() -> None:
    def body(**ref: str) -> dict[str, Any]:
        return {"spec": {"boundObjectRef": ref}}

    assert bound_token_check(HOST, body(kind="Secret", name="m1-user-data", uid="uid-1")) is None
    assert bound_token_check(HOST, body(kind="Secret", name="m1-user-data")) is None
    assert bound_token_check(HOST, body(kind="Secret", name="m2-user-data")) is not None
    assert bound_token_check(HOST, body(kind="Secret", name="m1-user-data",
                                        uid="other")) is not None
    assert bound_token_check(HOST, body(kind="Secret", name="m1")) is not None
    assert bound_token_check(HOST, body(kind="LCMMachine", name="m1")) is not None
    assert bound_token_check(HOST, {"spec": {}}) is not None
    assert "default/m1" in no_relationship(HOST)


# --- node identities: a kubelet's certificate (system:node:m1 in system:nodes) ---------

NODE = HostIdentity.of_node("m1")
NODE_ONLY = {"/apis/lcm.racksmith.io/", "/serviceaccounts/"}
"""What a host agent may reach and a kubelet may not: LCMMachines and tokens."""


async def node_allows(method: str, path: str, **query: str) -> bool:
    attrs = request_attributes(method, path, query)
    return await HostRestriction(lookup).allows(NODE, attrs, query.get("fieldSelector", ""))


@pytest.mark.parametrize(("method", "path", "query"),
                         [a for a in ALLOWED if not any(p in a[1] for p in NODE_ONLY)])
async def test_a_node_may_reach_its_own_node_side_objects(
        method: str, path: str, query: dict[str, str]) -> None:
    assert await node_allows(method, path, **query)


@pytest.mark.parametrize(("method", "path", "query"), [
    *REFUSED,
    ("GET", f"{LCM}/m1", {}),
    ("GET", LCM, {"fieldSelector": "metadata.name=m1", "watch": "true"}),
    ("PATCH", f"{LCM}/m1/status", {}),
    ("GET", "/apis/lcm.racksmith.io/v1alpha1/lcmmachines", {}),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/racksmith-host-m1/token", {}),
])
async def test_a_node_may_reach_nothing_else(method: str, path: str, query: dict[str, str]
                                             ) -> None:
    assert not await node_allows(method, path, **query)


def test_a_node_identity_is_refused_in_kubes_words() -> None:
    assert NODE.node == "m1" and NODE.kubelet and not HOST.kubelet
    assert NODE.extra() == {}
    assert no_relationship(NODE) == "no relationship found between node 'm1' and this object"
    admit = HostRestriction.admit
    assert admit(NODE, "", "nodes", "", {"metadata": {"name": "m1"}}, None) is None
    assert "a node may only write its own Node m1" in (
        admit(NODE, "", "nodes", "", {"metadata": {"name": "m2"}}, None) or "")
    assert admit(NODE, "coordination.k8s.io", "leases", "kube-node-lease",
                 {"metadata": {"name": "m2"}}, None) is not None
    assert bound_token_check(NODE, {"spec": {"boundObjectRef": {
        "kind": "LCMMachine", "name": "", "uid": ""}}}) is not None


def test_a_kubelet_certificate_is_a_node_identity() -> None:
    def peer(cn: str, *orgs: str) -> dict[str, Any]:
        subject = [(("commonName", cn),), *((("organizationName", o),) for o in orgs)]
        return {"subject": tuple(subject), "serialNumber": "01"}

    user = user_of(peer("system:node:m1", "system:nodes"))
    assert user is not None and user.host == HostIdentity.of_node("m1")
    assert user.name == "system:node:m1"
    assert "system:nodes" in user.groups
    for cn, orgs in (("system:node:m1", ()), ("system:node:", ("system:nodes",)),
                     ("m1", ("system:nodes",)), ("system:nodes:m1", ("system:nodes",))):
        other = user_of(peer(cn, *orgs))
        assert other is not None and other.host is None, (cn, orgs)


def test_the_node_role_is_the_node_side_of_the_agent_role() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in bootstrap_objects()}
    role = objects[("ClusterRole", "system:node")]
    agent = objects[("ClusterRole", "racksmith:agent")]
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources == {"nodes", "nodes/status", "pods", "pods/status", "leases", "volumes",
                         "storageclasses"}
    assert all(rule in agent["rules"] for rule in role["rules"])
    binding = objects[("ClusterRoleBinding", "system:node")]
    assert binding["roleRef"]["name"] == "system:node"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:nodes"}]
