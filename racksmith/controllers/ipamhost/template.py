"""The L2Template controller: validates templates and reports unconfirmed changes.

Owns ``L2TemplateReconciler`` and ``l2template_controller``. Per reconcile
it re-reads the template, its ``l3Layout`` subnets, its cluster (for the API
VIP, when ``clusterRef`` is set) and the IpamHosts of its namespace, and
writes status when it changed:

- condition ``Valid``: the subnets exist and the template renders for a
  sample host with enough NICs (:mod:`.sample`); problems go to
  ``status.messages`` too;
- condition ``ChangeConfirmed``: False (reason ``ConfirmationRequired``,
  the message naming the exact annotation to set) while IpamHosts rendered
  from an older generation of this template wait for
  ``ipam.racksmith.io/confirm-generation: "<generation>"``; True otherwise.

It never renders hosts or allocates: that is the IpamHost controller's job.
A Warning Event (``Invalid`` or ``ConfirmationRequired``, about the
L2Template, from component ``racksmith-ipamhost``, through the runtime's
``EventRecorder``) is emitted when either condition turns False. Sources:
L2Templates; IpamHosts, mapped to the template they were rendered from;
Subnets, mapped to every known template of their namespace (all templates
for ``default``, where global subnets live). Talks through the runtime's
Client (field manager ``racksmith-ipamhost``): every read from the shared
informers, the status PUT with the resourceVersion read (a stale read ends
in a ``Conflict`` the runtime requeues).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.ipamhost.layout import resolve_subnets
from racksmith.controllers.ipamhost.names import (
    CHANGE_CONFIRMED,
    COMPONENT,
    FIELD_MANAGER,
    GLOBAL_NAMESPACE,
    REASON_CONFIRMATION_REQUIRED,
    REASON_CONFIRMED,
    REASON_INVALID,
    REASON_UP_TO_DATE,
    REASON_VALID,
    VALID,
)
from racksmith.controllers.ipamhost.sample import validate
from racksmith.controllers.ipamhost.selection import (
    confirmation_hint,
    is_confirmed,
    is_outdated,
    rendered_generation,
)
from racksmith.controllers.ipamhost.status import condition_of, same_status, set_condition
from racksmith.kinds.cluster import Cluster
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.ipam import IpamHost, L2Template, L2TemplateStatus
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import CLUSTERS, IPAMHOSTS, L2TEMPLATES, SUBNETS
from racksmith.runtime.result import Done, Result

CONTROLLER_NAME = "l2template"
ACCESS = (watches(L2TEMPLATES, IPAMHOSTS, SUBNETS, CLUSTERS)
          + writes(L2TEMPLATES, "update", subresource="status") + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""


class TemplateIndex:
    """The L2Template keys seen, by namespace, for the Subnet mapper."""

    def __init__(self) -> None:
        self._keys: set[ObjectKey] = set()

    def template_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for L2Template events: the template itself."""
        key = key_of(obj)
        if not key.name:
            return []
        self._keys.add(key)
        return [key]

    def subnet_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for Subnet events: the templates that may use the subnet."""
        namespace = key_of(obj).namespace
        return sorted(k for k in self._keys
                      if namespace in (k.namespace, GLOBAL_NAMESPACE))

    def forget(self, key: ObjectKey) -> None:
        self._keys.discard(key)


def ipamhost_template_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for IpamHost events: the template the host was rendered from."""
    name = (obj.get("status") or {}).get("l2TemplateRef")
    namespace = key_of(obj).namespace
    return [ObjectKey(namespace, str(name))] if name else []


