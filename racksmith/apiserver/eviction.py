"""The Pod ``eviction`` subresource, honouring PodDisruptionBudgets.

Owns: deciding whether a pod may be evicted. For every PDB in the pod's
namespace whose selector matches the pod, the allowed disruptions are
computed from the live pods (healthy = Ready condition True, as the
disruption controller counts them) and ``minAvailable``/``maxUnavailable``
(integers or percentages); the PDB's status is refreshed with those
numbers. If any matching PDB allows no disruption the answer is 429
``TooManyRequests`` with a ``DisruptionBudget`` cause naming the PDB, and
nothing is deleted. Otherwise the pod is deleted (its finalizers honoured)
and a ``Success`` Status is returned. Pods that are not healthy may always
be evicted (kube's ``IfHealthyBudget`` policy).

Evictions in one namespace are decided one at a time (a lock per namespace
in this process): the budget is read, checked and spent atomically, so two
concurrent drains never take the last allowed disruption twice. One API
server process serves a store; several replicas would need kube's way
(optimistic writes of the PDB's status) instead.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.builtins import builtin_resources
from racksmith.apiserver.errors import ApiError, Cause
from racksmith.apiserver.options import delete_options
from racksmith.apiserver.selectors import LabelSelector
from racksmith.apiserver.service import ListOptions, ResourceService, WriteOptions

Obj = dict[str, Any]

_INFOS = {i.storage_key: i for i in builtin_resources()}
POD = _INFOS["core/pods"]
PDB = _INFOS["policy/poddisruptionbudgets"]


def is_healthy(pod: Obj) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = float(value[:-1])
        raw = pct * total / 100.0
        return math.ceil(raw) if round_up else math.floor(raw)
    return int(value)


def budget(pdb: Obj, pods: list[Obj]) -> tuple[int, int, int, int]:
    """(expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed)."""
    spec = pdb.get("spec", {})
    selector = LabelSelector.from_dict(spec.get("selector"))
    matching = [p for p in pods if not selector.is_empty and selector.matches(
        p.get("metadata", {}).get("labels") or {})]
    expected = len(matching)
    healthy = sum(1 for p in matching if is_healthy(p))
    if spec.get("maxUnavailable") is not None:
        max_unavailable = _scaled(spec["maxUnavailable"], expected, round_up=True)
        desired = max(0, expected - max_unavailable)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    else:
        desired = expected
    allowed = max(0, healthy - desired)
    return expected, healthy, desired, allowed


_LOCKS: dict[str, asyncio.Lock] = {}


def _namespace_lock(namespace: str) -> asyncio.Lock:
    lock = _LOCKS.get(namespace)
    if lock is None:
        lock = _LOCKS[namespace] = asyncio.Lock()
    return lock


async def evict(service: ResourceService, namespace: str, name: str, body: Any, *,
                dry_run: bool = False) -> Obj:
    if isinstance(body, dict) and body.get("kind") not in (None, "Eviction"):
        raise errors.bad_request(f"expected an Eviction, got {body.get('kind')}")
    # Evictions in one namespace are decided one at a time: two concurrent
    # evictions must not both spend the budget's last allowed disruption
    # (kube serialises them through optimistic writes of the PDB's status).
    async with _namespace_lock(namespace):
        return await _evict(service, namespace, name, body, dry_run=dry_run)


async def _evict(service: ResourceService, namespace: str, name: str, body: Any, *,
                 dry_run: bool) -> Obj:
    pod = await service.get(POD, namespace, name)
    options = delete_options(body.get("deleteOptions") if isinstance(body, dict) else None)
    pods = (await service.list(POD, namespace, ListOptions())).items
    pdbs = (await service.list(PDB, namespace, ListOptions())).items
    labels = pod.get("metadata", {}).get("labels") or {}
    blocking: list[tuple[str, Obj]] = []
    for pdb in pdbs:
        selector = LabelSelector.from_dict(pdb.get("spec", {}).get("selector"))
        if selector.is_empty or not selector.matches(labels):
            continue
        expected, healthy, desired, allowed = budget(pdb, pods)
        await _refresh_status(service, pdb, expected, healthy, desired, allowed)
        if is_healthy(pod) and allowed <= 0:
            blocking.append((pdb["metadata"]["name"], pdb))
    if len([p for p in pdbs if _matches(p, labels)]) > 1:
        raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                       "which the eviction subresource does not support.")
    if blocking:
        pdb_name = blocking[0][0]
        # retryAfterSeconds 0, hence no Retry-After header, as kube's
        # checkAndDecrement answers a budget with no disruption left: client-go
        # retries a 429 with the header silently, so `kubectl drain` would
        # never print the refusal nor honour its --timeout. (kube's 10 s is
        # for a budget its controller has not processed yet; this server
        # computes the budget on the spot, so that case does not arise.)
        err = errors.too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.")
        err.causes = [Cause("", f"The disruption budget {pdb_name} needs "
                            f"{blocking[0][1].get('status', {}).get('desiredHealthy', 0)} "
                            "healthy pods and has "
                            f"{blocking[0][1].get('status', {}).get('currentHealthy', 0)} "
                            "currently", "DisruptionBudget")]
        raise err
    await service.delete(POD, namespace, name, options, dry_run=dry_run)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


def _matches(pdb: Obj, labels: dict[str, str]) -> bool:
    selector = LabelSelector.from_dict(pdb.get("spec", {}).get("selector"))
    return not selector.is_empty and selector.matches(labels)


async def _refresh_status(service: ResourceService, pdb: Obj, expected: int, healthy: int,
                          desired: int, allowed: int) -> None:
    status = dict(pdb.get("status") or {})
    status.update({"expectedPods": expected, "currentHealthy": healthy,
                   "desiredHealthy": desired, "disruptionsAllowed": allowed,
                   "observedGeneration": pdb["metadata"].get("generation", 1)})
    if status == pdb.get("status"):
        return
    pdb["status"] = status
    meta = pdb["metadata"]
    try:
        res = await service.update(PDB, meta["namespace"], meta["name"], pdb,
                                   WriteOptions(field_manager="racksmith-disruption"),
                                   subresource="status")
        pdb.update(res.obj)
    except ApiError as exc:
        if exc.code not in (404, 409):
            raise
