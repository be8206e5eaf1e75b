"""The Machine controller's mappers: which Machines an event concerns.

The mappers read indexes of the shared Machine informer; here its store is
filled by hand (as its list would fill it) instead of from an API server.
"""

from __future__ import annotations

from typing import Any

from racksmith.controllers.machine.index import MachineKeys
from racksmith.runtime.client import Client
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import MACHINES


def _host(name: str, consumer: str | None = None, ns: str = "default",
          state: str = "available") -> dict[str, object]:
    spec: dict[str, object] = {}
    if consumer is not None:
        spec["consumerRef"] = {"kind": "Machine", "name": consumer, "namespace": ns}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec,
            "status": {"provisioning": {"state": state}}}


def _machine(ns: str, name: str, host: str | None = None, *,
             deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"hostRef": {"name": host, "namespace": ns}} if host else {}
    return {"metadata": meta, "spec": {"clusterName": "demo"}, "status": status}


def _stocked(*machines: dict[str, Any]) -> MachineKeys:
    client = Client(None)  # type: ignore[arg-type]  # never started: no API calls
    keys = MachineKeys(client)
    informer = client.informer(MACHINES)
    informer._synced = True  # what its first list does
    for obj in machines:
        informer._apply(key_of(obj), obj, notify=False)
    return keys


def test_a_host_wakes_its_consumer_the_machine_naming_it_and_if_claimable_those_waiting(
) -> None:
    keys = _stocked(
        _machine("default", "m1", host="h1"),
        _machine("default", "waiting"),
        _machine("default", "m3", host="h3"),
        _machine("other", "m4"),
        _machine("default", "going", deleting=True),
    )
    # A released host names no consumer any more, yet the deleted Machine
    # whose hostRef names it waits for its deprovisioning to finish.
    assert keys.host_keys(_host("h1")) == [ObjectKey("default", "m1"),
                                           ObjectKey("default", "waiting")]
    # A claimed host, or one that cannot be claimed yet, wakes no waiting Machine.
    assert keys.host_keys(_host("h2", consumer="m3")) == [ObjectKey("default", "m3")]
    assert keys.host_keys(_host("h5", state="inspecting")) == []
    assert keys.host_keys(_host("h1", state="provisioning")) == [ObjectKey("default", "m1")]
    assert keys.host_keys(_host("h9", ns="other")) == [ObjectKey("other", "m4")]


def test_a_node_and_a_cluster_wake_their_machines() -> None:
    keys = _stocked(_machine("default", "m1", host="h1"), _machine("other", "m1"),
                    _machine("default", "m2", host="h2"))
    assert keys.node_keys({"metadata": {"name": "m1"}}) == [ObjectKey("default", "m1"),
                                                             ObjectKey("other", "m1")]
    assert keys.cluster_keys({"metadata": {"name": "demo", "namespace": "default"}}) == [
        ObjectKey("default", "m1"), ObjectKey("default", "m2")]


def test_a_machine_parses_only_the_hosts_it_may_look_at() -> None:
    from racksmith.controllers.machine.controller import _may_concern
    assert _may_concern(_host("h1"), "m1", None)  # available, unclaimed: a candidate
    assert _may_concern(_host("h1", consumer="m1"), "m1", None)  # its own
    assert not _may_concern(_host("h1", consumer="m2"), "m1", None)  # another's
    assert not _may_concern(_host("h1", state="inspecting"), "m1", None)
    assert _may_concern(_host("h1", state="deprovisioning"), "m1", "h1")  # recorded
