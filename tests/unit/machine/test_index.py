"""The Machine controller's mappers: which Machines an event concerns."""

from __future__ import annotations

from racksmith.controllers.machine.index import MachineIndex
from racksmith.runtime.keys import ObjectKey


def _host(name: str, consumer: str | None = None, ns: str = "default") -> dict[str, object]:
    spec: dict[str, object] = {}
    if consumer is not None:
        spec["consumerRef"] = {"kind": "Machine", "name": consumer, "namespace": ns}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_a_host_wakes_its_consumer_the_machine_naming_it_and_those_waiting() -> None:
    index = MachineIndex()
    index.record(ObjectKey("default", "m1"), "demo", None, False, host="h1")
    index.record(ObjectKey("default", "waiting"), "demo", None, True)
    index.record(ObjectKey("default", "m3"), "demo", None, False, host="h3")
    index.record(ObjectKey("other", "m4"), "demo", None, True, host="h1")
    # A released host names no consumer any more, yet the deleted Machine
    # whose hostRef names it waits for its deprovisioning to finish.
    assert index.host_keys(_host("h1")) == [ObjectKey("default", "m1"),
                                            ObjectKey("default", "waiting")]
    assert index.host_keys(_host("h2", consumer="m3")) == [ObjectKey("default", "m3"),
                                                           ObjectKey("default", "waiting")]
    index.forget(ObjectKey("default", "m1"))
    assert index.host_keys(_host("h1")) == [ObjectKey("default", "waiting")]
