"""The one place a reconcile's proposal is applied.

Owns, in order: the inventory write (``inventory``), metadata changes
(finalizer, annotations) through the object, the status through the status
subresource (only when it changed), the ``old → new`` log line and
metrics, the core v1 Events (transitions, new errors, condition changes,
the handler's own; through the runtime's ``EventRecorder``, which never
fails the reconcile and folds a repeat into the count of the Event it
repeats), and the runtime result (back-off after errors, polls, steady
re-checks).

Writes go through the runtime ``Client`` as PUTs carrying the
resourceVersion the host was read at: a stale read ends in ``Conflict``,
which escapes (the runtime requeues the host and the proposal is worked out
again from a fresh read); a host gone meanwhile ends the writes quietly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from racksmith.clock import Clock
from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.inventory import (
    upsert_hardware_data,
    upsert_inventory,
)
from racksmith.controllers.baremetalhost.metrics import BareMetalHostMetrics
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.states import transition
from racksmith.controllers.baremetalhost.status import (
    BACKEND_REACHABLE,
    apply_proposal,
    condition,
    error_delay,
)
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.metal import BareMetalHostStatus
from racksmith.runtime.client import Client
from racksmith.runtime.conditions import ConditionSpec, EventSpec, EventType
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.resources import HOSTS
from racksmith.runtime.result import Done, RequeueAfter, Result

_QUIET_FIRST = {BACKEND_REACHABLE}
"""Conditions whose first appearance as True is not worth an Event."""


class Committer:
    """Applies proposals (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        clock: Clock,
        settings: BareMetalHostSettings,
        metrics: BareMetalHostMetrics,
        random: Callable[[], float],
        recorder: EventRecorder,
    ) -> None:
        self.client = client
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self.random = random
        self.recorder = recorder

    def now(self) -> datetime:
        return self.clock.wall().replace(microsecond=0)

    async def commit(
        self, ctx: HostContext, raw: dict[str, Any], p: Proposal, log: Any
    ) -> Result:
        """Apply ``p`` to the host ``raw`` (as read); ``log`` is bound to the host."""
        now = self.now()
        old = ctx.host.status
        if ctx.calls.made and not any(c.type == BACKEND_REACHABLE for c in p.conditions):
            p.conditions.append(ConditionSpec(BACKEND_REACHABLE, ConditionStatus.TRUE,
                                              "BackendReachable", "the provisioner answers"))
        new = apply_proposal(old, p, now=now, generation=ctx.host.metadata.generation)
        if p.inventory is not None:
            hardware = p.inventory.model_dump(mode="json", exclude_none=True)
            await upsert_inventory(self.client, raw, hardware, now, "provisioner")
            await upsert_hardware_data(self.client, raw, hardware)
        obj: dict[str, Any] | None = raw
        if _metadata_changes(raw, p):
            obj = await self._update(_with_metadata(raw, p))
        if obj is not None and not (p.remove_finalizer and ctx.deleting):
            obj = await self._write_status(obj, old, new, now)
        self._record(log, old, new, p)
        await self.recorder.record_all(raw, self._events(old, new, p))
        return self._result(ctx, old, new, p)

    async def _write_status(
        self, obj: dict[str, Any], old: BareMetalHostStatus | None, new: BareMetalHostStatus,
        now: datetime,
    ) -> dict[str, Any] | None:
        before = _dump(old) if old is not None else None
        if before is not None:
            before.pop("lastUpdated", None)
        after = _dump(new)
        after.pop("lastUpdated", None)
        if before == after:
            return obj
        new.last_updated = now
        body = dict(obj)
        body["status"] = _dump(new)
        try:
            return await self.client.update_status(HOSTS, body)
        except NotFound:
            return None

    async def _update(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """PUT the host (metadata changes); None if it is gone."""
        try:
            return await self.client.update(HOSTS, obj)
        except NotFound:
            return None

    def _record(
        self, log: Any, old: BareMetalHostStatus | None, new: BareMetalHostStatus, p: Proposal
    ) -> None:
        old_state = _state(old)
        new_state = _state(new)
        if old_state != new_state:
            self.metrics.transitions.labels(from_state=old_state or "", to_state=new_state).inc()
            log.info("state changed", old=old_state or "", new=new_state, detail=p.detail)
        if p.error is not None:
            self.metrics.errors.labels(error_type=p.error[0].value).inc()
            log.warning("host error", error_type=p.error[0].value, message=p.error[1],
                             error_count=new.error_count)
        if p.remove_finalizer:
            log.info("finalizer removed", finalizer=ann.FINALIZER)

    def _events(
        self, old: BareMetalHostStatus | None, new: BareMetalHostStatus, p: Proposal
    ) -> list[EventSpec]:
        events: list[EventSpec] = []
        old_state, new_state = _state(old), _state(new)
        if new.provisioning is not None and new.provisioning.state is not None and \
                old_state != new_state:
            t = transition(old.provisioning.state if old and old.provisioning else None,
                           new.provisioning.state)
            detail = f": {p.detail}" if p.detail else ""
            events.append(EventSpec("Normal", t.reason,
                                    f"{old_state or 'new'} → {new_state}{detail}"))
        if p.error is not None and (
            old is None or old.error_type != new.error_type
            or old.error_message != new.error_message
        ):
            reason = "".join(w.capitalize() for w in p.error[0].value.split())
            events.append(EventSpec("Warning", reason, p.error[1]))
        for cond in new.conditions:
            before = condition(old, cond.type)
            if before is not None and (before.status, before.reason) == (cond.status, cond.reason):
                continue
            if before is None and cond.type in _QUIET_FIRST and \
                    cond.status is ConditionStatus.TRUE:
                continue
            kind: EventType = "Warning" if cond.status is ConditionStatus.FALSE else "Normal"
            events.append(EventSpec(kind, cond.reason or cond.type, cond.message or ""))
        return [*events, *p.events]

    def _result(
        self, ctx: HostContext, old: BareMetalHostStatus | None, new: BareMetalHostStatus,
        p: Proposal,
    ) -> Result:
        if p.remove_finalizer and ctx.deleting:
            return Done()
        if p.error is not None:
            return RequeueAfter(error_delay(new.error_count, self.settings, self.random))
        if p.requeue_after is not None:
            return RequeueAfter(p.requeue_after)
        if _state(old) != _state(new):
            return RequeueAfter(0.0)
        if p.steady:
            return RequeueAfter(self.settings.steady_poll)
        return Done()


def _state(status: BareMetalHostStatus | None) -> str | None:
    if status is None or status.provisioning is None or status.provisioning.state is None:
        return None
    return status.provisioning.state.value


def _dump(status: BareMetalHostStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _metadata_changes(raw: dict[str, Any], p: Proposal) -> bool:
    meta = raw.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    finalizers = meta.get("finalizers") or []
    return (
        (p.add_finalizer and ann.FINALIZER not in finalizers)
        or (p.remove_finalizer and ann.FINALIZER in finalizers)
        or any(k in annotations for k in p.remove_annotations)
        or any(annotations.get(k) != v for k, v in p.set_annotations.items())
    )


def _with_metadata(raw: dict[str, Any], p: Proposal) -> dict[str, Any]:
    obj = dict(raw)
    meta = dict(obj.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    for key in p.remove_annotations:
        annotations.pop(key, None)
    annotations.update(p.set_annotations)
    meta["annotations"] = annotations
    finalizers = [f for f in meta.get("finalizers") or [] if f != ann.FINALIZER]
    if p.add_finalizer or (ann.FINALIZER in (meta.get("finalizers") or [])
                           and not p.remove_finalizer):
        finalizers.append(ann.FINALIZER)
    meta["finalizers"] = finalizers
    obj["metadata"] = meta
    obj.pop("status", None)
    return obj

