"""The Subnet controller's pure core: verdicts and status."""

from __future__ import annotations

from datetime import UTC, datetime

from racksmith.controllers.ipam.verdict import apply_verdict, judge, subnet_cidr
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.ipam import Subnet

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)


def subnet(name: str, cidr: str, gateway: str | None = None, created: str = "2026-01-01T00:00:00Z",
           **spec: object) -> Subnet:
    return Subnet.model_validate({
        "apiVersion": "ipam.racksmith.io/v1alpha1", "kind": "Subnet",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                     "generation": 3},
        "spec": {"cidr": cidr, "gateway": gateway, **spec}})


def test_ready_with_counts() -> None:
    net = subnet("net", "10.0.0.0/29", "10.0.0.1")
    v = judge(net, [subnet_cidr(net)], ["10.0.0.2", "10.0.0.3", "10.0.9.9"])
    assert (v.ready, v.reason, v.capacity, v.allocated, v.allocatable) == \
        (True, "Ready", 5, 2, 3)
    assert v.messages == ["1 IPaddr objects hold addresses outside the allocatable ranges: "
                          "10.0.9.9"]


def test_invalid_names_the_field() -> None:
    v = judge(subnet("net", "10.0.0.0/24", "10.0.1.1"), [], [])
    assert (v.ready, v.reason) == (False, "InvalidSpec")
    assert v.message == "spec.gateway: 10.0.1.1 is outside the cidr 10.0.0.0/24"


def test_overlapping_names_the_older_subnet() -> None:
    old = subnet("old", "10.0.0.0/16")
    new = subnet("new", "10.0.3.0/24", created="2026-02-01T00:00:00Z")
    v = judge(new, [subnet_cidr(old), subnet_cidr(new)], [])
    assert (v.ready, v.reason, v.allocatable) == (False, "Overlapping", 0)
    assert "default/old (10.0.0.0/16)" in v.message
    assert judge(old, [subnet_cidr(old), subnet_cidr(new)], []).ready


def test_exhausted() -> None:
    net = subnet("net", "10.0.0.0/30", "10.0.0.1")
    v = judge(net, [], ["10.0.0.2"])
    assert (v.ready, v.reason, v.allocatable, v.allocated, v.capacity) == \
        (False, "Exhausted", 0, 1, 1)


def test_transition_time_moves_only_with_the_status() -> None:
    net = subnet("net", "10.0.0.0/29")
    first = apply_verdict(None, judge(net, [], []), T0, 3)
    same = apply_verdict(first, judge(net, [], ["10.0.0.1"]), T1, 3)
    (cond,) = same.conditions
    assert cond.last_transition_time == T0 and cond.observed_generation == 3
    full = apply_verdict(same, judge(net, [], [f"10.0.0.{i}" for i in range(8)]), T1, 3)
    (cond,) = full.conditions
    assert cond.status == ConditionStatus.FALSE and cond.last_transition_time == T1