class L2TemplateReconciler:
    """Reconciles one L2Template per call (see the module docstring)."""

    def __init__(self, api_client: Any, clock: Clock | None = None, *,
                 logger: Any = None, recorder: EventRecorder | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.index = TemplateIndex()
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.ipamhost.template")

    async def reconcile(self, key: ObjectKey) -> Result:
        raw = await self.client.get(L2TEMPLATES, key.namespace, key.name)
        if raw is None:
            self.index.forget(key)
            return Done()
        return await self._reconcile(raw)

    async def _reconcile(self, raw: dict[str, Any]) -> Result:
        template = L2Template.model_validate(raw)
        meta = template.metadata
        ns, name, generation = meta.namespace or "", meta.name or "", meta.generation
        log = self.log.bind(kind="L2Template", namespace=ns, name=name)
        layout = await resolve_subnets(self.client, template, ns)
        problems = list(layout.problems)
        if not problems:
            vip = None
            if template.spec.cluster_ref:
                got = await self.client.get(CLUSTERS, ns, template.spec.cluster_ref)
                vip = Cluster.model_validate(got).spec.api_server.vip if got else None
            problems = validate(template.spec, {k: s.spec for k, s in layout.subnets.items()},
                                vip)
        now = self.clock.wall()
        valid = Condition(
            type=VALID, status=ConditionStatus.FALSE if problems else ConditionStatus.TRUE,
            reason=REASON_INVALID if problems else REASON_VALID,
            message="; ".join(problems) if problems else "renders for a sample host",
            observed_generation=generation)
        hosts = [IpamHost.model_validate(h) for h in await self.client.list(IPAMHOSTS, ns)]
        confirmed = self._confirmation(template, hosts, generation)
        base = template.status if template.status is not None else L2TemplateStatus()
        conditions = set_condition(set_condition(base.conditions, valid, now), confirmed, now)
        status = L2TemplateStatus(messages=problems, observed_generation=generation,
                                  conditions=conditions)
        if same_status(template.status, status):
            return Done()
        raw["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            await self.client.update_status(L2TEMPLATES, raw)
        except NotFound:
            return Done()
        log.info("l2template judged", valid=not problems, change_confirmed=str(confirmed.status))
        for cond in (valid, confirmed):
            before = condition_of(base.conditions, cond.type)
            turned_false = cond.status == ConditionStatus.FALSE and (
                before is None or (before.status, before.message) != (cond.status, cond.message))
            if turned_false:
                await self.recorder.record(raw, "Warning", cond.reason or cond.type,
                                           cond.message or "")
        return Done()

    def _confirmation(self, template: L2Template, hosts: list[IpamHost],
                      generation: int | None) -> Condition:
        outdated = sorted((h for h in hosts if is_outdated(h, template)),
                          key=lambda h: h.metadata.name or "")
        if not outdated:
            return Condition(type=CHANGE_CONFIRMED, status=ConditionStatus.TRUE,
                             reason=REASON_UP_TO_DATE,
                             message="every IpamHost using it is rendered from this generation",
                             observed_generation=generation)
        names = ", ".join(h.metadata.name or "" for h in outdated[:10])
        more = f" and {len(outdated) - 10} more" if len(outdated) > 10 else ""
        olds = sorted({str(rendered_generation(h)) for h in outdated})
        if is_confirmed(template):
            return Condition(type=CHANGE_CONFIRMED, status=ConditionStatus.TRUE,
                             reason=REASON_CONFIRMED,
                             message=f"generation {generation} confirmed; re-rendering "
                                     f"{len(outdated)} IpamHosts: {names}{more}",
                             observed_generation=generation)
        return Condition(
            type=CHANGE_CONFIRMED, status=ConditionStatus.FALSE,
            reason=REASON_CONFIRMATION_REQUIRED,
            message=f"{len(outdated)} IpamHosts keep their netconfig rendered from generation "
                    f"{', '.join(olds)} ({names}{more}); to re-render them from generation "
                    f"{generation}, set the annotation {confirmation_hint(template)}",
            observed_generation=generation)


def l2template_controller(
    api_client: Any,
    *,
    clock: Clock | None = None,
    workers: int = 1,
    namespace: str | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for L2Templates (see the module docstring).

    ``namespace``: watch one namespace only (None: all); Subnets are watched
    everywhere (global subnets live in ``default``). ``recorder``: the
    process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = L2TemplateReconciler(api_client, clock, logger=logger, recorder=recorder)
    client, index = reconciler.client, reconciler.index
    sources = [
        client.source(L2TEMPLATES, namespace=namespace, mapper=index.template_keys),
        client.source(IPAMHOSTS, namespace=namespace, mapper=ipamhost_template_keys),
        client.source(SUBNETS, mapper=index.subnet_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
