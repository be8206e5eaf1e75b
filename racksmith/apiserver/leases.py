"""The API server's own Lease, for electing one replica among several.

Owns ``ServiceLeaseStore``: a :class:`racksmith.election.LeaseStore` over a
coordination.k8s.io/v1 Lease read and written through the server's
:class:`ResourceService` (the same rules as any client's write: the
resourceVersion precondition makes two replicas' concurrent writes conflict,
and the store — etcd — orders them). Replicas on one etcd use it to elect
the one that runs the server-side lifecycles (garbage collection, namespace
and CRD finalization), as kube-controller-manager does with its Lease in
``kube-system``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.registry import Registry, ResourceInfo
from racksmith.apiserver.service import ResourceService, WriteOptions
from racksmith.election import LeaseConflict, LeaseRecord, lease_object

MANAGER = WriteOptions(field_manager="racksmith-apiserver")


class ServiceLeaseStore:
    """One Lease, ``namespace/name``, through ``service``."""

    def __init__(self, service: ResourceService, registry: Registry, namespace: str,
                 name: str) -> None:
        info = registry.get("coordination.k8s.io", "v1", "leases")
        assert info is not None, "coordination.k8s.io/v1 leases is a built-in resource"
        self._info: ResourceInfo = info
        self._service = service
        self.namespace = namespace
        self.name = name

    async def get(self) -> LeaseRecord | None:
        try:
            obj = await self._service.get(self._info, self.namespace, self.name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return _record(obj)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        try:
            res = await self._service.create(self._info, self.namespace, self._body(record),
                                             MANAGER)
        except ApiError as exc:
            if exc.code == 409:
                raise LeaseConflict(exc.reason) from exc
            raise
        return _record(res.obj)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            res = await self._service.update(self._info, self.namespace, self.name,
                                             self._body(record), MANAGER)
        except ApiError as exc:
            if exc.code in (404, 409):
                raise LeaseConflict(exc.reason) from exc
            raise
        return _record(res.obj)

    def _body(self, record: LeaseRecord) -> dict[str, Any]:
        return lease_object(self.namespace, self.name, record)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _record(obj: dict[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    return LeaseRecord(
        holder_identity=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=_time(spec.get("acquireTime")),
        renew_time=_time(spec.get("renewTime")),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str(obj.get("metadata", {}).get("resourceVersion") or "") or None,
    )
