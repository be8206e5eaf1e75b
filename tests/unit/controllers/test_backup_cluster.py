"""Where a cluster's etcd members are, for a backup of its store
(``racksmith.controllers.backup.cluster.member_addresses``)."""

from __future__ import annotations

from typing import Any

from racksmith.controllers.backup.cluster import member_addresses


def _m(name: str, roles: list[str], addresses: list[tuple[str, str]], cluster: str = "demo",
       deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"clusterName": cluster, "roles": roles},
            "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]}}


def test_masters_on_the_control_plane_network_in_name_order() -> None:
    machines = [
        _m("m2", ["master", "etcd"], [("WorkloadIP", "10.20.0.2"), ("InternalIP", "10.10.0.2")]),
        _m("m1", ["master"], [("InternalIP", "192.168.0.1"), ("InternalIP", "10.10.0.1")]),
        _m("m3", ["master"], [("InternalIP", "172.16.0.3")]),   # only one outside: taken
        _m("m4", ["master"], []),                                # no address yet: skipped
        _m("w1", ["node"], [("InternalIP", "10.10.0.9")]),       # not a member
        _m("m5", ["master"], [("InternalIP", "10.10.0.5")], deleting=True),
        _m("x1", ["master"], [("InternalIP", "10.10.0.7")], cluster="other"),
    ]
    assert member_addresses(machines, "demo", ["10.10.0.0/24", "bad"]) == [
        "10.10.0.1", "10.10.0.2", "172.16.0.3"]
