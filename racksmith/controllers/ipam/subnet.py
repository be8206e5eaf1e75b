"""The Subnet controller: validates pools and keeps their usage in status.

Owns ``SubnetReconciler`` and ``subnet_controller``. Per reconcile it reads
the Subnet, every Subnet of the cluster (overlaps are checked cluster-wide,
since an address must belong to one usable pool only) and the IPaddr
objects of this subnet, asks :func:`~racksmith.controllers.ipam.verdict.judge`
for the verdict and writes status (capacity, allocatable, allocated,
messages, the Ready condition) when it changed. It never allocates: claims
are made by the controllers that need addresses (``racksmith.ipamclaims``).

Talks to the API through the runtime's Client (field manager
``racksmith-ipam``): every read comes from the shared informers (the
Subnets of the whole cluster, the IPaddrs through an index by their
``ipam.racksmith.io/subnet`` label), the one write is the status PUT with
the resourceVersion read (a stale read ends in a ``Conflict``, which the
runtime requeues).

Sources: Subnets of the whole cluster, mapped to every Subnet of the
watched namespace in the cache (a subnet appearing, changing or going away
can change the verdict on the others), and IPaddrs, mapped to their Subnet
through the ``ipam.racksmith.io/subnet`` label (or ``spec.subnetRef``).

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

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.ipam.events import status_events
from racksmith.controllers.ipam.verdict import apply_verdict, judge, subnet_cidr
from racksmith.ipamclaims.names import FIELD_MANAGER, SUBNET_LABEL
from racksmith.kinds.ipam import Subnet
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.conditions import same_but_times
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.informer import SharedInformer, label_index
from racksmith.runtime.keys import Mapper, ObjectKey, key_of
from racksmith.runtime.resources import IPADDRS, SUBNETS
from racksmith.runtime.result import Done, Result

CONTROLLER_NAME = "subnet"
ACCESS = (watches(SUBNETS, IPADDRS) + writes(SUBNETS, "update", subresource="status")
          + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""
COMPONENT = "racksmith-subnet"
SUBNET_INDEX = "ipam.racksmith.io/subnet"
"""The IPaddr index by the name in their ``ipam.racksmith.io/subnet`` label."""


def subnet_keys(subnets: SharedInformer, namespace: str | None) -> Mapper:
    """Mapper for Subnet events: this subnet and every other one of
    ``namespace`` (None: all) the cache holds."""

    def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
        out = {key_of(o) for o in subnets.list(namespace)}
        key = key_of(obj)
        if key.name and namespace in (None, key.namespace):
            out.add(key)  # a deleted subnet is no longer in the store
        return sorted(out)

    return keys


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
                 logger: Any = None, recorder: EventRecorder | None = None,
                 namespace: str | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        # The IPaddrs of ``namespace`` (None: all) by Subnet; without a cache,
        # by_index lists live and filters with the same function.
        self.client.add_index(IPADDRS, SUBNET_INDEX, label_index(SUBNET_LABEL), namespace)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.ipam.subnet")

    async def reconcile(self, key: ObjectKey) -> Result:
        client = self.client
        raw = await client.get(SUBNETS, key.namespace, key.name)
        if raw is None:
            return Done()
        subnet = Subnet.model_validate(raw)
        everyone = [subnet_cidr(Subnet.model_validate(item)) for item in await client.list(SUBNETS)]
        ipaddrs = await client.by_index(IPADDRS, SUBNET_INDEX, key.name, key.namespace)
        addresses = [str((item.get("spec") or {}).get("address") or "") for item in ipaddrs]
        verdict = judge(subnet, everyone, addresses)
        generation = subnet.metadata.generation
        status = apply_verdict(subnet.status, verdict, self.clock.wall(), generation)
        if same_but_times(subnet.status, status):
            return Done()
        raw["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            written = await client.update_status(SUBNETS, raw)
        except NotFound:
            return Done()
        self.log.info("subnet judged", kind="Subnet", namespace=key.namespace, name=key.name,
                      reason=verdict.reason, allocated=verdict.allocated,
                      allocatable=verdict.allocatable)
        await self.recorder.record_all(written, status_events(subnet.status, status))
        return Done()


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

    ``namespace``: reconcile the Subnets of one namespace only (None: all);
    Subnets are watched cluster-wide all the same, since overlaps are
    checked against every Subnet of the cluster. ``recorder``: the
    process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = SubnetReconciler(api_client, clock, logger=logger, recorder=recorder,
                                  namespace=namespace)
    client = reconciler.client
    sources = [
        client.source(SUBNETS, mapper=subnet_keys(client.informer(SUBNETS), namespace)),
        client.source(IPADDRS, namespace=namespace, mapper=ipaddr_subnet_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
