"""Builders of the Volume planner's inputs: a Volume, its PV, a job result."""

from __future__ import annotations

from typing import Any

from racksmith.controllers.volume.names import FINALIZER
from racksmith.controllers.volume.observed import Observed, PVView, StorageClassView
from racksmith.kinds.storage import Volume
from racksmith.kinds.volumejobs import JobResult

UID = "uid-v1"
PREP = "prepare:0123abcd"
UNPREP = "unprepare:89abcdef"
SC = StorageClassView("local", "xfs", ("noatime",))


def volume(*, job: str | None = None, finalizer: bool = True, deleting: bool = False,
           device: str | None = None, size: str | None = None,
           template: dict[str, Any] | None = None, mode: str = "Filesystem") -> Volume:
    meta: dict[str, Any] = {"name": "v1", "uid": UID, "generation": 1,
                            "finalizers": [FINALIZER] if finalizer else []}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"nodeName": "n1", "storageClassName": "local", "mode": mode,
                            "sparseLoopDevice": {"size": "1Gi"}}
    if template is not None:
        spec["template"] = template
    status = {k: v for k, v in {"job": job, "deviceName": device, "size": size}.items()
              if v is not None}
    return Volume.model_validate({"apiVersion": "storage.racksmith.io/v1alpha1",
                                  "kind": "Volume", "metadata": meta, "spec": spec,
                                  "status": status})


def pv(*, phase: str | None = "Available", owner: str | None = UID, claim: str | None = None,
       deleting: bool = False, finalizer: bool = True, message: str | None = None) -> PVView:
    return PVView(name="v1", owner_uid=owner, phase=phase, message=message, claim=claim,
                  deleting=deleting, finalizers=(FINALIZER,) if finalizer else ())


def ok(job: str = PREP, size: int | None = 2**30, device: str | None = "loop3") -> JobResult:
    return JobResult(job=job, ok=True, device_name=device, size_bytes=size)


def failure(job: str = PREP) -> JobResult:
    return JobResult(job=job, ok=False, error="signature found", reason="DeviceInUse")


def observed(vol: Volume | None = None, *, sc: StorageClassView | None = SC,
             node: bool = True, pv_: PVView | None = None,
             result: JobResult | None = None) -> Observed:
    return Observed(volume=vol if vol is not None else volume(), storage_class=sc,
                    node_exists=node, pv=pv_, result=result)
