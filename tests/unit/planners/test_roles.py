"""The node-role planner: table-driven labels and taints, refusals, and
properties (every requested role is labelled; workload nodes are never tainted)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from racksmith.kinds.cluster import Machine, Role
from racksmith.planners.roles import (
    NodeRoles,
    RoleError,
    Taint,
    check_bootstrap,
    effective_roles,
    plan_node_roles,
)

P = "node-role.kubernetes.io/"


def ok(result: NodeRoles | list[RoleError]) -> NodeRoles:
    assert isinstance(result, NodeRoles), result
    return result


def machine(name: str, cluster: str, *roles: str, namespace: str = "default") -> Machine:
    return Machine.model_validate({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": cluster, "roles": list(roles)},
    })


@pytest.mark.parametrize(("roles", "labels", "taints"), [
    (["node"], ["node"], []),
    (["master", "etcd"], ["master", "etcd"], ["master", "etcd"]),
    (["etcd", "master"], ["master", "etcd"], ["master", "etcd"]),
    (["master", "etcd", "node"], ["master", "etcd", "node"], []),
    (["infra"], ["infra"], ["infra"]),
    (["node", "infra"], ["node", "infra"], []),
    (["bootstrap", "master", "etcd", "infra"], ["master", "etcd", "infra", "bootstrap"],
     ["master", "etcd", "infra", "bootstrap"]),
    (["node", "node"], ["node"], []),
])
def test_labels_and_taints(roles: list[str], labels: list[str], taints: list[str]) -> None:
    planned = ok(plan_node_roles(roles))
    assert list(planned.labels) == [P + r for r in labels]
    assert set(planned.labels.values()) == {""}
    assert planned.taints == tuple(Taint(P + t) for t in taints)
    assert planned.is_dedicated == ("node" not in roles)


def test_taint_as_k8s() -> None:
    assert Taint(P + "master").to_k8s() == {"key": P + "master", "effect": "NoSchedule"}
    assert Taint("k", value="v").to_k8s() == {"key": "k", "effect": "NoSchedule", "value": "v"}


@pytest.mark.parametrize(("roles", "message"), [
    ([], "spec.roles: a machine needs at least one role"),
    (["node", "worker"], "spec.roles[1]: unknown role 'worker'"),
    (["Master"], "spec.roles[0]: unknown role 'Master'"),
])
def test_refused(roles: list[str], message: str) -> None:
    result = plan_node_roles(roles)
    assert isinstance(result, list)
    assert any(str(e).startswith(message) for e in result), result


def test_effective_roles_add_node() -> None:
    assert effective_roles([Role.MASTER]) == {Role.MASTER, Role.NODE}
    assert effective_roles(["infra", "node"]) == {Role.INFRA, Role.NODE}


def test_one_bootstrap_per_cluster() -> None:
    machines = [
        machine("m1", "a", "bootstrap", "master", "etcd"),
        machine("m2", "a", "node"),
        machine("m3", "b", "bootstrap"),
        machine("m4", "b", "bootstrap", "node"),
        machine("m5", "b", "bootstrap", namespace="other"),
    ]
    errors = [str(e) for e in check_bootstrap(machines)]
    assert errors == [
        "cluster default/b has 2 bootstrap machines (m3, m4); bootstrap is unique per cluster"
    ]
    assert check_bootstrap(machines[:3]) == []


@given(st.lists(st.sampled_from(list(Role)), min_size=1))
def test_properties(roles: list[Role]) -> None:
    planned = ok(plan_node_roles(roles))
    assert {P + r.value for r in roles} <= set(planned.labels)
    if Role.NODE in roles:
        assert not [t for t in planned.taints if t.effect == "NoSchedule"]
    else:
        assert {t.key for t in planned.taints} == set(planned.labels)
    assert plan_node_roles(list(reversed(roles))) == planned
