"""on_change: a mapper that drops the events of heartbeats (with the
LCMMachine digest the Machine and update controllers use)."""

from __future__ import annotations

from typing import Any

from racksmith.kinds.lcm import lcm_change
from racksmith.runtime.keys import ObjectKey, on_change, self_keys


def lcm(heartbeat: str, phase: str = "Ready", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "m-0", "namespace": "ns", "generation": 3, **meta},
            "spec": {"clusterName": "demo"},
            "status": {"phase": phase, "heartbeat": heartbeat, "observedGeneration": 3}}


def test_a_heartbeat_alone_wakes_nothing() -> None:
    mapped = on_change(lcm_change, self_keys)
    key = [ObjectKey("ns", "m-0")]
    assert mapped(lcm("12:00:00")) == key  # first sight
    assert mapped(lcm("12:00:20")) == []  # the agent's heartbeat only
    assert mapped(lcm("12:00:40", phase="Applying")) == key  # a change
    assert mapped(lcm("12:01:00", phase="Applying")) == []
    deleting = lcm("12:01:00", phase="Applying", deletionTimestamp="2026-12-05T12:01:00Z")
    assert mapped(deleting) == key and mapped(deleting) == key  # deletions always pass
