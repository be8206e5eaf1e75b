"""The GracefulRebootRequest controller: reboot a cluster's machines one by one.

Owns ``GracefulRebootReconciler`` and ``graceful_reboot_controller``. Key:
the GracefulRebootRequest ``ns/name`` (name = the cluster). Machines =
``spec.machines`` or every Machine of the cluster, in upgrade order
(control plane first, then ``upgradeIndex`` (none last), then name),
strictly one at a time, each through the node flow (``flow.NodeMaintenance``)
with ``release=None, reboot=always, scope=os`` and owner
``reboot.<ns>.<name>``. The machine in progress is the one whose
NodeMaintenanceRequest the owner holds, else the first not recorded Done. At
``ReadyToFinish`` the machine is recorded Done in ``status.machines`` first,
then the request is deleted: a machine recorded Done is never rebooted
again. ``status.phase`` InProgress → Completed (Failed when a listed
machine does not exist), checked against the state table
``reboot_states.REBOOT_PHASES`` before it is written; conditions
``Blocked`` and ``LockFailed``. Status
goes through the status subresource. A deleted request releases its node
(uncordon if it cordoned it, delete its NodeMaintenanceRequest).

Its node flow records the Events about the Nodes (``Cordoned``,
``DrainStarted``, ``Evicted``/``EvictionRefused``, ``RebootRequested``,
``Uncordoned``; component ``racksmith-maintenance``); the controller
records none of its own.

It talks through the runtime ``Client``. Watches (shared informers)
GracefulRebootRequests, NodeMaintenanceRequests (by owner label), Nodes,
LCMMachines, NodeWorkloadLocks and pods (mapped, through the node's
NodeMaintenanceRequest in the cache, to the request that holds it), and
requeues every ``GracefulRebootTimings.poll`` (5 s) while in progress (a
machine whose request is not created yet is looked at again then). Reads
Machines, Clusters and the requests from the cache; writes the request's
status (PUT with the resourceVersion read: a lost race raises
``Conflict``, which the runtime requeues).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.maintenance.flow import ACCESS as FLOW_ACCESS
from racksmith.controllers.maintenance.flow import FIELD_MANAGER, NodeMaintenance
from racksmith.controllers.maintenance.reboot_states import REBOOT_PHASES
from racksmith.controllers.maintenance.timings import GracefulRebootTimings
from racksmith.kinds.cluster import Cluster, Machine, Role
from racksmith.kinds.common import Condition
from racksmith.kinds.lcm import (
    GracefulRebootRequest,
    GracefulRebootRequestStatus,
    MachineProgress,
    PlanPhase,
    StepPhase,
)
from racksmith.kinds.maintenance import MaintenanceScope
from racksmith.planners.maintenance import (
    MACHINE_LABEL,
    OWNER_LABEL,
    REBOOT_OWNER_PREFIX,
    NodeJob,
    NodeProgress,
    NodeState,
    RebootPolicy,
    parse_owner,
    reboot_owner,
)
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.conditions import ConditionSpec, set_condition
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import NotFound
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.keys import Mapper, ObjectKey, key_of
from racksmith.runtime.planes import (
    ClusterMapper,
    ClusterPlane,
    ClusterUnavailable,
    SharedPlane,
    the_cluster,
)
from racksmith.runtime.resources import (
    CLUSTERS,
    LCMMACHINES,
    MACHINES,
    NMRS,
    NODE_LOCKS,
    NODES,
    PODS,
    REBOOTS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result

CONTROLLER_NAME = "graceful-reboot"
ACCESS = (watches(REBOOTS, NMRS, NODES, LCMMACHINES, NODE_LOCKS, PODS, MACHINES, CLUSTERS)
          + writes(REBOOTS, "update", subresource="status") + EVENTS + FLOW_ACCESS)
"""What the controller reads and writes, its node maintenance flow's included:
its ClusterRole (``racksmith.app.identities``)."""
DONE = "Done"
NOT_FOUND = "NotFound"
BLOCKED = "Blocked"
LOCK_FAILED = "LockFailed"


def reboot_order(machines: Sequence[Machine], wanted: Sequence[str]) -> list[str]:
    """Machine names in upgrade order: control plane first, then ``upgradeIndex``
    (none last), then name; only ``wanted`` ones when it is not empty (names
    that match no machine are left out)."""
    names = set(wanted)

    def rank(m: Machine) -> tuple[bool, bool, int, str]:
        cp = bool({Role.MASTER, Role.ETCD} & set(m.spec.roles))
        index = m.spec.upgrade_index
        return (not cp, index is None, index or 0, m.metadata.name or "")

    chosen = [m for m in machines if not names or (m.metadata.name or "") in names]
    return [m.metadata.name or "" for m in sorted(chosen, key=rank)]


class RequestKeys:
    """Mappers: an object of a node → the GracefulRebootRequest holding that
    node's NodeMaintenanceRequest (from the shared informer of requests)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def of_node(self, node: str) -> list[ObjectKey]:
        found = self.client.informer(NMRS).get(ObjectKey("", node))
        return request_keys(found) if found is not None else []

    def node_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        return self.of_node(key_of(obj).name)

    def lcm_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        key = key_of(obj)
        return [k for k in self.of_node(key.name) if k.namespace == key.namespace]

    @staticmethod
    def lcm_cluster_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
        """An LCMMachine concerns the request named after its cluster."""
        cluster = (obj.get("spec") or {}).get("clusterName")
        return [ObjectKey(key_of(obj).namespace, str(cluster))] if cluster else []

    def lock_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        node = (obj.get("spec") or {}).get("nodeName")
        return self.of_node(str(node)) if node else []

    @staticmethod
    def in_cluster(by_node: Mapper) -> ClusterMapper:
        """An object of a cluster's own API concerns the request named after
        that cluster (a GracefulRebootRequest is the cluster's namesake);
        in a SharedPlane's one API, ``by_node``'s request."""
        def mapper(cluster: ObjectKey | None, _client: Client) -> Mapper:
            return by_node if cluster is None else the_cluster(cluster)
        return mapper


