"""The pre-bound claim binder's decision: a table of PV/PVC pairs and the next write."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.controllers.volume.binder import (
    BindStep,
    Nothing,
    SetClaimBound,
    SetClaimRef,
    SetVolumePhase,
    bind_step,
    claim_ref,
)


def pv(phase: str | None = "Available", ref: dict[str, Any] | None = None,
       deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "v1"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"storageClassName": "local", "capacity": {"storage": "1Gi"},
                            "volumeMode": "Filesystem"}
    if ref is not None:
        spec["claimRef"] = ref
    return {"metadata": meta, "spec": spec, "status": {"phase": phase} if phase else {}}


def pvc(uid: str = "c1", phase: str | None = "Pending", volume: str | None = "v1",
        storage: str = "1Gi", sc: str | None = "local") -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"requests": {"storage": storage}}}
    if volume is not None:
        spec["volumeName"] = volume
    if sc is not None:
        spec["storageClassName"] = sc
    return {"metadata": {"name": "data", "namespace": "default", "uid": uid}, "spec": spec,
            "status": {"phase": phase} if phase else {}}


REF = {"namespace": "default", "name": "data", "uid": "c1"}
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, BindStep]] = [
    ("available, pre-bound claim: claimRef first", pv(), pvc(), SetClaimRef()),
    ("claimRef set: PV Bound", pv(ref=REF), pvc(), SetVolumePhase("Bound")),
    ("PV Bound: claim Bound", pv("Bound", REF), pvc(), SetClaimBound()),
    ("all Bound: nothing", pv("Bound", REF), pvc(phase="Bound"), Nothing()),
    ("claim gone: Released", pv("Bound", REF), None, SetVolumePhase("Released")),
    ("claim replaced by a namesake: Released", pv("Bound", REF), pvc(uid="c2"),
     SetVolumePhase("Released")),
    ("released stays released", pv("Released", REF), None, Nothing()),
    ("released is not bound again", pv("Released"), pvc(), Nothing("volume v1 is Released")),
    ("claimRef without uid: uid filled in", pv(ref={"namespace": "default", "name": "data"}),
     pvc(), SetClaimRef()),
    ("claimRef without uid, no claim yet", pv(ref={"namespace": "default", "name": "data"}),
     None, Nothing()),
    ("no phase, no claim: Available", pv(None), None, SetVolumePhase("Available")),
    ("PV being deleted is not bound", pv(deleting=True), pvc(),
     Nothing("volume v1 is being deleted")),
    ("claim too big", pv(), pvc(storage="2Gi"), Nothing("requests 2Gi, the volume has 1Gi")),
    ("claim of another class", pv(), pvc(sc="fast"),
     Nothing("StorageClass 'fast' differs from the volume's 'local'")),
    ("claimRef'd claim names another volume", pv(ref=REF), pvc(volume="v9"),
     Nothing("claim default/data does not name volume v1")),
]


@pytest.mark.parametrize(("pv_", "pvc_", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bind_step(pv_: dict[str, Any], pvc_: dict[str, Any] | None, expected: BindStep) -> None:
    assert bind_step(pv_, pvc_) == expected


def test_claim_ref_names_the_claim_by_uid() -> None:
    ref = claim_ref(pvc())
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
        "PersistentVolumeClaim", "default", "data", "c1")
