"""The IpamHost controller: renders each host's netplan from its L2Template.

Owns ``IpamHostReconciler`` and ``ipamhost_controller``. Per reconcile it
re-reads the IpamHost, its Machine (``spec.l2TemplateSelector``,
``spec.clusterName``), the Cluster (``spec.apiServer.vip`` for
``cluster_api_lb_ip()``), the L2Templates of the namespace, the template's
Subnets and the host's IPaddrs, then:

1. chooses the template (:mod:`.selection`); none → Pending, an ambiguous
   choice → Error;
2. keeps the old render (condition ``TemplateChangePending`` True) when the
   template changed since the last render and the change is not confirmed;
3. resolves the ``l3Layout`` subnets (unknown → Error naming it);
4. discovers the addresses the template asks for (a NIC index beyond the
   host's NICs → Error), reuses or claims them (:mod:`.addresses`; an
   exhausted or not yet validated subnet → Pending with its message);
5. renders; OK writes the annotation
   ``ipam.racksmith.io/rendered-template-generation`` then the status
   (state, netconfig, ipAddresses, l2TemplateRef), and only then releases
   the addresses no longer asked for.

Failure policy (no partial allocations left unowned): addresses claimed in
a reconcile that ends Pending or Error stay held by the IpamHost — labelled,
owned, listed in ``status.ipAddresses`` — so the next attempt reuses them
instead of claiming again. They are released once a render succeeds
without them, or when the IpamHost is deleted. An Error or Pending outcome
never releases anything: the last good render (kept in status) may be in
use on the host.

Deletion: the finalizer ``ipam.racksmith.io/ipamhost`` (added before the
first claim) stays until every IPaddr of the host is released.

Problems go to ``status.messages``, the ``Ready`` condition and, when they
change, a Warning Event named after the reason (``SubnetNotFound``,
``AmbiguousTemplate``...). A successful render that changes the Ready
condition is a Normal ``Rendered`` Event, a template change waiting for
confirmation a Normal ``ConfirmationRequired`` one. Events are about the
IpamHost, from component ``racksmith-ipamhost``, through the runtime's
``EventRecorder`` (a repeat bumps the count of the Event it repeats).
Talks to the API through the runtime's Client (field manager
``racksmith-ipamhost``): the IpamHost, its Machine and Cluster, the
L2Templates and the Subnets are read from the shared informers; the host's
IPaddrs are read live, because a claim of a moment ago may not be in the
cache yet and reading without it would claim a second address for the same
interface. Writes are PUTs with the resourceVersion read (the finalizer and
the annotation through ``update``, the status through ``update_status``), so
a decision made on a stale read ends in a ``Conflict`` the runtime
requeues; claims and releases are :mod:`racksmith.ipamclaims`'s.

Sources (shared informers): IpamHosts; L2Templates, Subnets, Machines and
Clusters through the :class:`~.index.DependencyIndex` the reconciles fill.
IPaddrs are not watched: an address coming back changes its Subnet's status,
and that event wakes the hosts waiting on the subnet. A Pending host is also
re-checked every ``IpamHostTimings.pending_retry`` seconds (30 s).
"""

from __future__ import annotations

