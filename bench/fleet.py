"""An emulated fleet for the update benchmark: one cluster's objects and everything
around the LCM update controller, played with fake provisioning.

Owns, for ``bench/update.py``:

* ``FleetSpec`` and the fleet's objects: ClusterReleases ``r1`` and ``r2``
  (one state item with ``requiresReboot``), Cluster ``fleet`` (release r1,
  ``spec.update`` autoCommence and nodeDurationSeconds = apply + reboot),
  UpdateGroups ``fleet-workers-a`` / ``-b`` (index 1 and 2, concurrency C),
  N Machines (3 master+etcd, the rest workers alternating between the two
  groups, 20 per rack label) with status (Ready, release r1, hostRef,
  nodeRef), their LCMMachines (spec and status at r1, Ready,
  observedGeneration), BareMetalHosts ``host-<node>`` (no Ironic) and Nodes
  (Ready, a bootID);
* ``update_inputs``: the same fleet as the update planner's inputs, for the
  lower bound (per-node duration = apply + reboot seconds);
* ``Simulator``: list+watch of Machines, BareMetalHosts,
  NodeMaintenanceRequests and ClusterUpdatePlans, playing
  - the Machine controller's release pin: Machine annotation
    ``lcm.racksmith.io/release`` → LCMMachine ``spec.release``;
  - the host agent: status Deploying at once, then after ``apply_seconds``
    Ready / release / observedGeneration / ``rebootRequired: true`` (and the
    Machine's ``status.release``, as the Machine controller mirrors it);
    a heartbeat every ``agent_seconds``;
  - the BareMetalHost controller and the OS boot: Metal3's keyed reboot
    annotation ``reboot.metal3.io/<key>`` → the BMH's ``status.poweredOn``
    false; once the key is removed (by the update controller), after
    ``reboot_seconds`` the Node gets a new ``bootID``, the BMH
    ``poweredOn: true`` and the LCMMachine ``rebootRequired: false``;
  - emulated kubelets: Node status (Ready, heartbeat times) every
    ``kubelet_seconds`` (as ``racksmith agent --emulated`` does), silent
    while the node reboots;
  and recording when each NodeMaintenanceRequest appeared and went, and the
  plan's phases;
* ``ControllerProcess``: the update controller alone in its own process
  (``python bench/fleet.py controller ...``, this file's ``__main__``), so
  its CPU is read from ``/proc``; in the child every HTTP request of its
  aiohttp sessions is counted (verb and resource, and by API) and the counts are written
  to a JSON file on SIGUSR1.

Two topologies (``bench/update.py --one-api``): by default the cluster serves
its own API, as every cluster of ``racksmith up`` does: its Nodes, its
NodeMaintenanceRequests, ClusterMaintenanceRequests and workload locks are
there (``CLUSTER_SIDE``), and the update controller reaches them through a
``RemotePlane`` (its identity ``update``, the Secret
``<cluster>-racksmith-update`` and ``Cluster.status.controlPlaneEndpoint`` in
the management API, as the Cluster controller writes them); everything else
is in the management API. With one API, all of it is in one.

Only 127.0.0.1 is contacted. The child dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import random
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from racksmith.kinds.cluster import Role
from racksmith.planners.update import GroupPolicy, UpdateInputs, UpdateMachine

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]

CLUSTER_API = "cluster.racksmith.io/v1alpha1"
LCM_API = "lcm.racksmith.io/v1alpha1"
METAL_API = "metal3.io/v1alpha1"
RELEASE_ANNOTATION = "lcm.racksmith.io/release"
GROUP_LABEL = "lcm.racksmith.io/update-group"
CLUSTER_LABEL = "cluster.racksmith.io/cluster"
MACHINE_LABEL = "cluster.racksmith.io/machine"
RACK_LABEL = "metal.racksmith.io/rack"
REBOOT_ANNOTATION = "reboot.metal3.io"
NODES_PER_RACK = 20
CREATE_CONCURRENCY = 16
REQUEST_TIMEOUT = 60.0
CLUSTER_SIDE = frozenset({"nodes", "nmrs", "cmrs"})
"""The ``paths`` that are inside the cluster's own API (module doc)."""