def request_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper for NodeMaintenanceRequests: the GracefulRebootRequest that owns it
    (an owner in digest form, for a namespace and name past a label's 63
    characters, names none: that request is woken by its own resync)."""
    owner = ((obj.get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL)
    parsed = parse_owner(str(owner)) if owner else None
    if parsed is None or parsed[0] != REBOOT_OWNER_PREFIX:
        return []
    return [ObjectKey(parsed[1], parsed[2])]


class GracefulRebootReconciler:
    """Reconciles one GracefulRebootRequest per call (see the module docstring)."""

    def __init__(self, api_client: Any, *, clock: Clock | None = None,
                 logger: Any = None, timings: GracefulRebootTimings | None = None,
                 recorder: EventRecorder | None = None,
                 plane: ClusterPlane | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.maintenance.reboot")
        self.timings = timings if timings is not None else GracefulRebootTimings()
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.flow = NodeMaintenance(api_client, clock=self.clock, logger=self.log,
                                    timings=self.timings.node_flow, recorder=recorder,
                                    plane=self.plane)

    async def reconcile(self, key: ObjectKey) -> Result:
        owner = reboot_owner(key.namespace, key.name)
        log = self.log.bind(kind="GracefulRebootRequest", namespace=key.namespace,
                            name=key.name)
        raw = await self.client.get(REBOOTS, key.namespace, key.name)
        if raw is None:
            for line in await self.flow.release(owner):
                log.info("request gone", action=line)
            return Done()
        request = GracefulRebootRequest.model_validate(raw)
        machines = await self._machines(key)
        order = reboot_order(machines, request.spec.machines)
        missing = sorted(set(request.spec.machines) - set(order))
        status = request.status or GracefulRebootRequestStatus()
        known = {p.name: p for p in status.machines}
        done = {n for n, p in known.items() if p.state == DONE}
        current = await self._current(key, owner)
        if current is not None and current not in order:
            current = None  # removed from the request meanwhile: let it go
            for line in await self.flow.release(owner):
                log.info("machine no longer requested", action=line)
        if current is None:
            current = next((m for m in order if m not in done), None)
        now = self.clock.wall()
        if current is None:
            await self._write(raw, status, order, missing, known, None, None, now)
            return Done()
        job = NodeJob(namespace=key.namespace, machine=current, owner=owner,
                      cluster=key.name, scope=MaintenanceScope.OS, release=None,
                      reboot=RebootPolicy.ALWAYS,
                      drain_timeout=await self._drain_timeout(key))
        if current in done:  # recorded Done, request not deleted yet (a crash in between)
            await self.flow.finish(job)
            return RequeueAfter(0.0)
        progress = await self.flow.advance(job)
        written = await self._write(raw, status, order, missing, known, current,
                                    progress, now)
        if progress.state == NodeState.READY_TO_FINISH:
            if written:
                await self.flow.finish(job)
                log.info("machine rebooted", machine=current)
            return RequeueAfter(0.0)
        return RequeueAfter(min(self.timings.poll, progress.requeue))

    async def _machines(self, key: ObjectKey) -> list[Machine]:
        out: list[Machine] = []
        for item in await self.client.list(MACHINES, key.namespace):
            try:
                machine = Machine.model_validate(item)
            except ValidationError:
                continue
            if machine.spec.cluster_name == key.name:
                out.append(machine)
        return out

    async def _current(self, key: ObjectKey, owner: str) -> str | None:
        """The machine whose NodeMaintenanceRequest ``owner`` holds in cluster
        ``key`` (its API: raises ``ClusterUnavailable`` while unreachable)."""
        inside = await self.plane.client(key)
        if inside is None:
            raise ClusterUnavailable(key)
        for raw in await inside.list(NMRS, labels={OWNER_LABEL: owner}):
            labels = (raw.get("metadata") or {}).get("labels") or {}
            if labels.get(OWNER_LABEL) != owner:
                continue
            name = labels.get(MACHINE_LABEL) or (raw.get("metadata") or {}).get("name")
            return str(name)
        return None

    async def _drain_timeout(self, key: ObjectKey) -> float:
        fallback = self.timings.default_drain_timeout
        raw = await self.client.get(CLUSTERS, key.namespace, key.name)
        if raw is None:
            return fallback
        try:
            cluster = Cluster.model_validate(raw)
        except ValidationError:
            return fallback
        update = getattr(cluster.spec, "update", None)
        seconds = getattr(update, "drain_timeout_seconds", None)
        return float(seconds) if seconds else fallback

    async def _write(self, raw: dict[str, Any], status: GracefulRebootRequestStatus,
                     order: list[str], missing: list[str], known: dict[str, MachineProgress],
                     current: str | None, progress: NodeProgress | None,
                     now: datetime) -> bool:
        """Write the status when it changed; False if the request is gone. Raises
        ``IllegalTransition`` for a phase change ``REBOOT_PHASES`` does not list."""
        new = build_status(status, order, missing, known, current, progress, now)
        assert new.phase is not None  # build_status always decides one
        REBOOT_PHASES.check(status.phase, new.phase)
        if _comparable(new) == _comparable(status):
            return True
        body = dict(raw)
        body["status"] = new.model_dump(mode="json", exclude_none=True)
        try:
            await self.client.update_status(REBOOTS, body)
        except NotFound:
            return False
        return True


def build_status(status: GracefulRebootRequestStatus, order: list[str], missing: list[str],
                 known: dict[str, MachineProgress], current: str | None,
                 progress: NodeProgress | None, now: datetime) -> GracefulRebootRequestStatus:
    """The request's status with ``current`` at ``progress`` (pure)."""
    machines: list[MachineProgress] = []
    for name in order:
        old = known.get(name)
        if name == current and progress is not None:
            finished = progress.state == NodeState.READY_TO_FINISH
            stuck = progress.state in (NodeState.BLOCKED, NodeState.LOCK_FAILED)
            machines.append(MachineProgress(
                name=name,
                phase=(StepPhase.COMPLETED if finished else
                       StepPhase.STUCK if stuck else StepPhase.IN_PROGRESS),
                state=DONE if finished else str(progress.state),
                message=progress.message, progress=progress.progress,
                started_at=(old.started_at if old and old.started_at else now),
                finished_at=now if finished else None))
        elif old is not None:
            machines.append(old)
        else:
            machines.append(MachineProgress(name=name, phase=StepPhase.NOT_STARTED,
                                            progress=0))
    for name in missing:
        machines.append(MachineProgress(name=name, phase=StepPhase.NOT_STARTED,
                                        state=NOT_FOUND, message=f"Machine {name} not found"))
    # A machine recorded Done still holds its NodeMaintenanceRequest until the next
    # step deletes it: the request is not Completed (nor Failed) while one is held,
    # so a client that waits for the phase never sees a maintenance left behind.
    all_done = current is None and all(m.state == DONE for m in machines if m.name in order)
    if all_done and not missing:
        phase = PlanPhase.COMPLETED
    elif all_done:
        phase = PlanPhase.FAILED
    else:
        phase = PlanPhase.IN_PROGRESS
    state = progress.state if progress is not None else None
    message = progress.message if progress is not None else None
    conditions = list(status.conditions)
    conditions = _set_condition(conditions, BLOCKED, state == NodeState.BLOCKED,
                                message if state == NodeState.BLOCKED else None, now)
    conditions = _set_condition(conditions, LOCK_FAILED, state == NodeState.LOCK_FAILED,
                                message if state == NodeState.LOCK_FAILED else None, now)
    return GracefulRebootRequestStatus(phase=phase, machines=machines, conditions=conditions)


