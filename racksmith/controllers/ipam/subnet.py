"""The Subnet controller: validates pools and keeps their usage in status.

Owns ``SubnetReconciler`` and ``subnet_controller``. Per reconcile it
re-reads the Subnet, every Subnet of the cluster (overlaps are checked
cluster-wide, since an address must belong to one usable pool only) and the
IPaddr objects of this subnet, asks :func:`~racksmith.controllers.ipam.verdict.judge`
for the verdict and writes status (capacity, allocatable, allocated,
messages, the Ready condition) when it changed. It never allocates: claims
are made by the controllers that need addresses (``racksmith.ipamclaims``).

Sources: Subnets, mapped to every known Subnet (a subnet appearing, changing
or going away can change the verdict on the others), and IPaddrs, mapped to
their Subnet through the ``ipam.racksmith.io/subnet`` label (or
``spec.subnetRef``).

Events (core v1, about the Subnet, component ``racksmith-subnet``, through
the runtime's ``EventRecorder``), on changes of the Ready condition only
(``events.status_events``): a Warning ``Exhausted``, ``InvalidSpec`` or
``Overlapping`` when the subnet becomes unusable (or unusable for another
reason), a Normal ``Ready`` when it is usable again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.controllers.ipam.events import status_events
from racksmith.controllers.ipam.verdict import apply_verdict, judge, subnet_cidr
from racksmith.ipamclaims.claims import list_ipaddrs
from racksmith.ipamclaims.names import FIELD_MANAGER, SUBNET_LABEL
from racksmith.kinds.ipam import Subnet, SubnetStatus
from racksmith.runtime.clock import Clock, SystemClock
from racksmith.runtime.controller import Controller
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import IPADDRS, SUBNETS
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import KubeSource

CONTROLLER_NAME = "subnet"
COMPONENT = "racksmith-subnet"


class SubnetIndex:
    """The Subnet keys seen, to re-judge every subnet when one changes."""

    def __init__(self) -> None:
        self._keys: set[ObjectKey] = set()

    def subnet_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for Subnet events: this subnet and every other known one."""
        key = key_of(obj)
        if key.name:
            self._keys.add(key)
        return sorted(self._keys)

    def forget(self, key: ObjectKey) -> None:
        self._keys.discard(key)


def ipaddr_subnet_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for IPaddr events: the IPaddr's Subnet (same namespace)."""
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(SUBNET_LABEL)
    if not name:
        ref = (obj.get("spec") or {}).get("subnetRef") or {}
        name = ref.get("name") if isinstance(ref, Mapping) else None
    if not name:
        return []
    return [ObjectKey(str(meta.get("namespace") or ""), str(name))]


class SubnetReconciler:
    """Reconciles one Subnet per call (see the module docstring)."""

    def __init__(self, api_client: Any, clock: Clock | None = None, *,
                 logger: Any = None, recorder: EventRecorder | None = None) -> None:
        self.custom = CustomObjectsApi(api_client)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = (recorder if recorder is not None else EventRecorder(
            api_client, COMPONENT, clock=self.clock)).for_component(COMPONENT)
        self.index = SubnetIndex()
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.ipam.subnet")

    async def reconcile(self, key: ObjectKey) -> Result:
        raw = await self._get(key)
        if raw is None:
            self.index.forget(key)
            return Done()
        subnet = Subnet.model_validate(raw)
        listed = await self.custom.list_cluster_custom_object(
            SUBNETS.group, SUBNETS.version, SUBNETS.plural)
        everyone = [subnet_cidr(Subnet.model_validate(item))
                    for item in listed.get("items") or []]
        ipaddrs = await list_ipaddrs(self.custom, key.namespace, subnet=key.name)
        addresses = [str((item.get("spec") or {}).get("address") or "") for item in ipaddrs]
        verdict = judge(subnet, everyone, addresses)
        generation = subnet.metadata.generation
        status = apply_verdict(subnet.status, verdict, self.clock.wall(), generation)
        if subnet.status is not None and _same(subnet.status, status):
            return Done()
        raw["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            written = await self.custom.replace_namespaced_custom_object_status(
                SUBNETS.group, SUBNETS.version, key.namespace, SUBNETS.plural, key.name, raw,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status == 404:
                return Done()
            if exc.status == 409:
                return RequeueAfter(0.0)
            raise
        self.log.info("subnet judged", kind="Subnet", namespace=key.namespace, name=key.name,
                      reason=verdict.reason, allocated=verdict.allocated,
                      allocatable=verdict.allocatable)
        await self.recorder.record_all(written if isinstance(written, dict) else raw,
                                       status_events(subnet.status, status))
        return Done()

    async def _get(self, key: ObjectKey) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                SUBNETS.group, SUBNETS.version, key.namespace, SUBNETS.plural, key.name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj


def _same(a: SubnetStatus, b: SubnetStatus) -> bool:
    def plain(s: SubnetStatus) -> dict[str, Any]:
        out = s.model_dump(mode="json")
        for cond in out.get("conditions") or []:
            cond.pop("last_transition_time", None)
        return out
    return plain(a) == plain(b)


def subnet_controller(
    api_client: Any,
    *,
    clock: Clock | None = None,
    workers: int = 2,
    namespace: str | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for Subnets (see the module docstring).

    ``namespace``: watch one namespace only (None: all); overlaps are still
    checked against every Subnet of the cluster. ``recorder``: the process's
    EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = SubnetReconciler(api_client, clock, logger=logger, recorder=recorder)
    sources = [
        KubeSource(api_client, SUBNETS, namespace=namespace, clock=clock,
                   mapper=reconciler.index.subnet_keys),
        KubeSource(api_client, IPADDRS, namespace=namespace, clock=clock,
                   mapper=ipaddr_subnet_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