def rfc3339(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


# --------------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class FleetSpec:
    nodes: int
    concurrency: int
    apply_seconds: float
    reboot_seconds: float
    kubelet_seconds: float = 10.0
    agent_seconds: float = 20.0
    masters: int = 3
    namespace: str = "default"
    cluster: str = "fleet"
    source: str = "r1"
    target: str = "r2"

    @property
    def groups(self) -> tuple[str, str]:
        return (f"{self.cluster}-workers-a", f"{self.cluster}-workers-b")

    @property
    def control_group(self) -> str:
        return f"{self.cluster}-control"

    @property
    def node_seconds(self) -> float:
        """The ideal time of one node's maintenance: the agent's apply and the reboot."""
        return self.apply_seconds + self.reboot_seconds

    def names(self) -> list[str]:
        return [f"n-{i:04d}" for i in range(self.nodes)]

    def is_master(self, i: int) -> bool:
        return i < self.masters

    def group_of(self, i: int) -> str:
        return self.control_group if self.is_master(i) else self.groups[(i - self.masters) % 2]

    def roles(self, i: int) -> list[str]:
        return ["master", "etcd"] if self.is_master(i) else ["node"]

    def rack(self, i: int) -> str:
        return f"rack-{i // NODES_PER_RACK:02d}"


def host_name(node: str) -> str:
    return f"host-{node}"


def update_inputs(spec: FleetSpec) -> UpdateInputs:
    """The fleet as the update planner sees it (every machine needs a reboot)."""
    machines = tuple(
        UpdateMachine(name=name, group=spec.group_of(i),
                      roles=frozenset(Role(r) for r in spec.roles(i)),
                      labels={RACK_LABEL: spec.rack(i)}, requires_reboot=True)
        for i, name in enumerate(spec.names()))
    groups = (GroupPolicy(spec.control_group, 0, 1),
              GroupPolicy(f"{spec.cluster}-default", 1, spec.concurrency),
              GroupPolicy(spec.groups[0], 1, spec.concurrency),
              GroupPolicy(spec.groups[1], 2, spec.concurrency))
    return UpdateInputs(machines=machines, groups=groups, default_duration=spec.node_seconds)


def paths(spec: FleetSpec) -> dict[str, str]:
    ns = spec.namespace
    return {
        "releases": f"/apis/{CLUSTER_API}/clusterreleases",
        "clusters": f"/apis/{CLUSTER_API}/namespaces/{ns}/clusters",
        "machines": f"/apis/{CLUSTER_API}/namespaces/{ns}/machines",
        "lcmmachines": f"/apis/{LCM_API}/namespaces/{ns}/lcmmachines",
        "updategroups": f"/apis/{LCM_API}/namespaces/{ns}/updategroups",
        "plans": f"/apis/{LCM_API}/namespaces/{ns}/clusterupdateplans",
        "hosts": f"/apis/{METAL_API}/namespaces/{ns}/baremetalhosts",
        "nmrs": f"/apis/{LCM_API}/nodemaintenancerequests",
        "cmrs": f"/apis/{LCM_API}/clustermaintenancerequests",
        "nodes": "/api/v1/nodes",
    }


def release(name: str, version: str) -> Obj:
    return {"apiVersion": CLUSTER_API, "kind": "ClusterRelease", "metadata": {"name": name},
            "spec": {"version": version, "kubernetesVersion": "1.30.0",
                     "stateItems": [{"name": "kernel", "phase": "configuration",
                                     "type": "package", "requiresReboot": True,
                                     "params": {"name": "linux-image", "version": version}}]}}


def node_status(node: str, boot_id: str, now: float) -> Obj:
    beat = rfc3339(now)
    return {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status (emulated)",
                            "lastHeartbeatTime": beat, "lastTransitionTime": beat}],
            "addresses": [{"type": "Hostname", "address": node}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                         "osImage": "Racksmith emulated OS", "kernelVersion": "emulated",
                         "containerRuntimeVersion": "emulated://0",
                         "kubeletVersion": "v1.30.0", "kubeProxyVersion": "v1.30.0",
                         "machineID": node, "systemUUID": node, "bootID": boot_id}}


