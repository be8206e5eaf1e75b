"""The node maintenance flow's executor: observe → decide → act, and hygiene.

Owns ``NodeMaintenance``: ``advance(job)`` reads the world of one node (the
Node, its NodeMaintenanceRequest, NodeWorkloadLocks and pods, the Machine,
LCMMachine and BareMetalHost), asks ``planners.maintenance.decide`` for the
next action, performs it, and decides again from a fresh read, until the
planner waits (at most ``MAX_ACTIONS`` writes per call) or the state table
(``planners.maintenance_states``) refuses the next state; ``finish(job)``
deletes the request; ``sweep`` cleans up after crashes and deleted owners.
Called by the LCM update controller and the graceful reboot controller
(``reboot``). Every method may be called any number of times: the flow's
memory is on the objects (see ``docs/design/maintenance-contracts.md``), so
a fresh instance resumes a flow started by another. How long it waits in
each state is ``MaintenanceTimings`` (given by the controller that runs it).
Each write is an Event about the Node (``events.action_events``, through
the runtime's ``EventRecorder``, component ``racksmith-maintenance``):
``Cordoned``, ``DrainStarted``, ``Evicted``/``EvictionRefused`` (the
drainer's), ``RebootRequested``, ``Uncordoned``.

It talks through the runtime ``Client`` (field manager
``racksmith-maintenance``) and watches nothing itself: the controllers that
run it watch what wakes them. Read from the shared informers where the
process has them (Nodes, NodeMaintenanceRequests, NodeWorkloadLocks by an
index on ``spec.nodeName``, Machines, LCMMachines, BareMetalHosts,
ClusterUpdatePlans, GracefulRebootRequests, pods by an index on
``spec.nodeName``; its own writes are in the cache at once). An eviction is
seen with the pod's watch event: until then a pod just evicted may be
evicted again, which the API answers as done (the drainer's Event count
grows by one). Written: the
NodeMaintenanceRequest (created, merge-patched annotations, deleted), the
Node (merge-patched cordon and annotations), the Machine's release
annotation, the BareMetalHost's reboot annotation, pod evictions. Merge
patches carry no precondition; a request created meanwhile by another
(``AlreadyExists``) is decided on again from a fresh read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.maintenance.drain import Drainer
from racksmith.controllers.maintenance.events import COMPONENT, action_events, node_ref
from racksmith.kinds.maintenance import NodeMaintenanceRequest
from racksmith.planners.maintenance import (
    BMH_REBOOT_ANNOTATION,
    CLUSTER_LABEL,
    CORDONED_BY,
    DRAIN_STARTED,
    MACHINE_LABEL,
    NAMESPACE_ANNOTATION,
    OWNER_LABEL,
    PLAN_OWNER_PREFIX,
    REBOOT_BOOT_ID,
    REBOOT_OWNER_PREFIX,
    REBOOT_REQUESTED,
    RELEASE_ANNOTATION,
    WAS_UNSCHEDULABLE,
    Action,
    Cordon,
    CreateRequest,
    Evict,
    LcmView,
    LockView,
    MaintenanceTimings,
    NodeJob,
    NodeObserved,
    NodeProgress,
    NodeView,
    RecordReboot,
    ReleaseReboot,
    RequestReboot,
    RequestView,
    SetRelease,
    StartDrain,
    Uncordon,
    decide,
    hashed_owner_prefix,
    parse_owner,
    plan_owner,
    reboot_owner,
    rfc3339,
)
from racksmith.planners.maintenance_states import NODE_FLOW
from racksmith.runtime.access import EVENTS, reads, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.informer import field_index, field_index_name
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.planes import ClusterPlane, ClusterUnavailable, SharedPlane
from racksmith.runtime.resources import (
    CLUSTERS,
    HOSTS,
    LCMMACHINES,
    MACHINES,
    NMRS,
    NODE_LOCKS,
    NODES,
    PDBS,
    PLANS,
    PODS,
    REBOOTS,
)
from racksmith.runtime.statetable import IllegalTransition

MAX_ACTIONS = 10
FIELD_MANAGER = "racksmith-maintenance"
ACCESS = (watches(NMRS, NODES, MACHINES, LCMMACHINES, HOSTS, NODE_LOCKS, PODS, PLANS, REBOOTS,
                  CLUSTERS)
          + reads(PDBS)
          + writes(NMRS, "create", "patch", "delete") + writes(NODES, "patch")
          + writes(MACHINES, "patch") + writes(HOSTS, "patch") + writes(NODE_LOCKS, "delete")
          + writes(PODS, "create", subresource="eviction") + EVENTS)
"""What the node maintenance flow (with its drainer) reads and writes: part of
the ClusterRole of every controller that runs it (update, graceful reboot)."""
NODE_NAME = "spec.nodeName"

OwnersAlive = Callable[[str], bool] | set[str] | frozenset[str]


class NodeMaintenance:
    """Runs the node maintenance flow (see the module docstring)."""

    def __init__(self, api_client: Any, *, clock: Clock | None = None,
                 logger: Any = None, timings: MaintenanceTimings | None = None,
                 recorder: EventRecorder | None = None,
                 plane: ClusterPlane | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timings = timings if timings is not None else MaintenanceTimings()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.drainer = Drainer(self.timings, self.recorder)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.maintenance")

    # --- the cluster's API ------------------------------------------------------------

    async def inside(self, job: NodeJob) -> Client:
        """The flow's Client inside ``job``'s cluster; raises
        ``ClusterUnavailable`` (an ``ApiError``: the caller retries) while it
        cannot be worked in."""
        key = ObjectKey(job.namespace, job.cluster)
        client = await self.plane.client(key)
        if client is None:
            raise ClusterUnavailable(key)
        return _indexed(client.with_field_manager(FIELD_MANAGER))

    # --- the flow -------------------------------------------------------------------

    async def advance(self, job: NodeJob) -> NodeProgress:
        """Walk the flow of ``job`` as far as it goes without waiting.

        Returns where it stopped; ``ReadyToFinish`` asks the caller to record
        the machine as done and call ``finish``. May be called any number of
        times. Raises ``ApiError`` on API errors (the caller retries).
        A decision that the write before it cannot lead to
        (``planners.maintenance_states.NODE_FLOW``) ends the walk unperformed:
        the state it was in is returned, the refusal in its message.
        """
        log = self.log.bind(kind="NodeMaintenanceRequest", name=job.node, owner=job.owner)
        progress: NodeProgress | None = None
        inside = await self.inside(job)
        for _ in range(MAX_ACTIONS):
            observed = await self.observe(job, inside=inside)
            decision = decide(observed)
            if isinstance(decision.action, StartDrain | Evict):
                # A workload controller may have created its lock a moment
                # ago (the cache can be behind): the step a lock must be
                # able to stop is decided again on a live read of the locks.
                observed = await self.observe(job, live_locks=True, inside=inside)
                decision = decide(observed)
            if progress is not None:
                refused = _refused(progress, decision.progress, self.timings)
                if refused is not None:
                    log.warning("node maintenance transition refused", state=str(progress.state),
                                next=str(decision.progress.state), message=refused.message)
                    return refused
            if decision.waits:
                self._log_state(log, progress, decision.progress)
                return decision.progress
            if progress is None or progress.state != decision.progress.state:
                log.info("node maintenance", state=str(decision.progress.state),
                         message=decision.progress.message)
            progress = decision.progress
            await self._act(inside, job, observed, decision.action, log)
        assert progress is not None
        return replace(progress, requeue=0.0)

    async def finish(self, job: NodeJob) -> None:
        """Delete the job's NodeMaintenanceRequest (only if it is the job owner's).

        Idempotent: a request already gone is fine.
        """
        inside = await self.inside(job)
        raw = await inside.get(NMRS, None, job.node)
        if raw is None or _labels(raw).get(OWNER_LABEL) != job.owner:
            return
        await inside.delete(NMRS, None, job.node)
        self.log.info("node maintenance finished", name=job.node, owner=job.owner)

    async def release(self, owner: str) -> list[str]:
        """End every maintenance of ``owner`` at once (the owner is gone): uncordon the
        nodes it cordoned and delete its requests. Idempotent."""
        done: list[str] = []
        for _cluster, client in await self.plane.clients():
            inside = _indexed(client.with_field_manager(FIELD_MANAGER))
            for raw in await inside.list(NMRS, labels={OWNER_LABEL: owner}):
                done.extend(await self._release_request(inside, raw))
        return done

    # --- observing --------------------------------------------------------------------

    async def observe(self, job: NodeJob, *, live_locks: bool = False,
                      inside: Client | None = None) -> NodeObserved:
        """One snapshot of everything ``decide`` looks at (``live_locks``: the
        NodeWorkloadLocks read from the API, not the cache): the node-side
        objects from the cluster's API (``inside``: its Client, read when
        not given), the Machine, LCMMachine and host from the management API."""
        now = self.clock.wall()
        if inside is None:
            inside = await self.inside(job)
        raw_node = await inside.get(NODES, None, job.node)
        node = node_view(raw_node) if raw_node is not None else None
        raw_req = await inside.get(NMRS, None, job.node)
        request = None
        if raw_req is not None:
            request = RequestView(_labels(raw_req).get(OWNER_LABEL), _annotations(raw_req))
        locks = tuple(lock_view(raw) for raw in await _locks(inside, job.node, live_locks))
        pods = self.drainer.views(job.node, await _pods(inside, job.node)) \
            if raw_node is not None else ()
        raw_machine = await self.client.get(MACHINES, job.namespace, job.machine)
        machine_release = _annotations(raw_machine).get(RELEASE_ANNOTATION) \
            if raw_machine else None
        host = (((raw_machine or {}).get("status") or {}).get("hostRef") or {}).get("name")
        raw_lcm = await self.client.get(LCMMACHINES, job.namespace, job.machine)
        bmh: str | None = None
        pending = False
        powered_on: bool | None = None
        if host:
            raw_bmh = await self.client.get(HOSTS, job.namespace, str(host))
            if raw_bmh is not None:
                bmh = str(host)
                pending = BMH_REBOOT_ANNOTATION in _annotations(raw_bmh)
                powered_on = bmh_powered_on(raw_bmh)
        return NodeObserved(
            job=job, now=now, node=node, request=request, locks=locks, pods=pods,
            machine_release=machine_release,
            lcm=lcm_view(raw_lcm) if raw_lcm is not None else None,
            bmh=bmh, bmh_reboot_pending=pending, bmh_powered_on=powered_on,
            timings=self.timings)

    # --- acting -------------------------------------------------------------------------

    async def _act(self, inside: Client, job: NodeJob, observed: NodeObserved,
                   action: Action, log: Any) -> None:
        now = observed.now
        match action:
            case CreateRequest(was_unschedulable=was):
                try:
                    await inside.create(NMRS, request_body(job, was))
                except AlreadyExists:
                    log.debug("a request for the node exists already, deciding again")
                    return
                log.info("maintenance requested", was_unschedulable=was)
            case Cordon(mark=mark):
                meta: dict[str, Any] = {"annotations": {CORDONED_BY: job.owner}} if mark else {}
                await _patch(inside, NODES, job.node, {"metadata": meta,
                                                       "spec": {"unschedulable": True}})
                log.info("node cordoned")
            case StartDrain(at=at):
                await _annotate_request(inside, job, {DRAIN_STARTED: rfc3339(at)})
            case Evict(pods=pods):
                for line in await self.drainer.evict(inside, job.node, pods, now,
                                                     self._recorder(inside)):
                    log.info(line)
            case SetRelease(release=release):
                await _patch(self.client, MACHINES, job.machine, {"metadata": {"annotations": {
                    RELEASE_ANNOTATION: release}}}, job.namespace)
                log.info("machine release set", release=release)
            case RecordReboot(boot_id=boot_id):
                await _annotate_request(inside, job, {REBOOT_BOOT_ID: boot_id,
                                                      REBOOT_REQUESTED: None})
                log.info("reboot recorded", boot_id=boot_id)
            case RequestReboot(bmh=bmh, at=at):
                # The request is written first: a crash in between is covered by the
                # repeat after ``timings.reboot_retry``.
                await _annotate_request(inside, job, {REBOOT_REQUESTED: rfc3339(at)})
                # The key names the flow; the value is Metal3's ("": hard).
                await _patch(self.client, HOSTS, bmh, {"metadata": {
                    "annotations": {BMH_REBOOT_ANNOTATION: ""}}}, job.namespace)
                log.info("reboot requested", bmh=bmh)
            case ReleaseReboot(bmh=bmh):
                await _patch(self.client, HOSTS, bmh, {"metadata": {
                    "annotations": {BMH_REBOOT_ANNOTATION: None}}}, job.namespace)
                log.info("reboot released: the host powers on", bmh=bmh)
            case Uncordon(keep_cordoned=keep):
                body: dict[str, Any] = {"metadata": {"annotations": {CORDONED_BY: None}}}
                if not keep:
                    body["spec"] = {"unschedulable": False}
                await _patch(inside, NODES, job.node, body)
                log.info("node uncordoned", kept_cordoned=keep)
            case _:
                raise AssertionError(f"unexpected action {action!r}")
        await self._recorder(inside).record_all(node_ref(job.node), action_events(job, action))

    def _recorder(self, inside: Client) -> EventRecorder:
        """The Events about a Node go to its cluster's API (with the flow's
        identity there), sharing the process's repeat cache."""
        return self.recorder.for_component(COMPONENT, client=inside)

    def _log_state(self, log: Any, before: NodeProgress | None, now: NodeProgress) -> None:
        if before is None or before.state != now.state:
            log.debug("node maintenance waits", state=str(now.state), message=now.message)

    # --- hygiene --------------------------------------------------------------------------

    async def sweep(self, owners_alive: OwnersAlive | None = None) -> list[str]:
        """Clean up after crashes and deleted owners; returns what it did.

        - requests whose node and machine are gone: deleted;
        - NodeWorkloadLocks whose node is gone: deleted;
        - requests whose owner is gone: the node uncordoned if it carries
          cordoned-by that owner, then the request deleted;
        - Nodes with a cordoned-by whose owner has no request on that node:
          uncordoned and the annotation removed.

        ``owners_alive`` tells whether an owner still exists (a predicate or a
        set); it must answer for every owner (``plan.*`` and ``reboot.*``).
        None: look the owner up (its ClusterUpdatePlan or GracefulRebootRequest
        exists). Idempotent.
        """
        alive = self._alive_predicate(owners_alive)
        done: list[str] = []
        for cluster, client in await self.plane.clients():
            done.extend(await self._sweep(cluster, _indexed(client.with_field_manager(
                FIELD_MANAGER)), alive))
        for line in done:
            self.log.info("maintenance sweep", action=line)
        return done

    async def _sweep(self, cluster: ObjectKey | None, inside: Client,
                     alive: Callable[[str], Any]) -> list[str]:
        """``sweep`` in one cluster's API (``cluster`` None: the one API of a
        SharedPlane)."""
        done: list[str] = []
        nodes = {str((n.get("metadata") or {}).get("name")): n
                 for n in await inside.list(NODES)}
        requests = await inside.list(NMRS)
        by_node: dict[str, str | None] = {}
        released: set[str] = set()
        for raw in requests:
            meta = raw.get("metadata") or {}
            name = str(meta.get("name"))
            node = str((raw.get("spec") or {}).get("nodeName") or name)
            owner = _labels(raw).get(OWNER_LABEL)
            machine = _labels(raw).get(MACHINE_LABEL) or node
            namespace = _annotations(raw).get(NAMESPACE_ANNOTATION)
            if node not in nodes:
                exists = namespace is not None and await self.client.get(
                    MACHINES, namespace, machine) is not None
                if not exists:
                    await inside.delete(NMRS, None, name)
                    done.append(f"deleted NodeMaintenanceRequest {name}: node and machine gone")
                    continue
            if owner is not None and not await alive(owner):
                done.extend(await self._release_request(inside, raw, nodes.get(node)))
                released.add(node)
                continue
            by_node[node] = owner
        for raw in await inside.list(NODE_LOCKS):
            node = str((raw.get("spec") or {}).get("nodeName") or "")
            if node and node not in nodes:
                name = str((raw.get("metadata") or {}).get("name"))
                await inside.delete(NODE_LOCKS, None, name)
                done.append(f"deleted NodeWorkloadLock {name}: node {node} gone")
        for name, raw_node in nodes.items():
            owner = _annotations(raw_node).get(CORDONED_BY)
            if owner is None or by_node.get(name) == owner or name in released:
                continue
            await _patch(inside, NODES, name, {"metadata": {"annotations": {CORDONED_BY: None}},
                                               "spec": {"unschedulable": False}})
            done.append(f"uncordoned Node {name}: left cordoned by {owner} without a request")
        if cluster is not None:
            done = [f"{line} (cluster {cluster})" for line in done]
        return done

    def _alive_predicate(self, owners_alive: OwnersAlive | None) -> Callable[[str], Any]:
        if owners_alive is None:
            return self.owner_exists
        if isinstance(owners_alive, set | frozenset):
            known = owners_alive

            async def in_set(owner: str) -> bool:
                return owner in known
            return in_set
        predicate = owners_alive

        async def call(owner: str) -> bool:
            return bool(predicate(owner))
        return call

    async def owner_exists(self, owner: str) -> bool:
        """The owner's ClusterUpdatePlan or GracefulRebootRequest exists (unknown kinds
        of owner are kept alive)."""
        parsed = parse_owner(owner)
        if parsed is None:
            hashed = hashed_owner_prefix(owner)
            if hashed == PLAN_OWNER_PREFIX:
                return any(plan_owner(str(p["metadata"].get("namespace")),
                                      str(p["metadata"]["name"])) == owner
                           for p in await self.client.list(PLANS, copy=False))
            if hashed == REBOOT_OWNER_PREFIX:
                return any(reboot_owner(str(r["metadata"].get("namespace")),
                                        str(r["metadata"]["name"])) == owner
                           for r in await self.client.list(REBOOTS, copy=False))
            return True
        prefix, namespace, name = parsed
        if prefix == PLAN_OWNER_PREFIX:
            return await self.client.get(PLANS, namespace, name) is not None
        if prefix == REBOOT_OWNER_PREFIX:
            return await self.client.get(REBOOTS, namespace, name) is not None
        return True

    async def _release_request(self, inside: Client, raw: dict[str, Any],
                               raw_node: dict[str, Any] | None = None) -> list[str]:
        done: list[str] = []
        name = str((raw.get("metadata") or {}).get("name"))
        node = str((raw.get("spec") or {}).get("nodeName") or name)
        owner = _labels(raw).get(OWNER_LABEL)
        if raw_node is None:
            raw_node = await inside.get(NODES, None, node)
        if raw_node is not None and owner and _annotations(raw_node).get(CORDONED_BY) == owner:
            body: dict[str, Any] = {"metadata": {"annotations": {CORDONED_BY: None}}}
            if _annotations(raw).get(WAS_UNSCHEDULABLE) != "true":
                body["spec"] = {"unschedulable": False}
            await _patch(inside, NODES, node, body)
            done.append(f"uncordoned Node {node}: owner {owner} gone")
        await inside.delete(NMRS, None, name)
        done.append(f"deleted NodeMaintenanceRequest {name}: owner {owner} gone")
        return done


