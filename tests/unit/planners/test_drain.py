"""The one drain rule, as both drains see it (raw pods and the Machine's PodView)."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.controllers.machine.observed import PodView
from racksmith.planners.drain import MIRROR_ANNOTATION, pod_is_evictable


def _pod(*, owner: str | None = None, mirror: bool = False,
         terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o"}]
    if mirror:
        meta["annotations"] = {MIRROR_ANNOTATION: "x"}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(("pod", "evicted"), [
    (_pod(), True), (_pod(owner="ReplicaSet"), True), (_pod(owner="DaemonSet"), False),
    (_pod(mirror=True), False), (_pod(terminating=True), False),
])
def test_both_drains_evict_the_same_pods(pod: dict[str, Any], evicted: bool) -> None:
    assert pod_is_evictable(pod) is evicted
    assert PodView.from_raw(pod).evictable is evicted
