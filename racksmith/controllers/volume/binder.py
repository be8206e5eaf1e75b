"""The pre-bound claim binder: what kube-controller-manager's PV controller
does for statically pre-bound claims, for the embedded API server.

Owns ``bind_step`` (pure: a PersistentVolume and the claim it concerns →
the one next write), ``ClaimBinder`` (the reconciler, keyed by PV) and
``claim_binder_controller``. A PVC whose ``spec.volumeName`` names an
Available PV (or a PV whose ``claimRef`` already names it, by uid) is
bound: PV ``spec.claimRef`` (namespace, name, uid), then PV
``status.phase: Bound``, then PVC ``status.phase: Bound`` (with the PV's
capacity and access modes), one write per reconcile. A claim that is gone
(or replaced by another of the same name) makes its PV ``Released``
(reclaim policy Retain: nothing is deleted). Status goes through the
``persistentvolumes/status`` and ``persistentvolumeclaims/status``
subresources, which the embedded API server serves. A claim that does not
fit the PV (StorageClass, volume mode, requested size) stays Pending.

It talks through the runtime ``Client``: it watches PersistentVolumes and
PersistentVolumeClaims (a claim is mapped to the PV its ``spec.volumeName``
names; the claims naming a PV are an index of the claim informer), reads
them from the cache, and writes PVs (object and status) and claim status;
a lost race raises ``Conflict``, which the runtime requeues.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.volume import names as n
from racksmith.planners.quantity import to_bytes
from racksmith.runtime.access import watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.informer import field_index, field_index_name
from racksmith.runtime.keys import ObjectKey, self_keys
from racksmith.runtime.planes import (
    ClusterPlane,
    ClusterUnavailable,
    SharedPlane,
    qualified,
    split_key,
)
from racksmith.runtime.resources import PVCS, PVS
from racksmith.runtime.result import Done, RequeueAfter, Result

CONTROLLER_NAME = "claim-binder"
ACCESS = (watches(PVCS, PVS) + writes(PVCS, "update", subresource="status")
          + writes(PVS, "update") + writes(PVS, "update", subresource="status"))
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""
VOLUME_NAME_INDEX = field_index_name("spec.volumeName")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- steps ------------------------------------------------------------------------


@dataclass(frozen=True)
class SetClaimRef:
    """Write PV ``spec.claimRef`` naming the claim (with its uid)."""


@dataclass(frozen=True)
class SetVolumePhase:
    """Write PV ``status.phase``."""

    phase: str


@dataclass(frozen=True)
class SetClaimBound:
    """Write PVC ``status.phase: Bound`` with the PV's capacity and access modes."""


@dataclass(frozen=True)
class Nothing:
    """Nothing to write; ``why`` is logged when it explains a claim left Pending."""

    why: str = ""


BindStep = SetClaimRef | SetVolumePhase | SetClaimBound | Nothing


def claim_ref(pvc: Mapping[str, Any]) -> dict[str, Any]:
    """The ``claimRef`` naming ``pvc``."""
    meta = _map(pvc.get("metadata"))
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": meta.get("namespace"), "name": meta.get("name"),
            "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}