def _indexed(client: Client) -> Client:
    """``client`` with the indexes the flow reads by (idempotent)."""
    client.add_index(NODE_LOCKS, field_index_name(NODE_NAME), field_index(NODE_NAME))
    client.add_index(PODS, field_index_name(NODE_NAME), field_index(NODE_NAME))
    return client


async def _locks(inside: Client, node: str, live: bool = False) -> list[dict[str, Any]]:
    items = await inside.list(NODE_LOCKS, fields={NODE_NAME: node}, live=live)
    return [i for i in items if (i.get("spec") or {}).get("nodeName") == node]


async def _pods(inside: Client, node: str) -> list[dict[str, Any]]:
    items = await inside.list(PODS, fields={NODE_NAME: node})
    return [p for p in items if (p.get("spec") or {}).get("nodeName") == node]


async def _annotate_request(inside: Client, job: NodeJob,
                            annotations: dict[str, str | None]) -> None:
    await _patch(inside, NMRS, job.node, {"metadata": {"annotations": annotations}})


async def _patch(client: Client, resource: Any, name: str, body: dict[str, Any],
                 namespace: str | None = None) -> bool:
    """Merge-patch (RFC 7386: ``None`` removes a key); False if the object is gone."""
    try:
        await client.patch(resource, namespace, name, body)
    except NotFound:
        return False
    return True