# --------------------------------------------------------------------------- API client


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


class Kube:
    """A pooled HTTPS client with an admin token; counts its own requests."""

    def __init__(self, url: str, token: str, ca_path: Path, pool: int = 32) -> None:
        ctx = ssl.create_default_context(cafile=str(ca_path))
        connector = aiohttp.TCPConnector(ssl=ctx, limit=pool, limit_per_host=pool,
                                         keepalive_timeout=120)
        self.session = aiohttp.ClientSession(
            base_url=url, connector=connector,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "racksmith-bench-fleet"})
        self.requests = 0

    async def close(self) -> None:
        await self.session.close()

    async def call(self, method: str, path: str, body: Obj | None = None,
                   content_type: str = "application/json", ok: Iterable[int] = (200, 201),
                   params: dict[str, str] | None = None) -> Obj:
        self.requests += 1
        data = orjson.dumps(body) if body is not None else None
        async with self.session.request(
                method, path, data=data, params=params,
                headers={"Content-Type": content_type, "Accept": "application/json"},
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)) as r:
            raw = await r.read()
            if r.status not in tuple(ok):
                raise ApiError(r.status, raw.decode(errors="replace"))
            return orjson.loads(raw) if raw else {}

    async def create(self, path: str, obj: Obj) -> Obj:
        return await self.call("POST", path, obj)

    async def merge(self, path: str, patch: Obj) -> Obj:
        return await self.call("PATCH", path, patch, "application/merge-patch+json")

    async def get(self, path: str) -> Obj:
        return await self.call("GET", path)

    async def watch(self, path: str, rv: str) -> aiohttp.ClientResponse:
        self.requests += 1
        resp = await self.session.get(
            path, params={"watch": "true", "allowWatchBookmarks": "true",
                          "timeoutSeconds": "300", "resourceVersion": rv},
            timeout=aiohttp.ClientTimeout(total=None, connect=10, sock_read=330))
        if resp.status != 200:
            text = (await resp.read()).decode(errors="replace")
            resp.release()
            raise ApiError(resp.status, text)
        return resp


async def gather_limited(n: int, items: Iterable[Awaitable[Any]]) -> list[Any]:
    sem = asyncio.Semaphore(n)

    async def one(aw: Awaitable[Any]) -> Any:
        async with sem:
            return await aw

    return list(await asyncio.gather(*(one(a) for a in items)))


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    buf = bytearray()
    while chunk := await content.readany():
        buf.extend(chunk)
        while (i := buf.find(b"\n")) >= 0:
            line = bytes(buf[:i]).strip()
            del buf[: i + 1]
            if line:
                yield line


Handler = Callable[[str, Obj], None]


async def list_watch(kube: Kube, path: str, handler: Handler, listed: asyncio.Event) -> None:
    """List ``path`` (each item as ``ADDED``), then watch it from there, forever."""
    rv = ""
    while True:
        try:
            if not rv:
                body = await kube.get(path)
                for obj in body.get("items") or []:
                    handler("ADDED", obj)
                rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
                listed.set()
            resp = await kube.watch(path, rv)
            try:
                async for line in _lines(resp.content):
                    event = orjson.loads(line)
                    obj = event.get("object") or {}
                    kind = event.get("type")
                    if kind == "ERROR":
                        rv = ""  # 410 Gone or another error: list again
                        break
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        handler(kind, obj)
            finally:
                resp.close()
        except (aiohttp.ClientError, TimeoutError, ApiError):
            await asyncio.sleep(1.0)


