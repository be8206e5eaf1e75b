"""``racksmith status``'s tree (racksmith.cli.status.site_tree): the first
problem of what is not Ready, and Ready only when every cluster and machine is."""

from __future__ import annotations

from typing import Any

from racksmith.cli.status import site_tree


def cluster(ready: bool) -> dict[str, Any]:
    return {"metadata": {"name": "demo", "namespace": "default"},
            "spec": {"release": "r1"},
            "status": {"machinesReady": 1, "machinesTotal": 2, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "MachinesNotReady", "message": "1/2 machines Ready"}]}}


def machine(name: str, roles: list[str], phase: str, host: str | None = None,
            problem: tuple[str, str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if host:
        status["hostRef"] = {"name": host}
    if problem:
        status["conditions"] = [{"type": problem[0], "status": "False", "reason": problem[1],
                                 "message": problem[2]}]
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterName": "demo", "roles": roles}, "status": status}


HOST = {"metadata": {"name": "h1", "namespace": "default"},
        "status": {"provisioning": {"state": "provisioned"}, "operationalStatus": "OK"}}


def test_the_first_problem_is_marked_and_not_ready_is_said() -> None:
    lines, ready = site_tree([cluster(False)], [
        machine("m1", ["master", "etcd"], "Ready", "h1"),
        machine("w1", ["node"], "Pending",
                problem=("HostClaimed", "NoMatchingHost", "no available host matches"))],
        [HOST])
    assert not ready
    text = "\n".join(lines)
    assert "cluster default/demo: not Ready (1/2 machines, release r1)" in text
    assert "control plane: 1/1 Ready" in text and "workers: 0/1 Ready" in text
    assert "host h1: provisioned (OK)" in text
    assert "! HostClaimed: NoMatchingHost: no available host matches" in text


def test_ready_only_when_everything_is() -> None:
    _, ready = site_tree([cluster(True)], [machine("m1", ["master"], "Ready", "h1")], [HOST])
    assert ready
    lines, ready = site_tree([], [], [])
    assert not ready and "no Cluster yet" in lines[0]


def test_a_cluster_shows_its_endpoint_and_reachability() -> None:
    obj = cluster(True)
    obj["status"]["controlPlaneEndpoint"] = {"host": "10.10.0.5", "port": 6443}
    obj["status"]["conditions"].append({"type": "ControlPlaneReachable", "status": "True",
                                        "reason": "Reachable", "message": "ok"})
    lines, _ = site_tree([obj], [], [])
    assert ("  endpoint https://10.10.0.5:6443 (reachable: True, Reachable; racksmith "
            "kubeconfig --cluster default/demo)") in lines
