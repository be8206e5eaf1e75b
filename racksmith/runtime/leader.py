"""The Kubernetes API's side of leader election: a ``LeaseStore`` over
coordination.k8s.io/v1 with kubernetes_asyncio (the election itself is
:mod:`racksmith.election`)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.election import LeaseConflict, LeaseRecord, lease_object


class KubeLeaseStore:
    """A ``LeaseStore`` over coordination.k8s.io/v1 with kubernetes_asyncio."""

    def __init__(self, api_client: ApiClient, namespace: str, name: str) -> None:
        self._api = CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name

    async def get(self) -> LeaseRecord | None:
        try:
            lease = await self._api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _from_lease(lease)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        try:
            lease = await self._api.create_namespaced_lease(self.namespace, self._body(record))
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseConflict(str(exc.reason)) from exc
            raise
        return _from_lease(lease)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            lease = await self._api.replace_namespaced_lease(
                self.name, self.namespace, self._body(record)
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                raise LeaseConflict(str(exc.reason)) from exc
            raise
        return _from_lease(lease)

    def _body(self, record: LeaseRecord) -> Any:
        # A plain dict, not a V1Lease: the model would serialize times with
        # isoformat(), which a strict MicroTime parser rejects.
        return lease_object(self.namespace, self.name, record)


def _from_lease(lease: Any) -> LeaseRecord:
    spec = lease.spec
    return LeaseRecord(
        holder_identity=(spec.holder_identity if spec else None) or "",
        lease_duration_seconds=int((spec.lease_duration_seconds if spec else None) or 0),
        acquire_time=spec.acquire_time if spec else None,
        renew_time=spec.renew_time if spec else None,
        lease_transitions=int((spec.lease_transitions if spec else None) or 0),
        resource_version=lease.metadata.resource_version if lease.metadata else None,
    )