from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.ipamhost.addresses import assign, is_held_by, release_unneeded
from racksmith.controllers.ipamhost.index import Dependencies, DependencyIndex
from racksmith.controllers.ipamhost.layout import resolve_subnets
from racksmith.controllers.ipamhost.names import (
    COMPONENT,
    FIELD_MANAGER,
    FINALIZER,
    GLOBAL_NAMESPACE,
    IPAMHOST_LABEL,
    READY,
    REASON_ADDRESSES_PENDING,
    REASON_CONFIRMATION_REQUIRED,
    REASON_NO_NICS,
    REASON_RENDER_FAILED,
    REASON_RENDERED,
    REASON_SUBNET_NOT_FOUND,
    REASON_SUBNET_UNUSABLE,
    REASON_UP_TO_DATE,
    RENDERED_GENERATION,
    TEMPLATE_CHANGE_PENDING,
)
from racksmith.controllers.ipamhost.selection import (
    NoTemplate,
    awaits_confirmation,
    choose_template,
    confirmation_hint,
)
from racksmith.controllers.ipamhost.status import (
    Outcome,
    condition_of,
    host_status,
    same_status,
    set_condition,
)
from racksmith.controllers.ipamhost.timings import IpamHostTimings
from racksmith.kinds.cluster import Cluster, Machine
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.ipam import IpamHost, IpamHostState, IpamHostStatus, L2Template
from racksmith.planners.netplan import (
    HostNIC,
    NetplanInputs,
    RenderedNetplan,
    discover_addresses,
    render_netplan,
)
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import (
    CLUSTERS,
    IPADDRS,
    IPAMHOSTS,
    L2TEMPLATES,
    MACHINES,
    SUBNETS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result

CONTROLLER_NAME = "ipamhost"
ACCESS = (watches(IPAMHOSTS, L2TEMPLATES, SUBNETS, MACHINES, CLUSTERS, IPADDRS)
          + writes(IPAMHOSTS, "update") + writes(IPAMHOSTS, "update", subresource="status")
          + writes(IPADDRS, "create", "delete") + EVENTS)
"""What the controller reads and writes (its IPAM claims included): its
ClusterRole (``racksmith.app.identities``)."""


class IpamHostReconciler:
    """Reconciles one IpamHost per call (see the module docstring)."""

    def __init__(self, api_client: Any, clock: Clock | None = None, *,
                 logger: Any = None, timings: IpamHostTimings | None = None,
                 recorder: EventRecorder | None = None) -> None:
        self.timings = timings if timings is not None else IpamHostTimings()
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.index = DependencyIndex()
        self.trying: dict[tuple[str, str], set[int]] = {}
        """Per (namespace, subnet): the addresses a claim of one of this
        controller's workers is trying now, shared by every reconcile so that
        two workers never race each other for one address."""
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.ipamhost")

    async def reconcile(self, key: ObjectKey) -> Result:
        self.index.begin(key)
        deps = Dependencies()
        gone = False
        try:
            raw = await self.client.get(IPAMHOSTS, key.namespace, key.name)
            if raw is None:
                gone = True
                return Done()
            return await self._reconcile(raw, deps)
        finally:
            if gone:
                self.index.forget(key)
            else:
                self.index.record(key, deps)

    async def _reconcile(self, raw: dict[str, Any], deps: Dependencies) -> Result:
        host = IpamHost.model_validate(raw)
        meta = host.metadata
        ns, name = meta.namespace or "", meta.name or ""
        log = self.log.bind(kind="IpamHost", namespace=ns, name=name)
        if meta.deletion_timestamp is not None:
            return await self._finalize(raw, host, log)
        machine, cluster = await self._machine_and_cluster(host, deps)
        listed = await self.client.list(L2TEMPLATES, ns)
        templates = [L2Template.model_validate(t) for t in listed]
        if host.spec.l2_template_ref:
            deps.waits_on("L2Template", ns, host.spec.l2_template_ref)
        else:
            deps.any_of("L2Template", ns)
        chosen = choose_template(host, machine, templates)
        if isinstance(chosen, NoTemplate):
            return await self._commit(raw, host, Outcome(chosen.state, chosen.reason,
                                                         [chosen.message]), None, log)
        template = chosen
        if awaits_confirmation(host, template):
            return await self._hold(raw, host, template, log)
        layout = await resolve_subnets(self.client, template, ns, deps)
        if layout.problems:
            return await self._commit(raw, host, Outcome(
                IpamHostState.ERROR, REASON_SUBNET_NOT_FOUND, layout.problems), template, log)
        nics = HostNIC.from_inspection(host.spec.nic_mac_map)
        if not nics:
            return await self._commit(raw, host, Outcome(
                IpamHostState.PENDING, REASON_NO_NICS,
                ["waiting for inspection data: spec.nicMACmap lists no NIC with name and MAC"]),
                template, log)
        vip = cluster.spec.api_server.vip if cluster is not None else None
        inputs = NetplanInputs(template.spec, nics,
                               {k: s.spec for k, s in layout.subnets.items()}, vip)
        requests = discover_addresses(inputs)
        if isinstance(requests, list):
            return await self._commit(raw, host, Outcome(
                IpamHostState.ERROR, REASON_RENDER_FAILED, [str(e) for e in requests]),
                template, log)
        if FINALIZER not in meta.finalizers:
            written = await self._add_finalizer(raw)
            if written is None:
                return Done()
            raw, host = written, IpamHost.model_validate(written)
        held = await self._held(host)
        mine = [ip for ip in held if is_held_by(ip, host)]
        subnets = {k: (s, layout.raw[k]) for k, s in layout.subnets.items()}
        got = await assign(self.client, host, requests, subnets, mine, trying=self.trying)
        if got.claimed:
            log.info("addresses claimed", ipaddrs=got.claimed)
        holding = sorted({*(str(ip["metadata"]["name"]) for ip in mine), *got.claimed})
        if got.errors or got.pending:
            for subnet in got.waiting_on:
                deps.waits_on("Subnet", subnet.metadata.namespace or "",
                              subnet.metadata.name or "")
            state = IpamHostState.ERROR if got.errors else IpamHostState.PENDING
            reason = REASON_SUBNET_UNUSABLE if got.errors else REASON_ADDRESSES_PENDING
            outcome = Outcome(state, reason, [*got.errors, *got.pending], ip_addresses=holding)
            result = await self._commit(raw, host, outcome, template, log)
            if state == IpamHostState.PENDING:
                return RequeueAfter(self.timings.pending_retry)
            return result
        rendered = render_netplan(inputs, got.allocations)
        if not isinstance(rendered, RenderedNetplan):
            return await self._commit(raw, host, Outcome(
                IpamHostState.ERROR, REASON_RENDER_FAILED, [str(e) for e in rendered],
                ip_addresses=holding), template, log)
        used = sorted(str(ip["metadata"]["name"]) for ip in got.used)
        outcome = Outcome(IpamHostState.OK, REASON_RENDERED, [], netconfig=rendered.netconfig,
                          template=template.metadata.name, ip_addresses=used)
        result = await self._commit(raw, host, outcome, template, log)
        released = await release_unneeded(self.client, held, got.used)
        if released:
            log.info("addresses released", ipaddrs=released)
        return result

    async def _held(self, host: IpamHost) -> list[dict[str, Any]]:
        """The IPaddrs held by any IpamHost of ``host``'s name (its namespace and
        the global subnets' one), read live: the cache may not show a claim of
        a moment ago (or may still show one released), and deciding from it
        would claim twice for one interface (or reuse a freed address)."""
        ns, name = host.metadata.namespace or "", host.metadata.name or ""
        out: list[dict[str, Any]] = []
        for namespace in sorted({ns, GLOBAL_NAMESPACE}):
            out.extend(await self.client.list(IPADDRS, namespace, labels={IPAMHOST_LABEL: name},
                                              live=True))
        return [ip for ip in out if is_held_by(ip, host, any_uid=True)]

    async def _machine_and_cluster(self, host: IpamHost, deps: Dependencies
                                   ) -> tuple[Machine | None, Cluster | None]:
        ns = host.metadata.namespace or ""
        name = host.spec.machine_ref.name if host.spec.machine_ref else host.metadata.name
        raw = await self.client.get(MACHINES, ns, name or "")
        if raw is None:
            deps.waits_on("Machine", ns, name or "")
            return None, None
        machine = Machine.model_validate(raw)
        deps.seen("Machine", ns, name or "", machine.metadata.generation)
        cluster_name = machine.spec.cluster_name
        got = await self.client.get(CLUSTERS, ns, cluster_name)
        if got is None:
            deps.waits_on("Cluster", ns, cluster_name)
            return machine, None
        cluster = Cluster.model_validate(got)
        deps.seen("Cluster", ns, cluster_name, cluster.metadata.generation)
        return machine, cluster

    async def _add_finalizer(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """``raw`` with the finalizer, as written; None if the host is gone."""
        raw["metadata"]["finalizers"] = [*(raw["metadata"].get("finalizers") or []), FINALIZER]
        return await self._update(raw)

    async def _update(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """PUT ``raw`` (with the resourceVersion read); None if the host is gone."""
        try:
            return await self.client.update(IPAMHOSTS, raw)
        except NotFound:
            return None

    async def _hold(self, raw: dict[str, Any], host: IpamHost, template: L2Template,
                    log: Any) -> Result:
        """Keep the old render; say the template change waits for confirmation."""
        rendered = (host.metadata.annotations or {}).get(RENDERED_GENERATION)
        message = (f"L2Template {template.metadata.name} changed (generation {rendered} → "
                   f"{template.metadata.generation}); the old netconfig is kept until the "
                   f"change is confirmed with the annotation {confirmation_hint(template)}")
        base = host.status if host.status is not None else IpamHostStatus()
        cond = Condition(type=TEMPLATE_CHANGE_PENDING, status=ConditionStatus.TRUE,
                         reason=REASON_CONFIRMATION_REQUIRED, message=message,
                         observed_generation=host.metadata.generation)
        status = base.model_copy(update={
            "conditions": set_condition(base.conditions, cond, self.clock.wall()),
            "observed_generation": host.metadata.generation})
        previous = condition_of(base.conditions, TEMPLATE_CHANGE_PENDING)
        if not await self._write_status(raw, host.status, status):
            return Done()
        if previous is None or previous.status != ConditionStatus.TRUE:
            log.info("template change awaits confirmation", template=template.metadata.name)
            await self.recorder.record(raw, "Normal", REASON_CONFIRMATION_REQUIRED, message)
        return Done()

    async def _commit(self, raw: dict[str, Any], host: IpamHost, outcome: Outcome,
                      template: L2Template | None, log: Any) -> Result:
        """Write the annotation (when rendered) and the status showing ``outcome``."""
        now = self.clock.wall()
        if outcome.state == IpamHostState.OK and template is not None:
            generation = str(template.metadata.generation)
            annotations = raw["metadata"].get("annotations") or {}
            if annotations.get(RENDERED_GENERATION) != generation:
                # Before the status: a crash in between re-renders (the
                # generations match), never mistakes a new render for an old one.
                raw["metadata"]["annotations"] = {**annotations, RENDERED_GENERATION: generation}
                written = await self._update(raw)
                if written is None:
                    return Done()
                raw = written
        status = host_status(host.status, outcome, host.metadata.generation, now)
        if template is not None:
            cond = Condition(type=TEMPLATE_CHANGE_PENDING, status=ConditionStatus.FALSE,
                             reason=REASON_UP_TO_DATE,
                             message=f"rendering L2Template {template.metadata.name} "
                                     f"generation {template.metadata.generation}",
                             observed_generation=host.metadata.generation)
            status.conditions = set_condition(status.conditions, cond, now)
        previous = condition_of(host.status.conditions if host.status else [], READY)
        if not await self._write_status(raw, host.status, status):
            return Done()
        ready = condition_of(status.conditions, READY)
        changed = previous is None or ready is None or (
            previous.status, previous.reason, previous.message) != (
            ready.status, ready.reason, ready.message)
        log.info("ipamhost status", state=str(outcome.state), reason=outcome.reason,
                 messages=outcome.messages)
        if changed:
            if outcome.state == IpamHostState.OK:
                await self.recorder.record(raw, "Normal", "Rendered",
                                           f"netconfig rendered from L2Template "
                                           f"{outcome.template}")
            else:
                await self.recorder.record(raw, "Warning", outcome.reason, outcome.message)
        return Done()

    async def _write_status(self, raw: dict[str, Any], old: IpamHostStatus | None,
                            new: IpamHostStatus) -> bool:
        """PUT ``new`` unless equal to ``old``; False if the host is gone."""
        if same_status(old, new):
            return True
        raw["status"] = new.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            await self.client.update_status(IPAMHOSTS, raw)
        except NotFound:
            return False
        return True

    async def _finalize(self, raw: dict[str, Any], host: IpamHost, log: Any) -> Result:
        meta = host.metadata
        if FINALIZER not in meta.finalizers:
            return Done()
        held = await self._held(host)
        released = await release_unneeded(self.client, held, [])
        if released:
            log.info("addresses released", ipaddrs=released, reason="deleting")
        raw["metadata"]["finalizers"] = [f for f in meta.finalizers if f != FINALIZER]
        await self._update(raw)
        return Done()


def ipamhost_controller(
    api_client: Any,
    *,
    clock: Clock | None = None,
    workers: int = 2,
    namespace: str | None = None,
    logger: Any = None,
    timings: IpamHostTimings | None = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for IpamHosts (see the module docstring).

    ``namespace``: watch one namespace only (None: all). Subnets are watched
    everywhere: ``scope: global`` subnets live in ``default``. ``timings``:
    how often it looks again without events (None: the defaults).
    ``recorder``: the process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = IpamHostReconciler(api_client, clock, logger=logger, timings=timings,
                                    recorder=recorder)
    client, index = reconciler.client, reconciler.index
    sources = [
        client.source(IPAMHOSTS, namespace=namespace, mapper=index.host_keys),
        client.source(L2TEMPLATES, namespace=namespace, mapper=index.mapper("L2Template")),
        client.source(SUBNETS, mapper=index.mapper("Subnet")),
        client.source(MACHINES, namespace=namespace, mapper=index.mapper("Machine")),
        client.source(CLUSTERS, namespace=namespace, mapper=index.mapper("Cluster")),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