def _refused(before: NodeProgress, after: NodeProgress, timings: MaintenanceTimings
             ) -> NodeProgress | None:
    """``before`` with the refusal in its message when the state table refuses
    ``before`` → ``after`` within one walk; None when it allows it."""
    try:
        NODE_FLOW.check(before.state, after.state)
    except IllegalTransition as exc:
        return replace(before, message=f"{before.message} ({exc.message})",
                       requeue=timings.poll)
    return None


# --- views of raw objects -------------------------------------------------------------------


def _labels(raw: dict[str, Any] | None) -> dict[str, str]:
    return dict(((raw or {}).get("metadata") or {}).get("labels") or {})


def _annotations(raw: dict[str, Any] | None) -> dict[str, str]:
    return dict(((raw or {}).get("metadata") or {}).get("annotations") or {})


def node_view(raw: dict[str, Any]) -> NodeView:
    """The planner's view of a raw Node."""
    status = raw.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [] if isinstance(c, dict))
    boot_id = (status.get("nodeInfo") or {}).get("bootID") or None
    return NodeView(
        name=str((raw.get("metadata") or {}).get("name")), labels=_labels(raw),
        annotations=_annotations(raw),
        unschedulable=bool((raw.get("spec") or {}).get("unschedulable")),
        ready=ready, boot_id=str(boot_id) if boot_id else None)


