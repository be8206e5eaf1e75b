"""The LCM update controller: rolls a new ClusterRelease through a cluster.

Owns ``UpdateReconciler`` (key: Cluster ns/name) and ``update_controller``.
Per reconcile it re-reads the world and: ensures the cluster's default
UpdateGroups; creates the ClusterUpdatePlan when every machine is deployed
and one runs another release than ``Cluster.spec.release`` (replacing a
not-started plan whose target is stale); drives the active plan — the
ClusterMaintenanceRequest and the ClusterWorkloadLocks, UpdateAutoPause,
which machines start (``plan.to_start``), advancing each machine's node
flow (``NodeFlow``) — and writes the plan's status (a phase change the
state table ``states.PLAN_PHASES`` does not list is refused: nothing is
finished or written, ``IllegalTransition`` is raised); at most every
``UpdateTimings.sweep_period`` (30 s) it runs the flow's ``sweep``. The
decisions are ``plan``'s. Contract:
``docs/design/maintenance-contracts.md``, "The LCM update controller".

Events (core v1, component ``racksmith-update``, through the runtime's
``EventRecorder``), on transitions only: ``UpdatePlanCreated`` (Normal,
about the Cluster) when it creates a plan, and about the ClusterUpdatePlan,
from the change of the status it writes (``events.plan_events``):
``StepCommenced``, ``StepCompleted``, ``PlanCompleted`` (Normal),
``AutoPaused``, ``MachineBlocked``, ``MachineLockFailed``,
``ClusterLockFailed`` (Warning). The node flow it drives records its own
(about the Nodes: ``Cordoned``, ``Evicted``... see the maintenance package).

It talks through the runtime ``Client``. Watched (shared informers, mapped
to Cluster keys by ``ClusterKeys``): Clusters, Machines, LCMMachines and
Nodes (heartbeats filtered out by ``on_change``), ClusterUpdatePlans,
UpdateGroups, UpdateAutoPauses, NodeMaintenanceRequests,
ClusterWorkloadLocks, NodeWorkloadLocks, ClusterMaintenanceRequests (by
their cluster label), pods (their node's cluster, when one goes) and
BareMetalHosts (cached for the node flow, mapped to nothing); all of them
are read from the cache (GracefulRebootRequests from whichever informer of
the process serves them, else live). Written: UpdateGroups and
ClusterUpdatePlans (created; plan spec and status PUT with the
resourceVersion read), the cluster's ClusterMaintenanceRequest (created,
deleted). A lost race raises ``Conflict``, which the runtime requeues; an
object that is gone under a write ends the reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.update import plan as decide
from racksmith.controllers.update.alerts import AlertSource, NoAlerts
from racksmith.controllers.update.events import plan_events
from racksmith.controllers.update.flow import (
    NodeFlow,
    NodeFlowFactory,
    NodeJob,
    NodeProgress,
    RebootPolicy,
)
from racksmith.controllers.update.names import (
    BACKUP_API_VERSION,
    BLOCKED,
    CLUSTER_LABEL,
    CMR_API_VERSION,
    COMPONENT,
    CONTROLLER_NAME,
    FIELD_MANAGER,
    GROUP_API_VERSION,
    NAMESPACE_ANNOTATION,
    OWNER_LABEL,
    PLAN_API_VERSION,
    PLAN_OWNER_PREFIX,
    READY_TO_FINISH,
    RELEASE_ANNOTATION,
    UPDATE_GROUP_LABEL,
    backup_name,
    cmr_name,
    hashed_owner_prefix,
    plan_name,
    plan_owner,
    reboot_owner,
)
from racksmith.controllers.update.plan import MachineView
from racksmith.controllers.update.states import PLAN_PHASES
from racksmith.controllers.update.timings import UpdateTimings
from racksmith.kinds.cluster import Cluster, DrainTimeoutAction, Machine, Role
from racksmith.kinds.lcm import (
    BackupPhase,
    BackupReason,
    ClusterUpdatePlan,
    ClusterUpdatePlanSpec,
    LCMMachine,
    PlanPhase,
    UpdateGroup,
    UpdateGroupSpec,
    lcm_change,
)
from racksmith.kinds.maintenance import LockState, MaintenanceScope
from racksmith.planners.update import GroupPolicy, Schedule, plan_update
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.events import EventRecorder, component_recorder, object_ref
from racksmith.runtime.keys import Mapper, ObjectKey, key_of, on_change
from racksmith.runtime.planes import ClusterMapper, ClusterPlane, SharedPlane, the_cluster
from racksmith.runtime.resources import (
    AUTOPAUSES,
    BACKUPS,
    CLUSTER_LOCKS,
    CLUSTERS,
    CMRS,
    HOSTS,
    LCMMACHINES,
    MACHINES,
    NMRS,
    NODE_LOCKS,
    NODES,
    PLANS,
    PODS,
    REBOOTS,
    UPDATE_GROUPS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result

ACCESS = (watches(CLUSTERS, MACHINES, LCMMACHINES, PLANS, UPDATE_GROUPS, AUTOPAUSES, NMRS,
                  CLUSTER_LOCKS, NODE_LOCKS, NODES, PODS, CMRS, HOSTS, REBOOTS, BACKUPS)
          + writes(PLANS, "create", "update", "delete")
          + writes(PLANS, "update", subresource="status")
          + writes(UPDATE_GROUPS, "create") + writes(CMRS, "create", "delete")
          + writes(BACKUPS, "create") + EVENTS)
"""What the controller reads and writes; with its injected node maintenance
flow's (``racksmith.controllers.maintenance.NODE_FLOW_ACCESS``, added by the
composition in ``racksmith.controllers``) it is its ClusterRole."""

# --- event → cluster mapping -------------------------------------------------------


#: Machine informer index: a Machine's name (its Node's name).
MACHINE_NAME_INDEX = "metadata.name"


def _name_index(obj: Mapping[str, Any]) -> list[str]:
    name = (obj.get("metadata") or {}).get("name")
    return [str(name)] if name else []


class ClusterKeys:
    """Mappers from an event to the Cluster keys it concerns, over the
    shared informers of Clusters and Machines (no state of its own)."""

    def __init__(self, client: Client, namespace: str | None) -> None:
        self.client = client
        self.namespace = namespace
        client.add_index(MACHINES, MACHINE_NAME_INDEX, _name_index, namespace)

    def _clusters(self, namespace: str | None) -> list[ObjectKey]:
        return sorted(key_of(c) for c in
                      self.client.informer(CLUSTERS, self.namespace).list(namespace))

    def everything(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Every cluster (for cluster-wide objects: ClusterWorkloadLocks)."""
        return self._clusters(None)

    def of_namespace(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """The clusters of the object's namespace (UpdateGroups, UpdateAutoPauses)."""
        return self._clusters(key_of(obj).namespace)

    def of_node(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """The clusters with a machine named like the node (Nodes, NodeWorkloadLocks, NMRs)."""
        meta = obj.get("metadata") or {}
        node = str((obj.get("spec") or {}).get("nodeName") or meta.get("name") or "")
        keys = {ObjectKey(key_of(m).namespace, str(m["spec"]["clusterName"]))
                for m in self.client.indexed(MACHINES, MACHINE_NAME_INDEX, node, self.namespace)
                if (m.get("spec") or {}).get("clusterName")}
        labels = meta.get("labels") or {}
        ns = (meta.get("annotations") or {}).get(NAMESPACE_ANNOTATION)
        if labels.get(CLUSTER_LABEL) and ns:
            keys.add(ObjectKey(str(ns), str(labels[CLUSTER_LABEL])))
        return sorted(keys)


def spec_cluster_keys(field: str) -> Any:
    """Mapper: the Cluster named by ``spec.<field>`` in the object's namespace."""

    def mapper(obj: Mapping[str, Any]) -> list[ObjectKey]:
        name = (obj.get("spec") or {}).get(field)
        return [ObjectKey(key_of(obj).namespace, str(name))] if name else []

    return mapper


def _node_digest(obj: Mapping[str, Any]) -> Any:
    """What of a Node the update reads: readiness, boot ID, cordon, labels, annotations."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or []
                  if c.get("type") == "Ready"), None)
    return (ready, (status.get("nodeInfo") or {}).get("bootID"),
            bool((obj.get("spec") or {}).get("unschedulable")),
            sorted((meta.get("labels") or {}).items()),
            sorted((meta.get("annotations") or {}).items()))


def _pod_digest(obj: Mapping[str, Any]) -> Any:
    """What of a pod the drain reads: its node and whether it is going."""
    return ((obj.get("spec") or {}).get("nodeName"),
            bool((obj.get("metadata") or {}).get("deletionTimestamp")))


def _no_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper of a source kept only for the cache the node flow reads."""
    return []


# --- what one reconcile reads --------------------------------------------------------


@dataclass
class World:
    """The objects one reconcile of a cluster reads."""

    cluster: Cluster
    machines: list[MachineView]
    groups: list[GroupPolicy]
    plans: list[tuple[dict[str, Any], ClusterUpdatePlan]]
    nmr_owners: dict[str, str]
    inside: Client
    """The controller's Client inside the cluster (its requests, locks, Nodes)."""


def _parse(model: Any, raw: dict[str, Any]) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


class UpdateReconciler:
    """Reconciles one Cluster's update per call (see the module docstring)."""

    def __init__(self, api_client: Any, flow: NodeFlow, *, alerts: AlertSource | None = None,
                 clock: Clock | None = None, logger: Any = None,
                 timings: UpdateTimings | None = None,
                 recorder: EventRecorder | None = None,
                 backup_before_update: bool = False,
                 plane: ClusterPlane | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.flow = flow
        self.backup_before_update = backup_before_update
        self.timings = timings if timings is not None else UpdateTimings()
        self.alerts: AlertSource = alerts if alerts is not None else NoAlerts()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self._last_sweep: float | None = None
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.update")

    async def reconcile(self, key: ObjectKey) -> Result:
        await self._maybe_sweep()
        raw = await self.client.get(CLUSTERS, key.namespace, key.name)
        if raw is None:
            return Done()
        cluster = Cluster.model_validate(raw)
        try:
            return await self._reconcile(key, cluster)
        except NotFound:
            return Done()  # the plan went away under a write: its delete event follows

    async def _reconcile(self, key: ObjectKey, cluster: Cluster) -> Result:
        inside = await self.plane.client(key)
        if inside is None:
            # only this cluster's update waits for its API
            return RequeueAfter(self.timings.active_requeue)
        world = await self._observe(key, cluster, inside.with_field_manager(FIELD_MANAGER))
        if await self._ensure_groups(key, cluster, world):
            return RequeueAfter(0.0)
        active = [(r, p) for r, p in world.plans if not decide.is_completed(p)]
        await self._drop_orphan_cmr(key, world.inside, {
            plan_owner(key.namespace, p.metadata.name or "") for _, p in active})
        target = cluster.spec.release
        if active:
            raw, plan = min(active, key=lambda rp: rp[0]["metadata"].get(
                "creationTimestamp") or "")
            owner = plan_owner(key.namespace, plan.metadata.name or "")
            if plan.spec.target != target and not decide.has_started(
                    plan, world.machines, owner):
                self.log.info("replacing stale plan", kind="ClusterUpdatePlan",
                              namespace=key.namespace, name=plan.metadata.name,
                              target=plan.spec.target, wanted=target)
                await world.inside.delete(CMRS, None, cmr_name(key.namespace, key.name))
                await self.client.delete(PLANS, key.namespace, plan.metadata.name or "")
                return RequeueAfter(0.0)
            return await self._drive(key, world, raw, plan)
        if decide.wants_plan(target, world.machines):
            if not await self._create_plan(key, world):
                # The schedule cannot be built (logged): look again later, not
                # in a tight loop; a change of the cluster wakes it sooner.
                return RequeueAfter(self.timings.active_requeue)
            return RequeueAfter(0.0)
        return Done()

    # --- reading ------------------------------------------------------------------

    async def _observe(self, key: ObjectKey, cluster: Cluster, inside: Client) -> World:
        # Read-only lists are not copied (copy=False): they are only parsed
        # into models; the plans are copied, a write starts from them.
        ns = key.namespace
        raw_groups = await self.client.list(UPDATE_GROUPS, ns, copy=False)
        groups = [g for g in (_parse(UpdateGroup, r) for r in raw_groups) if g is not None]
        policies = [GroupPolicy(g.metadata.name or "", g.spec.index, g.spec.concurrent_updates,
                                g.spec.reboot_if_update_requires) for g in groups]
        known = {p.name for p in policies}
        lcms: dict[str, LCMMachine] = {}
        for r in await self.client.list(LCMMACHINES, ns, copy=False):
            lcm = _parse(LCMMachine, r)
            if lcm is not None:
                lcms[lcm.metadata.name or ""] = lcm
        nmr_owners: dict[str, str] = {}
        for r in await inside.list(NMRS, copy=False):
            node = str((r.get("spec") or {}).get("nodeName") or r["metadata"]["name"])
            nmr_owners[node] = str((r["metadata"].get("labels") or {}).get(OWNER_LABEL) or "")
        machines: list[MachineView] = []
        for r in await self.client.list(MACHINES, ns, copy=False):
            m = _parse(Machine, r)
            if m is None or m.spec.cluster_name != key.name or m.metadata.deletion_timestamp:
                continue
            name = m.metadata.name or ""
            lcm = lcms.get(name)
            release = ((lcm.status.release if lcm.status else None) if lcm is not None
                       else (m.status.release if m.status else None))
            labels = dict(m.metadata.labels or {})
            roles = frozenset(m.spec.roles) | {Role.NODE}
            machines.append(MachineView(
                name=name,
                group=decide.group_of(key.name, labels.get(UPDATE_GROUP_LABEL), roles, known),
                roles=roles, upgrade_index=m.spec.upgrade_index, labels=labels,
                release=release,
                pinned=(m.metadata.annotations or {}).get(RELEASE_ANNOTATION),
                nmr_owner=nmr_owners.get(name)))
        plans: list[tuple[dict[str, Any], ClusterUpdatePlan]] = []
        for r in await self.client.list(PLANS, ns):
            p = _parse(ClusterUpdatePlan, r)
            if p is not None and p.spec.cluster == key.name:
                plans.append((r, p))
        return World(cluster, machines, policies, plans, nmr_owners, inside)

    def _per_machine(self, world: World) -> tuple[float, str]:
        found = decide.estimate_from(p for _, p in world.plans)
        if found is not None:
            return found[0], f"mean of plan {found[1]}"
        return (float(world.cluster.spec.update.node_duration_seconds),
                "spec.update.nodeDurationSeconds")

    def _schedule(self, world: World, per_machine: float) -> Schedule | str:
        policy = world.cluster.spec.update
        out = plan_update(decide.update_inputs(world.machines, world.groups,
                                               policy.max_unavailable, per_machine))
        if isinstance(out, Schedule):
            return out
        return "; ".join(str(e) for e in out)

    # --- writing ------------------------------------------------------------------

    async def _ensure_groups(self, key: ObjectKey, cluster: Cluster, world: World) -> bool:
        """Create the missing default UpdateGroups; True if one was created."""
        have = {g.name for g in world.groups}
        created = False
        for g in decide.default_group_specs(key.name, cluster.spec.max_worker_upgrade_count):
            if g.name in have:
                continue
            spec = UpdateGroupSpec(index=g.index, concurrent_updates=g.concurrent_updates)
            body = {"apiVersion": GROUP_API_VERSION, "kind": "UpdateGroup",
                    "metadata": {"name": g.name, "namespace": key.namespace,
                                 "labels": {CLUSTER_LABEL: key.name}},
                    "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True)}
            if await self._create(UPDATE_GROUPS, body):
                created = True
                self.log.info("update group created", kind="UpdateGroup",
                              namespace=key.namespace, name=g.name)
        return created

    async def _create_plan(self, key: ObjectKey, world: World) -> bool:
        """Create the plan the cluster wants; False if no schedule can be built."""
        cluster = world.cluster
        target = cluster.spec.release
        per_machine, info = self._per_machine(world)
        schedule = self._schedule(world, per_machine)
        if isinstance(schedule, str):
            self.log.warning("cannot plan the update", kind="Cluster", namespace=key.namespace,
                             name=key.name, error=schedule)
            return False
        name = plan_name(key.name, target)
        if any(p.metadata.name == name for _, p in world.plans):
            await self.client.delete(PLANS, key.namespace, name)  # a completed namesake
        spec = ClusterUpdatePlanSpec(
            cluster=key.name,
            source=decide.source_release(m.release for m in world.machines if m.release),
            target=target,
            steps=decide.build_steps(schedule, commence=cluster.spec.update.auto_commence,
                                     per_machine=per_machine, estimate_info=info))
        body = {"apiVersion": PLAN_API_VERSION, "kind": "ClusterUpdatePlan",
                "metadata": {"name": name, "namespace": key.namespace,
                             "labels": {CLUSTER_LABEL: key.name}},
                "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True)}
        if await self._create(PLANS, body):
            self.log.info("update plan created", kind="ClusterUpdatePlan",
                          namespace=key.namespace, name=name, source=spec.source,
                          target=target, steps=[s.id for s in spec.steps])
            await self.recorder.record(
                object_ref(Cluster.info.api_version, "Cluster", key.name,
                           namespace=key.namespace, uid=cluster.metadata.uid),
                "Normal", "UpdatePlanCreated",
                f"ClusterUpdatePlan {name}: {spec.source} → {target} in steps "
                f"{', '.join(s.id for s in spec.steps)}")
        return True

    async def _drop_orphan_cmr(self, key: ObjectKey, inside: Client, owners: set[str]
                               ) -> None:
        """Delete the cluster's CMR left by a plan that is no longer active."""
        name = cmr_name(key.namespace, key.name)
        cmr = await inside.get(CMRS, None, name)
        if cmr is None:
            return
        owner = str((cmr["metadata"].get("labels") or {}).get(OWNER_LABEL) or "")
        mine = owner.startswith(f"{PLAN_OWNER_PREFIX}.") \
            or hashed_owner_prefix(owner) == PLAN_OWNER_PREFIX
        if mine and owner not in owners:
            await inside.delete(CMRS, None, name)
            self.log.info("cluster maintenance ended", kind="ClusterMaintenanceRequest",
                          name=name, owner=owner)

    # --- driving an active plan -----------------------------------------------------

    def _job(self, key: ObjectKey, world: World, owner: str, target: str,
             machine: str) -> NodeJob:
        view = next(m for m in world.machines if m.name == machine)
        group = next((g for g in world.groups if g.name == view.group), None)
        reboot = (RebootPolicy.IF_REQUIRED if group is None or group.reboot_if_update_requires
                  else RebootPolicy.NEVER)
        return NodeJob(namespace=key.namespace, machine=machine, owner=owner,
                       cluster=key.name, scope=MaintenanceScope.OS, release=target,
                       reboot=reboot,
                       drain_timeout=float(world.cluster.spec.update.drain_timeout_seconds))

    async def _firing(self, namespace: str) -> tuple[list[str], str | None]:
        wanted: set[str] = set()
        for r in await self.client.list(AUTOPAUSES, namespace):
            wanted |= {str(a) for a in (r.get("spec") or {}).get("alerts") or []}
        if not wanted:
            return [], None
        active = await self.alerts.firing()
        return sorted(wanted & active), self.alerts.last_error

    async def _cluster_locks(self, inside: Client) -> tuple[bool, str | None]:
        """(every ClusterWorkloadLock of the cluster inactive, the failed ones' message)."""
        ready = True
        failed: list[str] = []
        for r in await inside.list(CLUSTER_LOCKS):
            status = r.get("status") or {}
            state = status.get("state") or LockState.ACTIVE.value
            if state != LockState.INACTIVE.value:
                ready = False
            if state == LockState.FAILED.value:
                failed.append(f"ClusterWorkloadLock {r['metadata']['name']} "
                              f"({(r.get('spec') or {}).get('controllerName')}) failed: "
                              f"{status.get('errorMessage') or ''}")
        return ready, "; ".join(failed) or None

    async def _etcd_healthy(self, world: World) -> bool:
        for m in world.machines:
            if not m.is_etcd:
                continue
            if m.nmr_owner is not None or not await self._node_ready(world.inside, m.name):
                return False
        return True

    @staticmethod
    async def _node_ready(inside: Client, name: str) -> bool:
        """The Node exists and its Ready condition is True."""
        node = await inside.get(NODES, None, name)
        conditions = ((node or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    async def _create(self, resource: Any, body: dict[str, Any],
                      client: Client | None = None) -> bool:
        """Create ``body`` (through ``client``; None: the management API);
        False when it exists already."""
        try:
            await (client if client is not None else self.client).create(resource, body)
        except AlreadyExists:
            return False
        return True

    async def _pre_update_backup(self, key: ObjectKey, plan: ClusterUpdatePlan, world: World
                                 ) -> tuple[str | None, tuple[str, str] | None]:
        """The plan's pre-update ControlPlaneBackup (asked for when missing) and,
        while its first step may not start yet, why: (name, (reason, message)).
        A plan that began before (a machine started) is not held back."""
        if plan.status is not None and any(m.started_at for m in plan.status.machines):
            return plan.status.backup, None
        meta = plan.metadata
        name = backup_name(key.namespace, meta.name or "", meta.uid or "")
        raw = await self.client.get(BACKUPS, None, name)
        if raw is None:
            await self._create(BACKUPS, {
                "apiVersion": BACKUP_API_VERSION, "kind": "ControlPlaneBackup",
                "metadata": {"name": name, "labels": {CLUSTER_LABEL: world.cluster.metadata.name
                                                      or ""},
                             "annotations": {NAMESPACE_ANNOTATION: key.namespace}},
                # the cluster's own store, as MetalK8s backs etcd up before an upgrade
                "spec": {"reason": BackupReason.PRE_UPDATE.value,
                         "planRef": {"namespace": key.namespace, "name": meta.name},
                         "cluster": {"namespace": key.namespace,
                                     "name": world.cluster.metadata.name or ""}}})
            self.log.info("pre-update backup asked for", kind="ClusterUpdatePlan",
                          namespace=key.namespace, name=meta.name, backup=name)
            return name, ("BackupPending", f"waiting for ControlPlaneBackup {name}")
        status = raw.get("status") or {}
        phase = status.get("phase")
        if phase == BackupPhase.COMPLETED.value:
            return name, None
        if phase == BackupPhase.FAILED.value:
            return name, ("BackupFailed", f"ControlPlaneBackup {name} failed: "
                          f"{status.get('message') or 'see its Events'}; delete it to try "
                          "again (the first step starts once a backup completed)")
        return name, ("BackupPending", f"waiting for ControlPlaneBackup {name} "
                      f"({phase or 'Pending'})")

    async def _ensure_cmr(self, key: ObjectKey, inside: Client, owner: str, target: str
                          ) -> None:
        name = cmr_name(key.namespace, key.name)
        if await inside.get(CMRS, None, name) is not None:
            return
        await self._create(CMRS, {
            "apiVersion": CMR_API_VERSION, "kind": "ClusterMaintenanceRequest",
            "metadata": {"name": name, "labels": {OWNER_LABEL: owner, CLUSTER_LABEL: key.name},
                         "annotations": {NAMESPACE_ANNOTATION: key.namespace}},
            "spec": {"scope": MaintenanceScope.OS.value, "release": target}}, inside)
        self.log.info("cluster maintenance requested", kind="ClusterMaintenanceRequest",
                      name=name, owner=owner, release=target)

    async def _drive(self, key: ObjectKey, world: World, raw: dict[str, Any],
                     plan: ClusterUpdatePlan) -> Result:
        name = plan.metadata.name or ""
        owner = plan_owner(key.namespace, name)
        target = plan.spec.target
        now = self.clock.wall().replace(microsecond=0)
        per_machine, _ = self._per_machine(world)
        schedule = self._schedule(world, per_machine)
        if isinstance(schedule, str):
            self.log.warning("cannot schedule the plan", kind="ClusterUpdatePlan",
                             namespace=key.namespace, name=name, error=schedule)
            return RequeueAfter(self.timings.active_requeue)
        done = {m.name for m in world.machines if decide.is_done(m, target, owner)}
        busy = {m.name for m in world.machines if decide.is_in_progress(m, target, owner)}

        firing, alert_error = await self._firing(key.namespace)
        if firing:
            steps = decide.autopause(plan.spec.steps,
                                     decide.started_steps(schedule, busy, plan))
            if steps is not None:
                raw = dict(raw)
                raw["spec"] = {**raw["spec"], "steps": [
                    s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in steps]}
                written = await self.client.update(PLANS, raw)
                raw, plan = written, ClusterUpdatePlan.model_validate(written)
                self.log.info("plan auto-paused", kind="ClusterUpdatePlan",
                              namespace=key.namespace, name=name, alerts=firing)
        commenced = {s.id for s in plan.spec.steps if s.commence}

        advanced: dict[str, NodeProgress] = {}
        for machine in sorted(busy):
            advanced[machine] = await self.flow.advance(
                self._job(key, world, owner, target, machine))
        started: dict[str, datetime] = {}
        lock_failed: str | None = None
        pending = {m.name for m in world.machines} - done
        backup, backup_waiting = None, None
        wants_start = bool(commenced & {s.step for s in schedule.slots if s.machine in pending})
        if self.backup_before_update and (wants_start or (plan.status and plan.status.backup)):
            backup, backup_waiting = await self._pre_update_backup(key, plan, world)
        if wants_start and backup_waiting is None:
            await self._ensure_cmr(key, world.inside, owner, target)
            locks_ok, lock_failed = await self._cluster_locks(world.inside)
            hold = (world.cluster.spec.update.on_drain_timeout == DrainTimeoutAction.PAUSE
                    and any(p.state == BLOCKED for p in advanced.values()))
            if locks_ok and not hold:
                candidates = decide.to_start(schedule, done, busy, commenced, etcd_healthy=True)
                if any(s.control_plane for s in schedule.slots if s.machine in candidates):
                    healthy = await self._etcd_healthy(world)
                    candidates = decide.to_start(schedule, done, busy, commenced,
                                                 etcd_healthy=healthy)
                for machine in candidates:
                    self.log.info("machine update starts", kind="Machine",
                                  namespace=key.namespace, name=machine, plan=name)
                    started[machine] = now
                    advanced[machine] = await self.flow.advance(
                        self._job(key, world, owner, target, machine))
        finished = {m: now for m, p in advanced.items() if p.state == READY_TO_FINISH}

        elapsed = {}
        for m in plan.status.machines if plan.status else []:
            if m.name in busy and m.started_at:
                elapsed[m.name] = (now - m.started_at).total_seconds()
        policy = world.cluster.spec.update
        remaining = decide.remaining_seconds(
            decide.update_inputs(world.machines, world.groups, policy.max_unavailable,
                                 per_machine), done | set(finished), elapsed)
        status = decide.plan_status(plan, decide.Observed(
            schedule=schedule, done=frozenset(done),
            advanced={m: p for m, p in advanced.items() if m not in finished},
            started=started, finished=finished, firing=firing, remaining=remaining,
            cluster_lock_failed=lock_failed, alert_error=alert_error, now=now,
            backup=backup, backup_waiting=backup_waiting))
        assert status.phase is not None  # plan_status always decides one
        PLAN_PHASES.check(plan.status.phase if plan.status else None, status.phase)
        # The requests go before the status says so: a finished machine is done
        # by the world (release applied, no request), so a crash in between
        # repeats nothing, and a Completed plan never has a request left.
        for machine in sorted(finished):
            self.log.info("machine updated", kind="Machine", namespace=key.namespace,
                          name=machine, plan=name)
            await self.flow.finish(self._job(key, world, owner, target, machine))
        if status.phase == PlanPhase.COMPLETED:
            await world.inside.delete(CMRS, None, cmr_name(key.namespace, key.name))
        if not decide.same_status(plan.status, status):
            raw = dict(raw)
            raw["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
            written = await self.client.update_status(PLANS, raw)
            await self.recorder.record_all(written, plan_events(
                plan, status, cluster_lock_failed=lock_failed))
        if status.phase == PlanPhase.COMPLETED:
            self.log.info("update plan completed", kind="ClusterUpdatePlan",
                          namespace=key.namespace, name=name, target=target)
            return Done()
        waits = [p.requeue for p in advanced.values() if p.requeue is not None]
        return RequeueAfter(min([self.timings.active_requeue, *waits]) if not finished else 0.0)

    # --- hygiene -----------------------------------------------------------------

    async def _maybe_sweep(self) -> None:
        now = self.clock.now()
        if self._last_sweep is not None and now - self._last_sweep < self.timings.sweep_period:
            return
        self._last_sweep = now
        try:
            owners = {plan_owner(str(r["metadata"].get("namespace")), str(r["metadata"]["name"]))
                      for r in await self.client.list(PLANS)
                      if ((r.get("status") or {}).get("phase")) != "Completed"}
            owners |= {reboot_owner(str(r["metadata"].get("namespace")),
                                    str(r["metadata"]["name"]))
                       for r in await self.client.list(REBOOTS)}
            swept = await self.flow.sweep(owners)
        except Exception as exc:  # hygiene never fails a reconcile
            self.log.warning("maintenance sweep failed", error=str(exc))
            return
        if swept:
            self.log.info("maintenance sweep", actions=swept)


def _in_cluster(shared: Mapper, digest: Callable[[Mapping[str, Any]], Any] | None = None
                ) -> ClusterMapper:
    """Objects of a cluster's own API concern that Cluster; in the one API of
    a SharedPlane, ``shared`` finds it. ``digest``: only changes of it count."""
    def mapper(cluster: ObjectKey | None, _client: Client) -> Mapper:
        keys = shared if cluster is None else the_cluster(cluster)
        return on_change(digest, keys) if digest is not None else keys
    return mapper


def _backup_keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
    meta = obj.get("metadata") or {}
    cluster = (meta.get("labels") or {}).get(CLUSTER_LABEL)
    namespace = (meta.get("annotations") or {}).get(NAMESPACE_ANNOTATION)
    return [ObjectKey(str(namespace), str(cluster))] if cluster and namespace else []


def update_controller(
    api_client: Any,
    *,
    alert_source: AlertSource | None = None,
    workers: int = 1,
    clock: Clock | None = None,
    node_flow: NodeFlowFactory | None = None,
    node_maintenance: NodeFlow | None = None,
    namespace: str | None = None,
    logger: Any = None,
    timings: UpdateTimings | None = None,
    recorder: EventRecorder | None = None,
    backup_before_update: bool = False,
    plane: ClusterPlane | None = None,
) -> Controller:
    """The runtime Controller of cluster updates (see the module docstring).

    ``backup_before_update``: a plan's first step starts only once its
    pre-update ControlPlaneBackup completed (a backup controller must run).
    ``plane``: where each cluster's maintenance requests, workload locks,
    Nodes and pods are (None: the management API); a ``node_flow`` factory
    is called with it too.

    The node maintenance flow is injected, exactly one of: ``node_flow``, a
    factory called with ``api_client``, the controller's clock and
    ``timings.node_flow`` (the composition root passes ``NodeMaintenance``);
    or ``node_maintenance``, a ready flow (tests pass fakes).
    ``alert_source``: where UpdateAutoPause alerts are read (None: none fire);
    ``timings``: the waits (None: the defaults). ``recorder``: the process's
    EventRecorder (None: one of its own); the node flow takes its own from
    its factory (the composition root binds the same one).
    """
    clock = clock if clock is not None else SystemClock()
    timings = timings if timings is not None else UpdateTimings()
    if node_flow is not None and node_maintenance is None:
        flow = node_flow(api_client, clock=clock, timings=timings.node_flow, plane=plane)
    elif node_maintenance is not None and node_flow is None:
        flow = node_maintenance
    else:
        raise TypeError("update_controller: pass exactly one of node_flow (a factory) "
                        "and node_maintenance (a flow)")
    reconciler = UpdateReconciler(api_client, flow, alerts=alert_source, clock=clock,
                                  logger=logger, timings=timings, recorder=recorder,
                                  backup_before_update=backup_before_update, plane=plane)
    client = reconciler.client
    plane_ = reconciler.plane
    index = ClusterKeys(client, namespace)

    def source(res: Any, mapper: Any = None, *, scoped: bool = True) -> Any:
        if mapper is None:
            return client.source(res, namespace=namespace if scoped else None)
        return client.source(res, namespace=namespace if scoped else None, mapper=mapper)

    sources = [
        source(CLUSTERS),
        source(MACHINES, spec_cluster_keys("clusterName")),
        source(LCMMACHINES, on_change(lcm_change, spec_cluster_keys("clusterName"))),
        source(PLANS, spec_cluster_keys("cluster")),
        source(UPDATE_GROUPS, index.of_namespace),
        source(AUTOPAUSES, index.of_namespace),
        # Inside each cluster (its own API, or the one API of a SharedPlane):
        # a cluster's objects concern that cluster.
        plane_.source(NMRS, _in_cluster(index.of_node)),
        plane_.source(CLUSTER_LOCKS, _in_cluster(index.everything)),
        plane_.source(NODE_LOCKS, _in_cluster(index.of_node)),
        plane_.source(NODES, _in_cluster(index.of_node, _node_digest)),
        # The node flow's reads: a node's pods (a pod that goes wakes its
        # drain), the cluster's maintenance request, the hosts' reboot
        # annotation (read, not watched: the Node's new bootID wakes it).
        plane_.source(PODS, _in_cluster(index.of_node, _pod_digest)),
        plane_.source(CMRS, _in_cluster(index.of_node)),
        source(HOSTS, _no_keys),
        # a plan's pre-update backup: its cluster (label) and namespace (annotation)
        source(BACKUPS, _backup_keys, scoped=False),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)


__all__ = ["ClusterKeys", "UpdateReconciler", "update_controller"]