# --------------------------------------------------------------------------- seeding


async def seed(kube: Kube, spec: FleetSpec, inside: Kube | None = None) -> None:
    """Create the fleet's objects (see the module doc), all at ``spec.source``;
    the Nodes in ``inside``, the cluster's own API (None: ``kube``)."""
    p = paths(spec)
    node_api = inside if inside is not None else kube
    ns = spec.namespace
    for name, version in ((spec.source, "1.0.0"), (spec.target, "1.1.0")):
        await kube.create(p["releases"], release(name, version))
    await kube.create(p["clusters"], {
        "apiVersion": CLUSTER_API, "kind": "Cluster",
        "metadata": {"name": spec.cluster, "namespace": ns},
        "spec": {"release": spec.source, "maxWorkerUpgradeCount": spec.concurrency,
                 "update": {"autoCommence": True,
                            "nodeDurationSeconds": max(1, round(spec.node_seconds))}}})
    for index, group in enumerate(spec.groups, start=1):
        await kube.create(p["updategroups"], {
            "apiVersion": LCM_API, "kind": "UpdateGroup",
            "metadata": {"name": group, "namespace": ns,
                         "labels": {CLUSTER_LABEL: spec.cluster}},
            "spec": {"index": index, "concurrentUpdates": spec.concurrency,
                     "rebootIfUpdateRequires": True}})
    now = time.time()

    async def one(i: int, node: str) -> None:
        host = host_name(node)
        await kube.create(p["hosts"], {
            "apiVersion": METAL_API, "kind": "BareMetalHost",
            "metadata": {"name": host, "namespace": ns, "labels": {RACK_LABEL: spec.rack(i)}},
            "spec": {"online": True, "externallyProvisioned": True,
                     "consumerRef": {"apiVersion": CLUSTER_API, "kind": "Machine",
                                     "name": node, "namespace": ns}}})
        labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                  RACK_LABEL: spec.rack(i)}
        if spec.is_master(i):
            labels["node-role.kubernetes.io/control-plane"] = ""
        await node_api.create(p["nodes"], {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": node, "labels": labels}})
        await node_api.merge(f"{p['nodes']}/{node}/status",
                             {"status": node_status(node, first_boot_id(node), now)})
        mlabels = {CLUSTER_LABEL: spec.cluster, RACK_LABEL: spec.rack(i)}
        if not spec.is_master(i):
            mlabels[GROUP_LABEL] = spec.group_of(i)
        await kube.create(p["machines"], {
            "apiVersion": CLUSTER_API, "kind": "Machine",
            "metadata": {"name": node, "namespace": ns, "labels": mlabels},
            "spec": {"clusterName": spec.cluster, "roles": spec.roles(i)}})
        await kube.merge(f"{p['machines']}/{node}/status", {"status": {
            "phase": "Ready", "release": spec.source,
            "hostRef": {"apiVersion": METAL_API, "kind": "BareMetalHost", "name": host,
                        "namespace": ns},
            "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": node},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                            "lastTransitionTime": rfc3339(now)}]}})
        lcm = await kube.create(p["lcmmachines"], {
            "apiVersion": LCM_API, "kind": "LCMMachine",
            "metadata": {"name": node, "namespace": ns,
                         "labels": {MACHINE_LABEL: node, CLUSTER_LABEL: spec.cluster}},
            "spec": {"machineRef": {"name": node}, "clusterName": spec.cluster,
                     "release": spec.source, "stateItems": []}})
        await kube.merge(f"{p['lcmmachines']}/{node}/status", {"status": {
            "phase": "Ready", "release": spec.source, "rebootRequired": False,
            "observedGeneration": lcm["metadata"].get("generation", 1),
            "heartbeat": rfc3339(now), "agentVersion": "bench-fleet"}})

    await gather_limited(CREATE_CONCURRENCY, (one(i, n) for i, n in enumerate(spec.names())))


