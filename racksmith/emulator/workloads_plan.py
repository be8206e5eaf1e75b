"""The reference workload controller's decisions, as a pure function of the world.

Owns the rules of ``docs/design/maintenance-contracts.md`` ("The reference
workload controller"): where instances go, which node locks may be released
(``maxParallel``, one zone at a time), how a node is emptied (replacement
first, on a node out of maintenance, old pod deleted once the replacement is
Ready; a copy on another node in maintenance is no replacement, or two such
nodes would each delete theirs for the other's) and what each lock's status
says. :func:`plan` takes a :class:`World` (plain data read from the
API by :mod:`racksmith.emulator.workloads`) and returns the writes to make;
it never does I/O and may be called any number of times.

Restart safety: every fact the rules need is in the API. A node's migration
is "in progress" when a pod carries ``workloads.racksmith.io/migration:
<uid of the node's NodeMaintenanceRequest>`` (set on each replacement), so a
restarted controller resumes exactly where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

INSTANCE_LABEL = "workloads.racksmith.io/instance"
APP_LABEL = "app.kubernetes.io/name"
APP = "reference-workload"
PINNED_ANNOTATION = "workloads.racksmith.io/pinned"
MIGRATION_ANNOTATION = "workloads.racksmith.io/migration"
MIGRATED_FROM_ANNOTATION = "workloads.racksmith.io/migrated-from"
CONTROLLER_NAME = "reference"
LOCK_PREFIX = f"{CONTROLLER_NAME}."

DEFAULT_INSTANCES = 6
DEFAULT_MAX_PARALLEL = 2
DEFAULT_ZONE_KEY = "metal.racksmith.io/rack"


@dataclass(frozen=True)
class Config:
    """The ConfigMap ``racksmith-workloads/reference``, parsed."""

    instances: int = DEFAULT_INSTANCES
    max_parallel: int = DEFAULT_MAX_PARALLEL
    zone_key: str = DEFAULT_ZONE_KEY

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Config:
        """From ConfigMap ``data``; a missing or malformed value keeps its default."""
        data = data or {}

        def number(key: str, default: int, minimum: int) -> int:
            try:
                value = int(str(data.get(key, default)).strip())
            except ValueError:
                return default
            return value if value >= minimum else default

        zone_key = str(data.get("zoneKey") or "").strip() or DEFAULT_ZONE_KEY
        return cls(number("instances", DEFAULT_INSTANCES, 0),
                   number("maxParallel", DEFAULT_MAX_PARALLEL, 1), zone_key)

    def as_data(self) -> dict[str, str]:
        return {"instances": str(self.instances), "maxParallel": str(self.max_parallel),
                "zoneKey": self.zone_key}


@dataclass(frozen=True)
class NodeView:
    """What placement and admission need of a Node."""

    name: str
    schedulable: bool
    ready: bool
    zone: str


@dataclass(frozen=True)
class RequestView:
    """A NodeMaintenanceRequest (or the ClusterMaintenanceRequest: node "")."""

    name: str
    node: str
    uid: str
    release: str | None
    created: str = ""


@dataclass(frozen=True)
class PodView:
    """One instance pod (terminating pods are left out by the reader)."""

    name: str
    instance: str
    node: str
    ready: bool
    pinned: str | None = None
    migration: str | None = None
    created: str = ""


@dataclass(frozen=True)
class LockStatus:
    """The status a lock should show (the lock kinds' status fields)."""

    state: str = "active"
    error_message: str | None = None
    release: str | None = None
    progress: str | None = None
    percentage: int | None = None

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state}
        if self.error_message is not None:
            out["errorMessage"] = self.error_message
        if self.release is not None:
            out["release"] = self.release
        if self.progress is not None or self.percentage is not None:
            progress: dict[str, Any] = {}
            if self.progress is not None:
                progress["description"] = self.progress
            if self.percentage is not None:
                progress["percentage"] = self.percentage
            out["inactivationProgress"] = progress
        return out

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> LockStatus:
        status = status or {}
        progress = status.get("inactivationProgress") or {}
        pct = progress.get("percentage")
        return cls(str(status.get("state") or "active"), status.get("errorMessage"),
                   status.get("release"), progress.get("description"),
                   int(pct) if isinstance(pct, int) else None)


