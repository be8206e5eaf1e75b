"""What one Volume reconcile sees, as plain data for the planner.

Owns ``Observed`` (the Volume, its StorageClass, whether its Node exists,
its PersistentVolume, the agent's last job result, the controller's
waits) and the small views of
the core objects (``StorageClassView``, ``PVView``), built from raw API
dicts and never raising on malformed ones. Filled in by the reconciler;
read by ``plan.decide``. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.volume.names import FINALIZER, VOLUME_API_VERSION, VOLUME_KIND
from racksmith.controllers.volume.timings import VolumeTimings
from racksmith.kinds.storage import Volume
from racksmith.kinds.volumejobs import JobResult


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class StorageClassView:
    """The parts of a StorageClass a PV is built from."""

    name: str
    fs_type: str | None = None
    mount_options: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> StorageClassView:
        params = _map(raw.get("parameters"))
        fs_type = params.get("fsType")
        options = raw.get("mountOptions")
        return cls(
            name=str(_map(raw.get("metadata")).get("name") or ""),
            fs_type=fs_type if isinstance(fs_type, str) and fs_type else None,
            mount_options=tuple(str(o) for o in options) if isinstance(options, list) else (),
        )


@dataclass(frozen=True)
class PVView:
    """A PersistentVolume as the Volume controller judges it."""

    name: str
    owner_uid: str | None
    """uid of its controlling Volume owner reference, if any."""
    phase: str | None
    message: str | None
    claim: str | None
    """``namespace/name`` of its claimRef, if any."""
    deleting: bool
    finalizers: tuple[str, ...] = field(default=())

    @property
    def is_bound(self) -> bool:
        """Bound to a claim: deleting the device now would pull it from under a pod."""
        return self.phase == "Bound"

    @property
    def has_finalizer(self) -> bool:
        return FINALIZER in self.finalizers

    def belongs_to(self, volume: Volume) -> bool:
        return self.owner_uid is not None and self.owner_uid == volume.metadata.uid

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> PVView:
        meta, spec, status = (_map(raw.get(k)) for k in ("metadata", "spec", "status"))
        owner = next((r for r in meta.get("ownerReferences") or []
                      if isinstance(r, Mapping) and r.get("controller")
                      and r.get("kind") == VOLUME_KIND
                      and r.get("apiVersion") == VOLUME_API_VERSION), None)
        ref = _map(spec.get("claimRef"))
        claim = None
        if ref.get("name"):
            claim = f"{ref.get('namespace') or ''}/{ref['name']}"
        finalizers = meta.get("finalizers")
        return cls(
            name=str(meta.get("name") or ""),
            owner_uid=str(owner["uid"]) if owner is not None and owner.get("uid") else None,
            phase=str(status["phase"]) if status.get("phase") else None,
            message=str(status["message"]) if status.get("message") else None,
            claim=claim,
            deleting=bool(meta.get("deletionTimestamp")),
            finalizers=tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else (),
        )


@dataclass(frozen=True)
class Observed:
    """Everything ``decide`` needs about one Volume."""

    volume: Volume
    storage_class: StorageClassView | None
    """None: the StorageClass does not exist."""
    node_exists: bool
    pv: PVView | None
    """The PersistentVolume named like the Volume, if any."""
    result: JobResult | None
    """The agent's job-result annotation (for whichever job it names)."""
    timings: VolumeTimings = field(default_factory=VolumeTimings)
    """How long to wait before looking again (the controller's)."""
