"""Which control-plane Machine initialises its cluster (``observed.init_machine``)."""

from __future__ import annotations

from typing import Any

from racksmith.controllers.machine.observed import init_machine


def _m(name: str, created: str, roles: list[str], cluster: str = "demo",
       deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return {"metadata": meta, "spec": {"clusterName": cluster, "roles": roles}}


def test_the_oldest_master_of_the_cluster_then_by_name() -> None:
    t0, t1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"
    machines = [_m("b-master", t0, ["master", "etcd"]), _m("a-master", t1, ["master"]),
                _m("a-worker", "2025-01-01T00:00:00Z", ["node"]),
                _m("z-other", "2025-01-01T00:00:00Z", ["master"], cluster="other")]
    assert init_machine(machines, "demo") == "b-master"
    machines.append(_m("a-tie", t0, ["master"]))
    assert init_machine(machines, "demo") == "a-tie"
    # one being deleted no longer initialises anything
    machines[-1] = _m("a-tie", t0, ["master"], deleting=True)
    assert init_machine(machines, "demo") == "b-master"
    assert init_machine(machines, "none") is None