# --------------------------------------------------------------------------- the simulator


def first_boot_id(node: str) -> str:
    """The bootID a node is seeded with and that its kubelet keeps posting until
    its first reboot (one value for both: a kubelet posting another bootID than
    the seeded one is a reboot to the update controller, so every node of an
    idle fleet looked rebooted once — measured as idle CPU before 2026-12-03)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node}.first-boot.bench"))


@dataclass
class NodeState:
    boot_id: str
    lcm_release: str = ""
    applying: str = ""
    rebooting: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the held reboot's keys are gone from the BMH."""
    host_rv: int = 0
    """resourceVersion of our last write to the BMH: older events are stale."""


@dataclass
class Simulator:
    """Plays everything but the update controller (module doc); records timings."""

    kube: Kube
    spec: FleetSpec
    inside: Kube | None = None
    """The cluster's own API (``CLUSTER_SIDE``); None: ``kube``."""
    nodes: dict[str, NodeState] = field(default_factory=dict)
    nmr_start: dict[str, float] = field(default_factory=dict)
    nmr_end: dict[str, float] = field(default_factory=dict)
    nmr_repeats: int = 0
    apply_start: dict[str, float] = field(default_factory=dict)
    applied: dict[str, float] = field(default_factory=dict)
    reboot_start: dict[str, float] = field(default_factory=dict)
    reboot_end: dict[str, float] = field(default_factory=dict)
    reboots: Counter[str] = field(default_factory=Counter)
    plan_seen: dict[str, float] = field(default_factory=dict)
    plan_phases: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    max_in_flight: Counter[str] = field(default_factory=Counter)
    completed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.p = paths(self.spec)
        self.names = self.spec.names()
        self.group = {n: self.spec.group_of(i) for i, n in enumerate(self.names)}
        for n in self.names:
            self.nodes[n] = NodeState(first_boot_id(n), lcm_release=self.spec.source)
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: Counter[str] = Counter()
        self._live: set[str] = set()

    # --- plumbing

    def api(self, what: str) -> Kube:
        """Where ``paths()[what]`` is served (module doc)."""
        return self.inside if self.inside is not None and what in CLUSTER_SIDE else self.kube

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(self._guard(coro, name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guard(self, coro: Awaitable[None], name: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if len(self.errors) < 50:
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")

    async def run(self) -> None:
        """The watches and the kubelets; until cancelled."""
        watches = [("machines", self._on_machine), ("hosts", self._on_host),
                   ("nmrs", self._on_nmr), ("plans", self._on_plan)]
        listed = [asyncio.Event() for _ in watches]
        tasks = [asyncio.create_task(list_watch(self.api(k), self.p[k], h, ev),
                                     name=f"watch-{k}")
                 for (k, h), ev in zip(watches, listed, strict=True)]
        tasks.append(asyncio.create_task(self._kubelets(), name="kubelets"))
        tasks.append(asyncio.create_task(self._agents(), name="agents"))
        self.listed = listed
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in [*tasks, *self._tasks]:
                t.cancel()
            await asyncio.gather(*tasks, *self._tasks, return_exceptions=True)

    async def wait_listed(self, timeout: float) -> None:
        for _ in range(int(timeout * 10)):
            if hasattr(self, "listed") and all(e.is_set() for e in self.listed):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("the simulator's watches did not list in time")

    # --- Machine controller (release pin) and host agent

    def _on_machine(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        st = self.nodes.get(name)
        if st is None or kind == "DELETED":
            return
        want = ((obj["metadata"].get("annotations") or {}).get(RELEASE_ANNOTATION))
        if want and want != st.lcm_release and want != st.applying:
            st.applying = want
            self._spawn(self._apply(name, want), f"apply {name}")

    async def _apply(self, name: str, rel: str) -> None:
        st = self.nodes[name]
        self.apply_start.setdefault(name, time.perf_counter())
        lcm = await self.kube.merge(f"{self.p['lcmmachines']}/{name}", {"spec": {"release": rel}})
        gen = lcm["metadata"].get("generation", 1)
        st.lcm_release = rel
        await self.kube.merge(f"{self.p['lcmmachines']}/{name}/status", {"status": {
            "phase": "Deploying", "observedGeneration": gen, "heartbeat": rfc3339()}})
        await asyncio.sleep(self.spec.apply_seconds)
        await self.kube.merge(f"{self.p['lcmmachines']}/{name}/status", {"status": {
            "phase": "Ready", "release": rel, "observedGeneration": gen,
            "rebootRequired": True, "heartbeat": rfc3339()}})
        self.applied[name] = time.perf_counter()
        st.applying = ""
        await self.kube.merge(f"{self.p['machines']}/{name}/status", {"status": {"release": rel}})

    async def _agents(self) -> None:
        """LCMMachine heartbeats, spread evenly over ``agent_seconds``."""
        await self._spread(self.spec.agent_seconds, lambda n: self.kube.merge(
            f"{self.p['lcmmachines']}/{n}/status", {"status": {"heartbeat": rfc3339()}}))

    # --- BareMetalHost controller, OS boot, kubelet

    def _on_host(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        node = name.removeprefix("host-")
        st = self.nodes.get(node)
        if st is None or kind == "DELETED":
            return
        with contextlib.suppress(ValueError):
            if int(obj["metadata"].get("resourceVersion") or 0) <= st.host_rv:
                return
        keys = [k for k in (obj["metadata"].get("annotations") or {})
                if k.startswith(REBOOT_ANNOTATION + "/")]
        if st.rebooting:
            if not keys:
                st.released.set()
            return
        if keys:
            st.rebooting = True
            st.released = asyncio.Event()
            self._spawn(self._reboot(node, name), f"reboot {node}")

    async def _power(self, node: str, host: str, on: bool) -> None:
        bmh = await self.kube.merge(f"{self.p['hosts']}/{host}/status",
                                    {"status": {"poweredOn": on}})
        with contextlib.suppress(ValueError):
            self.nodes[node].host_rv = int(bmh["metadata"].get("resourceVersion") or 0)

    async def _reboot(self, node: str, host: str) -> None:
        """Off and held off by the keyed annotation; on again once it is gone."""
        st = self.nodes[node]
        self.reboot_start[node] = time.perf_counter()
        self.reboots[node] += 1
        try:
            await self._power(node, host, False)
            await st.released.wait()
            await asyncio.sleep(self.spec.reboot_seconds)
            st.boot_id = str(uuid.uuid4())
            await self._power(node, host, True)
            await self.api("nodes").merge(f"{self.p['nodes']}/{node}/status",
                                          {"status": node_status(node, st.boot_id, time.time())})
            await self.kube.merge(f"{self.p['lcmmachines']}/{node}/status", {"status": {
                "rebootRequired": False, "heartbeat": rfc3339()}})
            self.reboot_end[node] = time.perf_counter()
        finally:
            st.rebooting = False

    async def _kubelets(self) -> None:
        """Node status posts, spread evenly over ``kubelet_seconds``; none while rebooting."""
        async def post(n: str) -> None:
            st = self.nodes[n]
            if not st.rebooting:
                await self.api("nodes").merge(
                    f"{self.p['nodes']}/{n}/status",
                    {"status": node_status(n, st.boot_id, time.time())})
        await self._spread(self.spec.kubelet_seconds, post)

    async def _spread(self, period: float, op: Callable[[str], Awaitable[Any]]) -> None:
        if period <= 0:
            return
        names = list(self.names)
        random.Random(len(names)).shuffle(names)
        step = period / len(names)
        sem = asyncio.Semaphore(8)
        t = time.perf_counter()

        async def one(n: str) -> None:
            async with sem:
                await op(n)

        while True:
            for n in names:
                t += step
                delay = t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if sem.locked():
                    continue  # the API server is behind: skip this beat
                self._spawn(one(n), f"heartbeat {n}")

    # --- what the update controller does

    def _on_nmr(self, kind: str, obj: Obj) -> None:
        node = ((obj.get("spec") or {}).get("nodeName")) or obj["metadata"]["name"]
        if node not in self.nodes:
            return
        now = time.perf_counter()
        group = self.group[node]
        if kind in ("ADDED", "MODIFIED") and node not in self._live:  # MODIFIED: after a re-list
            self._live.add(node)
            if node in self.nmr_start:
                self.nmr_repeats += 1
            else:
                self.nmr_start[node] = now
            self._in_flight[group] += 1
            self.max_in_flight[group] = max(self.max_in_flight[group], self._in_flight[group])
        elif kind == "DELETED" and node in self._live:
            self._live.discard(node)
            self.nmr_end[node] = now
            self._in_flight[group] -= 1

    def _on_plan(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            return
        name = obj["metadata"]["name"]
        now = time.perf_counter()
        self.plan_seen.setdefault(name, now)
        phase = str((obj.get("status") or {}).get("phase") or "")
        history = self.plan_phases.setdefault(name, [])
        if not history or history[-1][1] != phase:
            history.append((now, phase))
        if (obj.get("spec") or {}).get("target") == self.spec.target and phase == "Completed":
            self.completed.set()


# --------------------------------------------------------------------------- the controller process


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class ControllerProcess:
    """``python bench/fleet.py controller``: the update controller alone, in its own process."""

    proc: subprocess.Popen[bytes]
    stats_path: Path
    log_path: Path
    _seq: int = 0

    @classmethod
    def start(cls, kubeconfig: Path, workdir: Path, workers: int,
              cluster_api: bool = False) -> ControllerProcess:
        stats, log = workdir / "controller-stats.json", workdir / "controller.log"
        args = [sys.executable, str(Path(__file__).resolve()), "controller",
                "--kubeconfig", str(kubeconfig), "--stats", str(stats),
                "--workers", str(workers), *(["--cluster-api"] if cluster_api else [])]
        with log.open("wb") as fh:
            proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                    preexec_fn=_die_with_parent)
        return cls(proc, stats, log)

    def cpu_seconds(self) -> float:
        """utime + stime of the controller process (Linux ``/proc``)."""
        try:
            rest = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")

    def _read(self) -> Obj:
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(self.stats_path.read_text()))
        return {}

    async def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"update controller exited with {self.proc.returncode}:\n"
                                   f"{self.log()[-3000:]}")
            if self._read().get("ready"):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"update controller not ready in {timeout:.0f} s:\n{self.log()[-3000:]}")

    async def snapshot(self, timeout: float = 10.0) -> Obj:
        """The child's request counts now (it writes them on SIGUSR1)."""
        self._seq += 1
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = self._read()
            if stats.get("seq", 0) >= self._seq:
                return stats
            await asyncio.sleep(0.05)
        raise TimeoutError("the update controller did not write its request counts")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def classify(method: str, resource_path: str, path_params: Any, query_params: Any) -> str:
    """``VERB resource[/subresource]`` of one API request (LIST, WATCH, GET, CREATE, ...)."""
    path = resource_path.split("?", 1)[0]
    for k, v in dict(path_params or {}).items():
        path = path.replace("{" + str(k) + "}", str(v))
    segs = [s for s in path.split("/") if s]
    rest = segs[2:] if segs[:1] == ["api"] else segs[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    query = dict(query_params or {}) if not isinstance(query_params, list) else dict(
        (str(k), v) for k, v in query_params)
    resource = rest[0] if rest else "?"
    verb = {"POST": "CREATE", "PUT": "UPDATE"}.get(method.upper(), method.upper())
    if verb == "GET":
        watch = str(query.get("watch", "")).lower() in ("true", "1")
        verb = "WATCH" if watch else ("LIST" if len(rest) == 1 else "GET")
    if len(rest) >= 3:
        resource += "/" + rest[2]
    return f"{verb} {resource}"


def install_call_counter() -> tuple[Counter[str], Counter[str]]:
    """Count every HTTP request of this process's aiohttp sessions, by
    ``classify`` and by API (``host:port``).

    At the session, not ``ApiClient.call_api``: the runtime Client sends its
    requests straight onto the ApiClient's session (``Client._exchange``)."""
    import aiohttp
    from yarl import URL

    counts: Counter[str] = Counter()
    apis: Counter[str] = Counter()
    original = aiohttp.ClientSession._request

    def request(self: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):
            url = URL(str(str_or_url))
            query = dict(url.query)
            query.update({str(k): v for k, v in dict(kwargs.get("params") or {}).items()})
            counts[classify(method, url.path, None, query)] += 1
            apis[f"{url.host}:{url.port}"] += 1
        return original(self, method, str_or_url, *args, **kwargs)

    aiohttp.ClientSession._request = request  # type: ignore[method-assign]
    return counts, apis


async def controller_main(kubeconfig: Path, stats: Path, workers: int,
                          cluster_api: bool = False) -> None:
    """The child: the update controller under a Manager, counts written on
    SIGUSR1. ``cluster_api``: it reaches the cluster's own API as
    ``racksmith up`` wires it (a RemotePlane of identity ``update``)."""
    counts, apis = install_call_counter()
    from racksmith.app.clusterplanes import planes
    from racksmith.app.logs import configure_logging
    from racksmith.controllers.maintenance import NodeMaintenance
    from racksmith.controllers.update import update_controller
    from racksmith.runtime.client import as_client
    from racksmith.runtime.clusters import ClusterClients
    from racksmith.runtime.kubeclient import api_client_from_kubeconfig
    from racksmith.runtime.manager import Manager
    from racksmith.runtime.planes import ClusterPlane

    configure_logging("warning")
    client = await api_client_from_kubeconfig(kubeconfig)
    tracker = ClusterClients(stats.parent / "clusters") if cluster_api else None
    plane: ClusterPlane | None = None
    if tracker is not None:
        plane = planes(lambda _n: as_client(client), ["update"], tracker, None)["update"]
    manager = Manager(client, [update_controller(client, workers=workers,
                                                    node_flow=NodeMaintenance, plane=plane)])
    loop = asyncio.get_running_loop()
    seq = 0
    ready = False

    def write() -> None:
        tmp = stats.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": seq, "ready": ready, "pid": os.getpid(),
                                   "cpu_s": time.process_time(), "calls": dict(counts),
                                   "apis": dict(apis)}))
        tmp.replace(stats)

    def on_usr1() -> None:
        nonlocal seq
        seq += 1
        write()

    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, on_usr1)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    task = asyncio.create_task(manager.run(), name="manager")
    try:
        while not manager.ready and not task.done():
            await asyncio.sleep(0.05)
        if task.done():
            task.result()
        ready = True
        write()
        await asyncio.wait([task, asyncio.create_task(stop.wait())],
                           return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(manager.stop(), 20)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if tracker is not None:
            await tracker.close()
        await client.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="bench/update.py's helper process")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("controller", help="run the LCM update controller alone")
    c.add_argument("--kubeconfig", type=Path, required=True)
    c.add_argument("--stats", type=Path, required=True)
    c.add_argument("--workers", type=int, default=1)
    c.add_argument("--cluster-api", action="store_true",
                   help="the cluster's node-side objects are in its own API (module doc)")
    a = p.parse_args(argv)
    asyncio.run(controller_main(a.kubeconfig, a.stats, a.workers, a.cluster_api))
    return 0


if __name__ == "__main__":
    sys.exit(main())