def mismatch(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> str | None:
    """Why ``pvc`` cannot use ``pv``, or None."""
    pv_spec, spec = _map(pv.get("spec")), _map(pvc.get("spec"))
    wanted_class = spec.get("storageClassName")
    if wanted_class is not None and wanted_class != (pv_spec.get("storageClassName") or ""):
        return (f"StorageClass {wanted_class!r} differs from the volume's "
                f"{pv_spec.get('storageClassName')!r}")
    if (spec.get("volumeMode") or "Filesystem") != (pv_spec.get("volumeMode") or "Filesystem"):
        return f"volume mode {spec.get('volumeMode')} differs from the volume's"
    wanted = _map(_map(spec.get("resources")).get("requests")).get("storage")
    has = _map(pv_spec.get("capacity")).get("storage")
    try:
        if wanted is not None and has is not None and to_bytes(wanted) > to_bytes(has):
            return f"requests {wanted}, the volume has {has}"
    except ValueError:
        return "unreadable storage request or capacity"
    return None


def bind_step(pv: Mapping[str, Any], pvc: Mapping[str, Any] | None) -> BindStep:
    """The next write for ``pv`` and ``pvc`` (the claim its claimRef names, or
    else the oldest claim pre-bound to it; None: no such claim)."""
    meta, spec = _map(pv.get("metadata")), _map(pv.get("spec"))
    name = str(meta.get("name") or "")
    phase = _map(pv.get("status")).get("phase")
    ref = _map(spec.get("claimRef"))
    claim_meta = _map(pvc.get("metadata")) if pvc is not None else {}
    if ref.get("name"):
        same = pvc is not None and (not ref.get("uid") or ref.get("uid") == claim_meta.get("uid"))
        if not same:
            if ref.get("uid") and phase not in ("Released", "Failed"):
                return SetVolumePhase("Released")
            return SetVolumePhase("Available") if phase is None else Nothing()
        assert pvc is not None
        if _map(pvc.get("spec")).get("volumeName") != name:
            return Nothing(f"claim {claim_meta.get('namespace')}/{claim_meta.get('name')} "
                           f"does not name volume {name}")
        if not ref.get("uid"):
            return SetClaimRef()
        if phase != "Bound":
            return SetVolumePhase("Bound")
        if _map(pvc.get("status")).get("phase") != "Bound":
            return SetClaimBound()
        return Nothing()
    if pvc is None:
        return SetVolumePhase("Available") if phase is None else Nothing()
    if meta.get("deletionTimestamp"):
        return Nothing(f"volume {name} is being deleted")
    if phase not in (None, "Available"):
        return Nothing(f"volume {name} is {phase}")
    problem = mismatch(pv, pvc)
    if problem is not None:
        return Nothing(problem)
    return SetClaimRef()


def _oldest_pending(claims: list[dict[str, Any]]) -> dict[str, Any] | None:
    live = [c for c in claims if not _map(c.get("metadata")).get("deletionTimestamp")]
    live.sort(key=lambda c: (str(_map(c.get("metadata")).get("creationTimestamp") or ""),
                             str(_map(c.get("metadata")).get("namespace") or ""),
                             str(_map(c.get("metadata")).get("name") or "")))
    return live[0] if live else None


# --- reconciler -------------------------------------------------------------------


class ClaimBinder:
    """Reconciles one PersistentVolume per call (see the module docstring)."""

    def __init__(self, api_client: Any, *, logger: Any = None,
                 plane: ClusterPlane | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(n.BINDER_FIELD_MANAGER)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.volume.binder")

    async def reconcile(self, key: ObjectKey) -> Result:
        cluster, name = split_key(key)
        client = await self.plane.client(cluster) if cluster is not None else self.client
        if client is None:
            raise ClusterUnavailable(cluster or key)
        inside = _indexed(client.with_field_manager(n.BINDER_FIELD_MANAGER))
        pv = await inside.get(PVS, None, name)
        if pv is None:
            return Done()
        ref = _map(_map(pv.get("spec")).get("claimRef"))
        if ref.get("name"):
            pvc = await inside.get(PVCS, str(ref.get("namespace") or "default"),
                                   str(ref["name"]))
        else:
            pvc = _oldest_pending(await inside.by_index(PVCS, VOLUME_NAME_INDEX, name))
        step = bind_step(pv, pvc)
        log = self.log.bind(kind="PersistentVolume", name=name)
        if cluster is not None:
            log = log.bind(cluster=str(cluster))
        try:
            return await self._perform(inside, pv, pvc, step, log)
        except NotFound:
            return RequeueAfter(0.0)  # the PV or the claim went away: decide again

    async def _perform(self, inside: Client, pv: dict[str, Any], pvc: dict[str, Any] | None,
                       step: BindStep, log: Any) -> Result:
        claim = pvc or {}
        claim_name = (f"{_map(claim.get('metadata')).get('namespace')}/"
                      f"{_map(claim.get('metadata')).get('name')}")
        match step:
            case Nothing(why=why):
                if why:
                    log.info("claim not bound", claim=claim_name, why=why)
                return Done()
            case SetClaimRef():
                body = copy.deepcopy(pv)
                body.setdefault("spec", {})["claimRef"] = claim_ref(claim)
                await inside.update(PVS, body)
            case SetVolumePhase(phase=phase):
                body = copy.deepcopy(pv)
                body["status"] = {**_map(body.get("status")), "phase": phase}
                await inside.update_status(PVS, body)
            case SetClaimBound():
                body = copy.deepcopy(claim)
                spec = _map(pv.get("spec"))
                status = {**_map(body.get("status")), "phase": "Bound",
                          "capacity": dict(_map(spec.get("capacity"))),
                          "accessModes": list(spec.get("accessModes") or [])}
                body["status"] = status
                await inside.update_status(PVCS, body)
        log.info("claim binder step", step=type(step).__name__, claim=claim_name)
        return RequeueAfter(0.0)


def _volume_name_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """A PVC concerns the PV its ``spec.volumeName`` names."""
    name = _map(obj.get("spec")).get("volumeName")
    return [ObjectKey("", str(name))] if name else []


def _indexed(client: Client) -> Client:
    client.add_index(PVCS, VOLUME_NAME_INDEX, field_index("spec.volumeName"))
    return client


def claim_binder_controller(api_client: Any, *, clock: Clock | None = None, workers: int = 1,
                            logger: Any = None, plane: ClusterPlane | None = None
                            ) -> Controller:
    """The runtime Controller of the pre-bound claim binder (see the module
    docstring); ``plane``: where the claims and PersistentVolumes are (each
    cluster's own API; None: the management API)."""
    clock = clock if clock is not None else SystemClock()
    binder = ClaimBinder(api_client, logger=logger, plane=plane)
    _indexed(binder.client)
    sources = [
        binder.plane.source(PVS, qualified(self_keys)),
        binder.plane.source(PVCS, qualified(_volume_name_keys)),
    ]
    return Controller(CONTROLLER_NAME, sources, binder,
                      workers=workers, clock=clock, logger=logger)