@dataclass(frozen=True)
class World:
    """Everything the rules read (see :mod:`racksmith.emulator.workloads`)."""

    config: Config
    nodes: tuple[NodeView, ...]
    requests: tuple[RequestView, ...]
    cluster_request: RequestView | None
    locks: Mapping[str, LockStatus]
    """Node lock statuses by node name (locks of this controller only)."""
    pods: tuple[PodView, ...]


@dataclass(frozen=True)
class CreatePod:
    instance: str
    node: str
    migration: str | None = None
    migrated_from: str | None = None


@dataclass
class Actions:
    """The writes :func:`plan` asks for."""

    create_locks: list[str] = field(default_factory=list)
    delete_locks: list[str] = field(default_factory=list)
    lock_status: dict[str, LockStatus] = field(default_factory=dict)
    cluster_lock: LockStatus = field(default_factory=LockStatus)
    create_pods: list[CreatePod] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    busy: bool = False
    """A migration is waiting for something (look again soon)."""


def lock_name(node: str) -> str:
    return f"{LOCK_PREFIX}{node}"


def instance_names(count: int) -> list[str]:
    return [f"instance-{i}" for i in range(count)]


def plan(world: World) -> Actions:
    """The writes that bring the world one step closer to the rules."""
    acts = Actions()
    nodes = {n.name: n for n in world.nodes}
    requests = {r.node: r for r in world.requests if r.node in nodes}
    pods = [p for p in world.pods if p.node in nodes]
    acts.delete_pods.extend(p.name for p in world.pods if p.node not in nodes)

    cmr = world.cluster_request
    acts.cluster_lock = (LockStatus("inactive", release=cmr.release) if cmr is not None
                         else LockStatus())

    hosting = {p.node for p in pods}
    wanted = {n.name for n in world.nodes if n.schedulable} | set(requests) | hosting
    acts.create_locks = sorted(n for n in wanted if n not in world.locks)
    acts.delete_locks = sorted(n for n in world.locks if n not in nodes)
    locks = {n: world.locks.get(n, LockStatus()) for n in nodes if n in wanted
             or n in world.locks}

    by_node: dict[str, list[PodView]] = {}
    by_instance: dict[str, list[PodView]] = {}
    for p in pods:
        by_node.setdefault(p.node, []).append(p)
        by_instance.setdefault(p.instance, []).append(p)
    load = {n.name: len(by_node.get(n.name, [])) for n in world.nodes}

    def targets(exclude: str) -> list[str]:
        return sorted((n.name for n in world.nodes
                       if n.schedulable and n.ready and n.name not in requests
                       and n.name != exclude), key=lambda n: (load[n], n))

    def in_progress(node: str) -> bool:
        uid = requests[node].uid
        return any(p.migration == uid for p in pods)

    # Nodes holding a slot: released, or being emptied, for their request.
    slots = {n for n, r in requests.items()
             if n in locks and (locks[n].state == "inactive" or in_progress(n))}
    desired: dict[str, LockStatus] = {}
    migrating: set[str] = set()
    for node in locks:
        if node not in requests:
            desired[node] = LockStatus()
    planned: dict[str, str] = {}   # instance -> node of the copy this plan creates
    order = sorted((r for r in requests.values() if r.node in locks),
                   key=lambda r: (r.node not in slots, r.created, r.node))
    for req in order:
        node, status = req.node, locks[req.node]
        if status.state == "inactive":
            desired[node] = status
            continue
        mine = sorted(by_node.get(node, []), key=lambda p: p.instance)
        pinned = [p for p in mine if p.pinned is not None]
        if node not in slots:
            why = _not_admitted(node, slots, nodes, world.config)
            if why is not None:
                desired[node] = LockStatus(progress=f"waiting: {why}", percentage=0)
                continue
            if pinned:
                desired[node] = _failed(pinned[0])
                continue
            slots.add(node)
        if pinned:
            desired[node] = _failed(pinned[0])
            continue
        done = sum(1 for p in pods if p.migration == req.uid and p.node != node)
        if not mine:
            desired[node] = LockStatus("inactive", release=req.release,
                                       progress=f"migrated {done} instance(s)", percentage=100)
            continue
        migrating.add(node)
        total = done + len(mine)
        waiting: list[str] = []
        for pod in mine:
            # Only a copy on a node that is not in maintenance itself counts
            # as the replacement: two nodes in maintenance each holding a copy
            # would otherwise each delete theirs for the other's, and the
            # instance would be gone (the PDB's count with it).
            others = [p for p in by_instance[pod.instance]
                      if p.node != node and p.node not in requests]
            if any(p.ready for p in others):
                acts.delete_pods.append(pod.name)
            elif others:
                waiting.append(f"{pod.instance} on {others[0].node}")
            elif pod.instance in planned:
                waiting.append(f"{pod.instance} on {planned[pod.instance]}")
            else:
                choices = targets(node)
                if not choices:
                    waiting.append(f"a node for {pod.instance}")
                    continue
                planned[pod.instance] = choices[0]
                acts.create_pods.append(CreatePod(pod.instance, choices[0], req.uid, node))
                load[choices[0]] += 1
                waiting.append(f"{pod.instance} on {choices[0]}")
        moved = total - len(mine)
        desired[node] = LockStatus(
            progress=f"migrating {len(mine)} of {total} instance(s)"
            + (f"; waiting for {', '.join(waiting)}" if waiting else ""),
            percentage=min(99, 100 * moved // total))
        acts.busy = True
    acts.lock_status = {n: s for n, s in desired.items() if world.locks.get(n) != s}

    _instances(world, acts, by_instance, requests, migrating, targets, load)
    return acts


def _failed(pod: PodView) -> LockStatus:
    return LockStatus("failed",
                      error_message=f"instance {pod.instance} cannot migrate: {pod.pinned}")


def _not_admitted(node: str, slots: Iterable[str], nodes: Mapping[str, NodeView],
                  config: Config) -> str | None:
    """Why ``node`` may not start releasing its lock now (None: it may)."""
    held = sorted(slots)
    if len(held) >= config.max_parallel:
        return f"{len(held)} of maxParallel {config.max_parallel} locks released"
    zone = nodes[node].zone
    other = [n for n in held if nodes[n].zone != zone]
    if other:
        return (f"nodes in another {config.zone_key} are in maintenance "
                f"({', '.join(other)})")
    return None


def _instances(world: World, acts: Actions, by_instance: Mapping[str, list[PodView]],
               requests: Mapping[str, RequestView], migrating: set[str],
               targets: Callable[[str], list[str]], load: dict[str, int]) -> None:
    """Create missing instances, drop surplus ones and stray duplicates."""
    names = instance_names(world.config.instances)
    deleting = set(acts.delete_pods)
    for instance, group in sorted(by_instance.items()):
        live = [p for p in group if p.name not in deleting]
        if instance not in names:
            acts.delete_pods.extend(p.name for p in live)
            continue
        if len(live) < 2 or any(p.node in migrating for p in live):
            continue
        # A duplicate no migration explains (e.g. its request was deleted
        # mid-way): keep the Ready one, then one off maintenance, then the newest.
        keep = max(live, key=lambda p: (p.ready, p.node not in requests, p.created, p.name))
        acts.delete_pods.extend(p.name for p in live if p is not keep)
    for instance in names:
        if by_instance.get(instance):
            continue
        choices = targets("")
        if not choices:
            acts.busy = True
            continue
        acts.create_pods.append(CreatePod(instance, choices[0]))
        load[choices[0]] += 1
