"""The dependency index, sample validation, status building and the
ownership checks on IPaddrs."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from racksmith.controllers.ipamhost.addresses import find_held, is_held_by
from racksmith.controllers.ipamhost.index import Dependencies, DependencyIndex
from racksmith.controllers.ipamhost.names import INTERFACE_LABEL, IPAMHOST_LABEL
from racksmith.controllers.ipamhost.sample import sample_nics, validate
from racksmith.controllers.ipamhost.status import Outcome, host_status, same_status
from racksmith.kinds.ipam import IpamHost, IpamHostState, L2TemplateSpec, Subnet, SubnetSpec
from racksmith.planners.netplan import AddressRequest
from racksmith.runtime.keys import ObjectKey

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = datetime(2025, 1, 2, tzinfo=UTC)
H1, H2 = ObjectKey("ns", "h1"), ObjectKey("ns", "h2")


def obj(name: str, generation: int = 1, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "generation": generation}}


def test_index_wakes_on_spec_changes_waits_and_in_flight() -> None:
    index = DependencyIndex()
    deps = Dependencies()
    deps.seen("Subnet", "ns", "mgmt", 3)
    deps.waits_on("Subnet", "ns", "storage")
    deps.any_of("L2Template", "ns")
    index.record(H1, deps)
    subnets = index.mapper("Subnet")
    assert subnets(obj("mgmt", 3)) == []          # status-only change: nothing to do
    assert subnets(obj("mgmt", 4)) == [H1]        # spec change
    assert subnets(obj("storage", 1)) == [H1]     # waiting: every event
    assert index.mapper("L2Template")(obj("any")) == [H1]
    assert index.mapper("L2Template")(obj("any", namespace="other")) == []
    index.begin(H2)                               # in flight: every event
    assert subnets(obj("unrelated")) == [H2]
    index.record(H2, Dependencies())
    assert subnets(obj("unrelated")) == []
    index.forget(H1)
    assert subnets(obj("storage")) == []


def test_waiting_is_not_downgraded_by_a_later_read() -> None:
    deps = Dependencies()
    deps.waits_on("Subnet", "ns", "a")
    deps.seen("Subnet", "ns", "a", 1)
    assert deps.objects[("Subnet", "ns", "a")] is None


NP = textwrap.dedent("""\
    version: 2
    ethernets:
      {{ nic(0) }}:
        addresses: [{{ ip("0:net") }}]
      {{ nic(1) }}:
        addresses: [{{ ip("1:net") }}]
    """)
SUBNETS = {"net": SubnetSpec(cidr="10.0.0.0/24")}


def spec(np: str = NP, **extra: Any) -> L2TemplateSpec:
    return L2TemplateSpec.model_validate({"npTemplate": np,
                                          "l3Layout": [{"subnetName": "net"}], **extra})


def test_sample_validation() -> None:
    assert validate(spec(), SUBNETS, None) == []
    assert [n.name for n in sample_nics(spec(autoIfMappingPrio=["eno"]))][:2] == ["eno0", "eno1"]
    assert [n.name for n in sample_nics(spec(ifMapping=["a", "b"]))] == ["a", "b"]
    problems = validate(spec(NP + "  {{ nic(20) }}: {}\n"), SUBNETS, None)
    assert problems and "NIC index 20" in problems[0]
    problems = validate(spec(NP.replace('"0:net"', '"0:nope"')), SUBNETS, None)
    assert problems and "nope" in problems[0]


def test_host_status_keeps_the_last_render_on_errors() -> None:
    ok = host_status(None, Outcome(IpamHostState.OK, "Rendered", netconfig={"version": 2},
                                   template="t", ip_addresses=["a"]), 1, T0)
    assert ok.state == IpamHostState.OK and ok.netconfig == {"version": 2}
    assert ok.conditions[0].status == "True" and ok.conditions[0].last_transition_time == T0
    bad = host_status(ok, Outcome(IpamHostState.ERROR, "SubnetNotFound", ["x missing"]), 2, T1)
    assert bad.netconfig == {"version": 2} and bad.l2_template_ref == "t"
    assert bad.ip_addresses == ["a"] and bad.messages == ["x missing"]
    assert bad.conditions[0].status == "False" and bad.conditions[0].last_transition_time == T1
    again = host_status(bad, Outcome(IpamHostState.ERROR, "SubnetNotFound", ["x missing"]), 2,
                        datetime(2030, 1, 1, tzinfo=UTC))
    assert again.conditions[0].last_transition_time == T1
    assert same_status(bad, again) and not same_status(ok, bad) and not same_status(None, ok)


HOST = IpamHost.model_validate({"metadata": {"name": "h", "namespace": "ns", "uid": "u1"}})
SUBNET = Subnet.model_validate({"metadata": {"name": "net", "namespace": "ns"},
                                "spec": {"cidr": "10.0.0.0/24"}})


def ipaddr(name: str, iface: str = "0", uid: str | None = "u1", owner: str = "h",
           subnet: str = "net", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace,
                         "labels": {IPAMHOST_LABEL: owner, INTERFACE_LABEL: iface,
                                    "ipam.racksmith.io/subnet": subnet}},
            "spec": {"address": "10.0.0.9", "ownerRef": {
                "kind": "IpamHost", "name": owner, "namespace": "ns", "uid": uid}}}


def test_ownership_and_reuse() -> None:
    assert is_held_by(ipaddr("a"), HOST)
    assert is_held_by(ipaddr("a", uid=None), HOST)
    assert not is_held_by(ipaddr("a", uid="old"), HOST)
    assert is_held_by(ipaddr("a", uid="old"), HOST, any_uid=True)
    assert not is_held_by(ipaddr("a", owner="other"), HOST, any_uid=True)
    held = [ipaddr("net-b"), ipaddr("net-a"), ipaddr("x", iface="1"),
            ipaddr("y", subnet="other")]
    found = find_held(held, AddressRequest("0", "net"), SUBNET)
    assert found is not None and found["metadata"]["name"] == "net-a"
    assert find_held(held, AddressRequest("2", "net"), SUBNET) is None