def lock_view(raw: dict[str, Any]) -> LockView:
    """The planner's view of a raw NodeWorkloadLock."""
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    progress = status.get("inactivationProgress") or {}
    return LockView(
        name=str((raw.get("metadata") or {}).get("name")),
        controller=str(spec.get("controllerName") or ""),
        state=str(status.get("state") or "active"),
        error_message=status.get("errorMessage"),
        progress=progress.get("percentage"), description=progress.get("description"))


def lcm_view(raw: dict[str, Any]) -> LcmView:
    """The planner's view of a raw LCMMachine."""
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    error = next((f"{i.get('name')}: {i.get('error')}" for i in status.get("items") or []
                  if isinstance(i, dict) and i.get("state") == "Failed"), None)
    return LcmView(
        spec_release=str(spec.get("release") or ""),
        generation=(raw.get("metadata") or {}).get("generation"),
        phase=status.get("phase"), observed_generation=status.get("observedGeneration"),
        release=status.get("release"), reboot_required=bool(status.get("rebootRequired")),
        error=error)


def request_body(job: NodeJob, was_unschedulable: bool) -> dict[str, Any]:
    """The NodeMaintenanceRequest of ``job``."""
    annotations = {NAMESPACE_ANNOTATION: job.namespace}
    if was_unschedulable:
        annotations[WAS_UNSCHEDULABLE] = "true"
    spec: dict[str, Any] = {"nodeName": job.node, "scope": str(job.scope.value)}
    if job.release is not None:
        spec["release"] = job.release
    return {
        "apiVersion": NodeMaintenanceRequest.info.api_version,
        "kind": "NodeMaintenanceRequest",
        "metadata": {"name": job.node, "labels": {
            OWNER_LABEL: job.owner, CLUSTER_LABEL: job.cluster, MACHINE_LABEL: job.machine},
            "annotations": annotations},
        "spec": spec,
    }


__all__ = ["MAX_ACTIONS", "NodeMaintenance", "OwnersAlive", "request_body"]


def bmh_powered_on(bmh: Mapping[str, Any]) -> bool | None:
    """A BareMetalHost's ``status.poweredOn`` as the node flow reads it (None:
    not known). A host being serviced (new firmware settings) reboots on its
    own: it does not count as off for this reboot until servicing is over."""
    status = bmh.get("status") or {}
    powered = status.get("poweredOn")
    if (status.get("provisioning") or {}).get("state") == "servicing":
        return None
    return powered if isinstance(powered, bool) else None
