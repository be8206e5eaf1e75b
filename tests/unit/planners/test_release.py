"""The release planner: phase ordering, role filtering, per-type parameters,
refusals, and hashes that are stable and change exactly when the item does."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from racksmith.kinds.cluster import (
    Cluster,
    ClusterRelease,
    ClusterReleaseSpec,
    StateItem,
    StateItemPhase,
)
from racksmith.planners.release import (
    NETPLAN_ITEM,
    NETPLAN_PATH,
    PlannedRelease,
    ReleaseError,
    item_hash,
    plan_state_items,
)


def item(name: str, phase: str, type_: str = "command", roles: tuple[str, ...] = (), /,
         **params: Any) -> dict[str, Any]:
    if not params:
        params = {"command": ["true"]} if type_ == "command" else {"name": name}
    return {"name": name, "phase": phase, "type": type_, "roles": list(roles), "params": params}


ITEMS = [
    item("uncordon", "uncordon"),
    item("kubelet", "configuration", "package", name="kubelet", version="1.31.4"),
    item("ports-free", "checks"),
    item("etcd-join", "join", "kubeadm", ("etcd",), phase="join etcd"),
    item("kubeadm-join", "join", "kubeadm", phase="join"),
    item("apiserver-cert", "configuration", "file", ("master",), path="/etc/k.pem",
         content="pem"),
    item("kubelet-svc", "configuration", "service", ("node",)),
    item("infra-check", "checks", "command", ("infra",), command="check"),
]


def release(items: list[dict[str, Any]] = ITEMS, version: str = "1.4.0") -> ClusterRelease:
    return ClusterRelease.model_validate({
        "metadata": {"name": f"racksmith-{version}"},
        "spec": {"version": version, "kubernetesVersion": "1.31.4", "stateItems": items},
    })


def cluster(vip: str | None = "10.0.10.5", pods: str = "10.233.0.0/16") -> Cluster:
    return Cluster.model_validate({
        "metadata": {"name": "prod", "namespace": "default"},
        "spec": {"release": "racksmith-1.4.0", "apiServer": {"vip": vip},
                 "networks": {"pods": pods, "controlPlaneCIDRs": ["10.0.10.0/24"]}},
    })


def ok(result: PlannedRelease | list[ReleaseError]) -> PlannedRelease:
    assert isinstance(result, PlannedRelease), result
    return result


def names(result: PlannedRelease | list[ReleaseError]) -> list[str]:
    return [i.name for i in ok(result).state_items()]


@pytest.mark.parametrize(("roles", "expected"), [
    (["node"], ["ports-free", "kubelet", "kubelet-svc", "kubeadm-join", "uncordon"]),
    (["master", "etcd"], ["ports-free", "kubelet", "apiserver-cert", "kubelet-svc",
                          "etcd-join", "kubeadm-join", "uncordon"]),
    (["infra"], ["ports-free", "infra-check", "kubelet", "kubelet-svc", "kubeadm-join",
                 "uncordon"]),
    (["etcd", "node"], ["ports-free", "kubelet", "kubelet-svc", "etcd-join", "kubeadm-join",
                        "uncordon"]),
])
def test_order_and_role_filtering(roles: list[str], expected: list[str]) -> None:
    assert names(plan_state_items(release(), roles, cluster())) == expected


def test_phases_in_deploy_order() -> None:
    planned = ok(plan_state_items(release(), ["master", "etcd", "infra"], cluster()))
    phases = [i.phase for i in planned.state_items()]
    order = list(StateItemPhase)
    assert phases == sorted(phases, key=order.index)
    assert planned.release == "racksmith-1.4.0"
    assert planned.version == "1.4.0"


def test_kubeadm_gets_cluster_context() -> None:
    planned = ok(plan_state_items(release(), ["etcd", "master"], cluster()))
    join = next(i for i in planned.state_items() if i.name == "kubeadm-join")
    assert join.params["phase"] == "join"
    assert join.params["cluster"] == {
        "name": "prod", "release": "1.4.0", "kubernetesVersion": "1.31.4",
        "apiServerVIP": "10.0.10.5", "apiServerPort": 6443, "keepalived": True,
        "podSubnet": "10.233.0.0/16",
        "serviceSubnet": "10.96.0.0/12", "controlPlaneCIDRs": ["10.0.10.0/24"],
        "workloadPlaneCIDRs": [], "roles": ["master", "etcd"],
    }
    assert "cluster" not in release().spec.state_items[4].params  # the release is not mutated


def test_netplan_item_opens_configuration() -> None:
    netconfig = {"version": 2, "ethernets": {"eno1": {"addresses": ["10.0.10.21/24"]}}}
    planned = ok(plan_state_items(release(), ["node"], cluster(), netconfig))
    items = planned.state_items()
    assert [i.name for i in items][:3] == ["ports-free", NETPLAN_ITEM, "kubelet"]
    netplan = items[1]
    assert netplan.params["path"] == NETPLAN_PATH
    assert yaml.safe_load(netplan.params["content"]) == {"network": netconfig}


def test_hashes_stable_and_sensitive() -> None:
    base = ok(plan_state_items(release(), ["node"], cluster(), {"version": 2})).hashes()
    again = ok(plan_state_items(release(), ["node"], cluster(), {"version": 2})).hashes()
    assert base == again
    assert all(len(h) == 64 for h in base.values())
    assert len(set(base.values())) == len(base)

    bumped = [dict(i, params={"name": "kubelet", "version": "1.31.5"})
              if i["name"] == "kubelet" else i for i in ITEMS]
    changed = ok(plan_state_items(release(bumped), ["node"], cluster(), {"version": 2})).hashes()
    assert {n for n in base if base[n] != changed[n]} == {"kubelet"}

    new_pods = ok(plan_state_items(release(), ["node"], cluster(pods="10.240.0.0/16"),
                                   {"version": 2})).hashes()
    assert {n for n in base if base[n] != new_pods[n]} == {"kubeadm-join"}

    new_net = ok(plan_state_items(release(), ["node"], cluster(),
                                  {"version": 2, "ethernets": {}})).hashes()
    assert {n for n in base if base[n] != new_net[n]} == {NETPLAN_ITEM}


def test_hash_ignores_role_order_and_key_order() -> None:
    a = StateItem.model_validate(item("x", "checks", "command", ("etcd", "master"),
                                      command="c", env={"A": "1", "B": "2"}))
    b = StateItem.model_validate(item("x", "checks", "command", ("master", "etcd"),
                                      env={"B": "2", "A": "1"}, command="c"))
    assert item_hash(a) == item_hash(b)
    assert item_hash(a) != item_hash(a.model_copy(update={"phase": StateItemPhase.JOIN}))


@pytest.mark.parametrize(("items", "roles", "message"), [
    ([item("a", "checks"), item("a", "join")], ["node"],
     "spec.stateItems[1]: state item name 'a' is used twice"),
    ([item("f", "configuration", "file", content="x")], ["node"],
     "spec.stateItems[0]: file item 'f': params needs path"),
    ([item("f", "configuration", "file", ("master",), content="x")], ["node"],
     "file item 'f': params needs path"),  # checked even where the item is not applied
    ([item("f", "configuration", "file", path="etc/x", content="x")], ["node"],
     "params.path 'etc/x' must be absolute"),
    ([item("p", "configuration", "package", version="1")], ["node"],
     "package item 'p': params needs name"),
    ([item("c", "checks", "command", foo="bar")], ["node"], "params needs command"),
    ([item("k", "join", "kubeadm", phase="join", cluster={})], ["node"],
     "params.cluster is filled in by Racksmith"),
    ([item("k", "join", "kubeadm", foo=1)], ["node"], "params needs phase"),
    ([], [], "spec.roles: a machine needs at least one role"),
    ([], ["worker"], "spec.roles[0]: unknown role 'worker'"),
])
def test_refusals(items: list[dict[str, Any]], roles: list[str], message: str) -> None:
    result = plan_state_items(release(items), roles, cluster())
    assert isinstance(result, list)
    assert any(message in str(e) for e in result), result


def test_netplan_name_is_reserved() -> None:
    result = plan_state_items(release([item(NETPLAN_ITEM, "checks")]), ["node"], cluster(),
                              {"version": 2})
    assert isinstance(result, list)
    assert "reserved for the netplan item" in str(result[0])


def test_unknown_item_type() -> None:
    helm = StateItem.model_construct(name="chart", phase=StateItemPhase.JOIN, roles=[],
                                     type="helm", params={})
    spec = ClusterReleaseSpec(version="9.9.9", state_items=[helm])
    result = plan_state_items(ClusterRelease(spec=spec), ["node"], cluster())
    assert isinstance(result, list)
    assert [str(e) for e in result] == [
        "spec.stateItems[0]: unknown state item type 'helm' "
        "(known: file, package, service, command, kubeadm)"
    ]


def test_control_plane_machines_learn_the_init_node_and_workers_do_not() -> None:
    def context(roles: list[str]) -> dict[str, object]:
        planned = ok(plan_state_items(release(), roles, cluster(), init_node="m-1"))
        join = next(i for i in planned.state_items() if i.name == "kubeadm-join")
        return dict(join.params["cluster"])

    assert context(["etcd", "master"])["initNode"] == "m-1"
    assert "initNode" not in context(["node"])
