"""The emulated kubelet's pod rules: which pods it makes Running, and the status it writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from racksmith.agent.kubelet import pod_needs_running, running_pod_status

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def pod(status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", **meta},
            "spec": {"nodeName": "n", "containers": [{"name": "a", "image": "i:1"},
                                                     {"name": "b", "image": "i:2"}]},
            "status": status}


@pytest.mark.parametrize(("obj", "needed"), [
    (pod(), True),
    (pod({"phase": "Pending"}), True),
    (pod({"conditions": [{"type": "Ready", "status": "False"}]}), True),
    (pod({"conditions": [{"type": "Ready", "status": "True"}]}), False),
    (pod(deletionTimestamp="2025-03-01T00:00:00Z"), False),
    (pod({"phase": "Succeeded"}), False),
    (pod({"phase": "Failed"}), False),
])
def test_which_pods_are_made_running(obj: dict[str, Any], needed: bool) -> None:
    assert pod_needs_running(obj) is needed


def test_running_status_keeps_other_conditions_and_the_start_time() -> None:
    before = pod({"startTime": "2025-02-01T00:00:00Z", "conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "example.com/Gate", "status": "True"}]})
    status = running_pod_status(before, NOW)
    assert status["phase"] == "Running"
    assert status["startTime"] == "2025-02-01T00:00:00Z"
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("example.com/Gate", "True"), ("PodScheduled", "True"), ("Initialized", "True"),
        ("ContainersReady", "True"), ("Ready", "True")]
    assert [(c["name"], c["image"], c["ready"]) for c in status["containerStatuses"]] == [
        ("a", "i:1", True), ("b", "i:2", True)]
    assert not pod_needs_running({**before, "status": status})


def test_running_status_starts_now_when_never_started() -> None:
    status = running_pod_status(pod(), NOW)
    assert status["startTime"] == "2025-03-01T12:00:00Z"
    assert all(c["lastTransitionTime"] == "2025-03-01T12:00:00Z" for c in status["conditions"])