def _set_condition(conditions: list[Condition], type_: str, holds: bool,
                   message: str | None, now: datetime) -> list[Condition]:
    """Condition ``type_`` True (reason ``type_``) or False (``Not<type_>``)."""
    spec = (ConditionSpec.true(type_, type_, message or "") if holds
            else ConditionSpec.false(type_, f"Not{type_}", message or ""))
    return set_condition(conditions, spec, now, None)


def _comparable(status: GracefulRebootRequestStatus) -> Any:
    """The status without timestamps that move on every write."""
    data = status.model_dump(mode="json", exclude_none=True)
    for cond in data.get("conditions") or []:
        cond.pop("lastTransitionTime", None)
    for machine in data.get("machines") or []:
        machine.pop("startedAt", None)
        machine.pop("finishedAt", None)
    return data


def graceful_reboot_controller(api_client: Any, *, workers: int = 1,
                               clock: Clock | None = None, logger: Any = None,
                               timings: GracefulRebootTimings | None = None,
                               recorder: EventRecorder | None = None,
                               plane: ClusterPlane | None = None) -> Controller:
    """The runtime Controller for GracefulRebootRequests (see the module docstring).

    ``timings``: its waits and its node flow's (None: the defaults).
    ``recorder``: the process's EventRecorder, for its node flow's Events
    (None: one of its own).
    ``plane``: where the clusters' Nodes, requests, locks and pods are
    (None: the management API).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = GracefulRebootReconciler(api_client, clock=clock, logger=logger,
                                          timings=timings, recorder=recorder, plane=plane)
    client = reconciler.client
    plane_ = reconciler.plane
    keys = RequestKeys(client)
    in_cluster = RequestKeys.in_cluster
    sources = [
        client.source(REBOOTS),
        plane_.source(NMRS, in_cluster(request_keys)),
        plane_.source(NODES, in_cluster(keys.node_keys)),
        client.source(LCMMACHINES, mapper=keys.lcm_keys if isinstance(plane_, SharedPlane)
                      else RequestKeys.lcm_cluster_keys),
        plane_.source(NODE_LOCKS, in_cluster(keys.lock_keys)),
        # a pod of the node goes: drain on
        plane_.source(PODS, in_cluster(keys.lock_keys)),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
