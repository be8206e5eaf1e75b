"""The LCM update controller against the real embedded API server.

The node flow is a fake (``FakeFlow``: creates and deletes the
NodeMaintenanceRequests, plays the agent by reporting the target release,
and says ReadyToFinish after a few calls), except in the last test, which
runs the real ``NodeMaintenance`` with the test playing agent and kubelet.
Alerts come from a settable fake source; ``AlertmanagerSource`` is tested
against a tiny aiohttp Alertmanager on 127.0.0.1. Every wait polls under a
bound. The tests share the module's API server, each with its own namespace
(for its cluster); what a test made, cluster-scoped Nodes and maintenance
requests included, is deleted after it (``tests.harness``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.maintenance.flow import NodeMaintenance
from racksmith.controllers.update import (
    AlertmanagerSource,
    NodeFlow,
    UpdateTimings,
    update_controller,
)
from racksmith.controllers.update.names import CONTROLLER_NAME
from racksmith.planners.maintenance import (
    CLUSTER_LABEL,
    MACHINE_LABEL,
    NAMESPACE_ANNOTATION,
    OWNER_LABEL,
    RELEASE_ANNOTATION,
    MaintenanceTimings,
    NodeJob,
    NodeProgress,
    NodeState,
)
from racksmith.runtime import Manager
from tests.harness import api
from tests.harness.controllers import managed, reconciled_again
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLUSTER, LCM = "cluster.racksmith.io", "lcm.racksmith.io"
V = "v1alpha1"
MASTERS = ("m0", "m1", "m2")
WORKERS = ("w0", "w1", "w2", "w3")
# Small waits; the sweep period stays the default (30 s): one sweep per test is asserted.
TIMINGS = UpdateTimings(active_requeue=0.3, node_flow=MaintenanceTimings(
    poll=0.3, lock_retry=0.3, eviction_backoff_base=0.1, eviction_backoff_cap=0.3))


class World(api.World):
    """The test's view of the API: one cluster, its plan and its machines."""

    @property
    def owner(self) -> str:
        """The owner the plan of rel-2 puts on what it makes."""
        return f"plan.{self.ns}.demo-rel-2"

    async def plan(self, name: str = "demo-rel-2") -> dict[str, Any] | None:
        return await self.get(LCM, "clusterupdateplans", name)

    async def plan_phase(self) -> str | None:
        return ((await self.plan() or {}).get("status") or {}).get("phase")

    async def in_phase(self, *phases: str) -> None:
        async def check() -> bool:
            return await self.plan_phase() in phases
        await eventually(check, f"plan in phase {phases}")

    async def commence(self, *steps: str, value: bool = True) -> None:
        def change(obj: dict[str, Any]) -> None:
            for step in obj["spec"]["steps"]:
                if step["id"] in steps:
                    step["commence"] = value
        await self.update(LCM, "clusterupdateplans", "demo-rel-2", change)

    async def release(self, machine: str) -> str | None:
        lcm = await self.get(LCM, "lcmmachines", machine)
        return ((lcm or {}).get("status") or {}).get("release")

    async def nmrs(self) -> list[str]:
        return sorted(i["metadata"]["name"] for i in await self.items(
            LCM, "nodemaintenancerequests", None))

    async def cmr(self) -> dict[str, Any] | None:
        return await self.get(LCM, "clustermaintenancerequests", f"{self.ns}.demo", None)

    async def set_release(self, release: str) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["spec"]["release"] = release
        await self.update(CLUSTER, "clusters", "demo", change)

    async def setup(self, *, masters: tuple[str, ...] = MASTERS,
                    workers: tuple[str, ...] = WORKERS, update: dict[str, Any] | None = None
                    ) -> None:
        """A cluster on rel-1: machines, their LCMMachines Ready at rel-1, Ready Nodes."""
        await self.create(CLUSTER, "clusters", {
            "apiVersion": f"{CLUSTER}/{V}", "kind": "Cluster", "metadata": {"name": "demo"},
            "spec": {"release": "rel-1", "maxWorkerUpgradeCount": 2,
                     "update": {"nodeDurationSeconds": 120, **(update or {})}}})
        for i, name in enumerate((*masters, *workers)):
            roles = ["master", "etcd"] if name in masters else ["node"]
            await self.create(CLUSTER, "machines", {
                "apiVersion": f"{CLUSTER}/{V}", "kind": "Machine",
                "metadata": {"name": name, "labels": {"metal.racksmith.io/rack": f"r{i % 2}"}},
                "spec": {"clusterName": "demo", "roles": roles}})
            await self.create(LCM, "lcmmachines", {
                "apiVersion": f"{LCM}/{V}", "kind": "LCMMachine", "metadata": {"name": name},
                "spec": {"machineRef": {"name": name}, "clusterName": "demo",
                         "release": "rel-1"}})
            await self.agent(name, "rel-1")
            node: Any = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                         "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            await self.core.create_node(node)

    async def agent(self, name: str, release: str) -> None:
        """The agent's part: the LCMMachine applied at ``release`` (its spec moved there)."""
        lcm = await self.get(LCM, "lcmmachines", name)
        assert lcm is not None
        if lcm["spec"]["release"] != release:
            def spec(obj: dict[str, Any]) -> None:
                obj["spec"]["release"] = release
            await self.update(LCM, "lcmmachines", name, spec)
            lcm = await self.get(LCM, "lcmmachines", name)
            assert lcm is not None

        def status(obj: dict[str, Any]) -> None:
            obj["status"] = {"phase": "Ready", "release": release, "rebootRequired": False,
                             "observedGeneration": obj["metadata"]["generation"]}
        await self.update(LCM, "lcmmachines", name, status, status=True)


class FakeFlow:
    """The node flow, played: NMR on the first call, the agent after ``calls``, done.

    Records every start (NMR created), and the worst overlap seen of control
    plane machines and of workers in maintenance.
    """

    def __init__(self, world: World, calls: int = 2) -> None:
        self.world = world
        self.calls = calls
        self.count: Counter[str] = Counter()
        self.starts: list[str] = []
        self.open: set[str] = set()
        self.max_control = 0
        self.max_workers = 0
        self.hold: set[str] = set()
        self.blocked: set[str] = set()
        self.sweeps: list[set[str]] = []

    async def advance(self, job: NodeJob) -> NodeProgress:
        name = job.machine
        nmr = await self.world.get(LCM, "nodemaintenancerequests", name, None)
        if nmr is None:
            await self.world.create(LCM, "nodemaintenancerequests", {
                "apiVersion": f"{LCM}/{V}", "kind": "NodeMaintenanceRequest",
                "metadata": {"name": name, "labels": {OWNER_LABEL: job.owner,
                                                      CLUSTER_LABEL: job.cluster,
                                                      MACHINE_LABEL: name},
                             "annotations": {NAMESPACE_ANNOTATION: job.namespace}},
                "spec": {"nodeName": name, "scope": "os", "release": job.release}}, None)
            self.starts.append(name)
            self.open.add(name)
            self.max_control = max(self.max_control, len(self.open & set(MASTERS)))
            self.max_workers = max(self.max_workers, len(self.open - set(MASTERS)))
            return NodeProgress(NodeState.REQUESTED, "", 0, 5.0)
        if nmr["metadata"]["labels"].get(OWNER_LABEL) != job.owner:
            return NodeProgress(NodeState.WAITING_FOR_OTHER, "other", 0, 5.0)
        if name in self.blocked:
            return NodeProgress(NodeState.BLOCKED, f"drain blocked: pod x/{name}", 20, 5.0)
        if name in self.hold:
            return NodeProgress(NodeState.DRAINING, "draining", 30, 0.2)
        self.count[name] += 1
        if self.count[name] < self.calls:
            return NodeProgress(NodeState.APPLYING, "applying", 60, 0.05)
        assert job.release is not None
        if await self.world.release(name) != job.release:
            await self.world.agent(name, job.release)
        return NodeProgress(NodeState.READY_TO_FINISH, "", 100, 0.0)

    async def finish(self, job: NodeJob) -> None:
        nmr = await self.world.get(LCM, "nodemaintenancerequests", job.machine, None)
        if nmr is not None and nmr["metadata"]["labels"].get(OWNER_LABEL) == job.owner:
            await self.world.custom.delete_cluster_custom_object(
                LCM, V, "nodemaintenancerequests", job.machine)
        self.open.discard(job.machine)

    async def sweep(self, owners_alive: set[str]) -> list[str]:
        self.sweeps.append(set(owners_alive))
        return []


class FakeAlerts:
    def __init__(self) -> None:
        self.names: set[str] = set()

    @property
    def last_error(self) -> str | None:
        return None

    async def firing(self) -> set[str]:
        return set(self.names)


@contextlib.asynccontextmanager
async def running(client: ApiClient, flow: NodeFlow, alerts: FakeAlerts | None = None
                  ) -> AsyncIterator[Manager]:
    controller = update_controller(client, alert_source=alerts, node_maintenance=flow,
                                   timings=TIMINGS)
    async with managed(client, [controller], identity="update-test") as manager:
        yield manager


def decided_done(manager: Manager) -> bool:
    """Whether a reconcile of the update controller has ended in Done: with the
    cluster in place, that is a reconcile that found no plan to make or drive."""
    return manager.metrics.count(CONTROLLER_NAME, "done") >= 1


def machine_status(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in plan["status"]["machines"]}


async def test_plan_commence_locks_order_and_completion(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    flow = FakeFlow(world)
    await world.setup(update={"maxUnavailable": {"metal.racksmith.io/rack": 1}})
    async with running(client, flow) as manager:
        # Default groups, created once.
        async def groups() -> bool:
            names = {g["metadata"]["name"] for g in await world.items(LCM, "updategroups")}
            return names == {"demo-control", "demo-default"}
        await eventually(groups, "default UpdateGroups")
        default = await world.get(LCM, "updategroups", "demo-default")
        assert default is not None
        assert (default["spec"]["index"], default["spec"]["concurrentUpdates"]) == (1, 2)
        # the release is the one running: the reconcile after the groups finds
        # no plan to make
        await eventually(lambda: decided_done(manager), "the cluster reconciled to Done")
        assert await world.items(LCM, "clusterupdateplans") == []

        # A new release: exactly one plan, nothing commenced, nothing starts.
        await world.set_release("rel-2")
        await eventually(lambda: _exists(world.plan()), "plan demo-rel-2")
        plan = await world.plan()
        assert plan is not None
        assert plan["metadata"]["labels"][CLUSTER_LABEL] == "demo"
        assert (plan["spec"]["source"], plan["spec"]["target"]) == ("rel-1", "rel-2")
        steps = plan["spec"]["steps"]
        assert [s["id"] for s in steps] == ["control-plane", "group-demo-default"]
        assert not any(s["commence"] for s in steps)
        assert steps[0]["duration"]["estimated"] == "6m0s"  # 3 masters x 120 s
        assert steps[1]["duration"]["estimated"] == "4m0s"  # 4 workers, one per rack
        assert steps[0]["impact"] == {"users": "minor", "workloads": "none",
                                      "info": steps[0]["impact"]["info"]}
        # The reconcile that wrote the phase is the one that decided: nothing
        # commenced, so nothing started and no request was made.
        await world.in_phase("NotStarted")
        assert len(await world.items(LCM, "clusterupdateplans")) == 1
        assert flow.starts == [] and await world.cmr() is None

        # Commenced, with an active cluster lock: the CMR, and still nothing starts.
        await world.create(LCM, "clusterworkloadlocks", {
            "apiVersion": f"{LCM}/{V}", "kind": "ClusterWorkloadLock",
            "metadata": {"name": "reference"}, "spec": {"controllerName": "reference"}}, None)
        await world.commence("control-plane", "group-demo-default")
        await eventually(lambda: _exists(world.cmr()), "ClusterMaintenanceRequest")
        cmr = await world.cmr()
        assert cmr is not None and cmr["metadata"]["labels"][OWNER_LABEL] == world.owner
        assert cmr["spec"] == {"scope": "os", "release": "rel-2"}
        # The reconcile that wrote InProgress made the request, read the lock
        # and started nothing (a start comes before the status that says so).
        await world.in_phase("InProgress")
        assert flow.starts == []

        # The lock goes inactive: the update runs to the end.
        def inactive(obj: dict[str, Any]) -> None:
            obj["status"] = {"state": "inactive"}
        await world.update(LCM, "clusterworkloadlocks", "reference", inactive, status=True,
                           namespace=None)
        await world.in_phase("Completed")
        await eventually(lambda: _gone(world.cmr()), "CMR deleted")

    assert flow.starts[:3] == list(MASTERS)
    assert sorted(flow.starts[3:]) == sorted(WORKERS)
    assert len(flow.starts) == len(set(flow.starts)) == 7
    assert flow.max_control == 1 and flow.max_workers == 2
    assert await world.nmrs() == []
    for name in (*MASTERS, *WORKERS):
        assert await world.release(name) == "rel-2"
    plan = await world.plan()
    assert plan is not None
    status = plan["status"]
    assert [s["phase"] for s in status["steps"]] == ["Completed", "Completed"]
    for name, m in machine_status(plan).items():
        assert (m["state"], m["progress"], m["phase"]) == ("Done", 100, "Completed"), name
        assert m["startedAt"] <= m["finishedAt"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Blocked"] == "False"
    assert flow.sweeps == [set()]  # once at start-up (no owner yet), then every 30 s

    # The transitions, each told once: about the Cluster, the plan's creation; about the
    # plan, each step commenced and completed, then the plan completed.
    await world.has_event("demo", "UpdatePlanCreated", type="Normal")
    [created] = [e for e in await world.events("demo") if e.reason == "UpdatePlanCreated"]
    assert created.involved_object.kind == "Cluster" and created.count == 1
    assert "rel-1 → rel-2" in created.message
    await world.has_events("demo-rel-2", "StepCommenced", "StepCompleted", "PlanCompleted")
    told = Counter((e.reason, e.message) for e in await world.events("demo-rel-2")
                   for _ in range(e.count))
    assert told == Counter({
        ("StepCommenced", "step control-plane (Update the control plane) commenced"): 1,
        ("StepCommenced", "step group-demo-default (Update group demo-default) commenced"): 1,
        ("StepCompleted", "step control-plane (Update the control plane) completed: "
                          "3/3 machines done, 0 in progress"): 1,
        ("StepCompleted", "step group-demo-default (Update group demo-default) completed: "
                          "4/4 machines done, 0 in progress"): 1,
        ("PlanCompleted", "every machine of cluster demo runs release rel-2"): 1})


async def test_autopause_recommence_and_restart(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    flow = FakeFlow(world)
    alerts = FakeAlerts()
    await world.setup(update={"autoCommence": True})
    await world.create(LCM, "updateautopauses", {
        "apiVersion": f"{LCM}/{V}", "kind": "UpdateAutoPause", "metadata": {"name": "pause"},
        "spec": {"alerts": ["KubeAPIDown", "EtcdNoLeader"]}})
    flow.hold.add("m0")
    async with running(client, flow, alerts) as manager:
        await world.set_release("rel-2")
        await eventually(lambda: _exists(world.plan()), "plan demo-rel-2")
        plan = await world.plan()
        assert plan is not None and all(s["commence"] for s in plan["spec"]["steps"])

        async def m0_started() -> bool:
            plan = await world.plan()
            m = machine_status(plan).get("m0") if plan and plan.get("status") else None
            return bool(m and m.get("state") == "Draining")
        await eventually(m0_started, "m0 draining")
        plan = await world.plan()
        assert plan is not None
        assert plan["status"]["machines"][0]["startedAt"]
        assert plan["status"]["eta"]

        # An alert fires: the un-started step loses commence; the started one goes on.
        alerts.names = {"KubeAPIDown", "Unrelated"}
        await world.in_phase("AutoPaused")
        plan = await world.plan()
        assert plan is not None
        assert [(s["id"], s["commence"]) for s in plan["spec"]["steps"]] == [
            ("control-plane", True), ("group-demo-default", False)]
        assert plan["status"]["firingAlerts"] == ["KubeAPIDown"]
        await world.has_event("demo-rel-2", "AutoPaused", type="Warning")
        flow.hold.clear()

        async def control_plane_done() -> bool:
            plan = await world.plan()
            steps = ((plan or {}).get("status") or {}).get("steps") or []
            return bool(steps) and steps[0]["phase"] == "Completed"
        await eventually(control_plane_done, "control plane updated while auto-paused")
        plan = await world.plan()
        assert plan is not None
        assert plan["status"]["steps"][1]["phase"] == "AutoPaused"
        await reconciled_again(manager.metrics, CONTROLLER_NAME, "the auto-paused plan")
        assert flow.starts == list(MASTERS)

        # The alert resolves; the operator re-commences; one worker is held.
        alerts.names = set()
        await world.in_phase("InProgress")
        flow.hold.add("w0")
        await world.commence("group-demo-default")

        async def w0_in_progress() -> bool:
            return "w0" in await world.nmrs()
        await eventually(w0_in_progress, "w0 in maintenance")

    # A new controller instance (and a fresh flow) resumes: no done machine again.
    flow2 = FakeFlow(world)
    async with running(client, flow2, alerts):
        await world.in_phase("Completed")
    assert not set(flow2.starts) & {*MASTERS, "w0"}
    assert sorted(set(flow.starts) | set(flow2.starts)) == sorted((*MASTERS, *WORKERS))
    assert len(flow.starts) + len(flow2.starts) == 7
    assert await world.cmr() is None
    paused = [e for e in await world.events("demo-rel-2") if e.reason == "AutoPaused"]
    assert [e.count for e in paused] == [1]  # told once, not once per reconcile
    assert "firing: KubeAPIDown" in paused[0].message


async def test_blocked_drain_pauses_and_stale_plan_is_replaced(client: ApiClient,
                                                               ns: str) -> None:
    world = World(client, ns)
    flow = FakeFlow(world)
    await world.setup(masters=("m0",), workers=("w0", "w1", "w2"))
    async with running(client, flow) as manager:
        # A plan nobody commenced is replaced when the target moves on.
        await world.set_release("rel-2")
        await eventually(lambda: _exists(world.plan()), "plan demo-rel-2")
        await world.set_release("rel-3")
        await eventually(lambda: _exists(world.plan("demo-rel-3")), "plan demo-rel-3")
        await eventually(lambda: _gone(world.plan()), "plan demo-rel-2 deleted")

        # A blocked drain (onDrainTimeout Pause) starts nothing more.
        flow.blocked.add("w0")

        def commence(obj: dict[str, Any]) -> None:
            for step in obj["spec"]["steps"]:
                step["commence"] = True
        await world.update(LCM, "clusterupdateplans", "demo-rel-3", commence)

        async def blocked() -> bool:
            plan = await world.plan("demo-rel-3")
            conds = ((plan or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Blocked" and c["status"] == "True" for c in conds)
        await eventually(blocked, "plan condition Blocked")
        await reconciled_again(manager.metrics, CONTROLLER_NAME, "the blocked plan")
        # w0 and w1 started together (concurrency 2); w1 finished, w2 would fit but waits.
        assert flow.starts == ["m0", "w0", "w1"]
        assert "w2" not in await world.nmrs()
        plan = await world.plan("demo-rel-3")
        assert plan is not None
        assert plan["status"]["steps"][1]["phase"] == "Stuck"
        assert "drain blocked" in machine_status(plan)["w0"]["message"]
        await world.has_event("demo-rel-3", "MachineBlocked", type="Warning")
        [blocked_event] = [e for e in await world.events("demo-rel-3")
                           if e.reason == "MachineBlocked"]
        assert blocked_event.message == "machine w0: drain blocked: pod x/w0"
        assert blocked_event.count == 1
        flow.blocked.clear()

        async def completed() -> bool:
            plan = await world.plan("demo-rel-3")
            return ((plan or {}).get("status") or {}).get("phase") == "Completed"
        await eventually(completed, "plan demo-rel-3 completed")


async def play_agent(world: World, names: tuple[str, ...], stop: asyncio.Event, *,
                     also: Callable[[], Awaitable[None]] | None = None) -> None:
    """The agents' part (and the release pin's) until ``stop``: a machine
    pinned to a release reports it applied; ``also`` runs on every round."""
    while not stop.is_set():
        for name in names:
            machine = await world.get(CLUSTER, "machines", name)
            pin = ((machine or {}).get("metadata") or {}).get("annotations", {}).get(
                RELEASE_ANNOTATION)
            if pin and await world.release(name) != pin:
                await world.agent(name, pin)
        if also is not None:
            await also()
        await asyncio.sleep(0.05)


async def update_to_rel_2(client: ApiClient, world: World, *,
                          also: Callable[[], Awaitable[None]] | None = None) -> None:
    """Cluster demo moves to rel-2 with the real node flow, the test playing
    the agents of m0 and w0, until its plan is Completed."""
    stop = asyncio.Event()
    task = asyncio.create_task(play_agent(world, ("m0", "w0"), stop, also=also))
    try:
        async with running(client, NodeMaintenance(client, timings=TIMINGS.node_flow)):
            await world.set_release("rel-2")
            await eventually(lambda: _exists(world.plan()), "plan demo-rel-2")
            await world.in_phase("Completed")
    finally:
        stop.set()
        await task


async def test_real_node_flow(client: ApiClient, ns: str) -> None:
    """The real NodeMaintenance; the test plays agent (and the release pin) and kubelet."""
    world = World(client, ns)
    await world.setup(masters=("m0",), workers=("w0",), update={"autoCommence": True})
    await update_to_rel_2(client, world)
    assert await world.nmrs() == []
    assert await world.cmr() is None
    for name in ("m0", "w0"):
        assert await world.release(name) == "rel-2"
        node = await world.core.read_node(name)
        assert not node.spec.unschedulable
    plan = await world.plan()
    assert plan is not None
    assert {m["name"]: m["state"] for m in plan["status"]["machines"]} == {
        "m0": "Done", "w0": "Done"}
    for name in ("m0", "w0"):  # the node flow's Events, about the Nodes
        await world.has_events(name, "Cordoned", "DrainStarted", "Uncordoned",
                               type="Normal", namespace="default")


async def test_alertmanager_source() -> None:
    answer: dict[str, Any] = {"status": 200, "alerts": []}
    seen: list[dict[str, str]] = []

    async def alerts(request: web.Request) -> web.Response:
        seen.append(dict(request.query))
        if answer["status"] != 200:
            return web.Response(status=answer["status"])
        return web.json_response(answer["alerts"])

    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        source = AlertmanagerSource(f"http://127.0.0.1:{port}/", max_age=0)
        assert await source.firing() == set() and source.last_error is None
        assert seen[0] == {"active": "true", "silenced": "false", "inhibited": "false"}
        answer["alerts"] = [{"labels": {"alertname": "KubeAPIDown", "severity": "critical"}},
                            {"labels": {"alertname": "EtcdNoLeader"}}, {"labels": {}}, "x"]
        assert await source.firing() == {"KubeAPIDown", "EtcdNoLeader"}
        answer["status"] = 500
        assert await source.firing() == {"KubeAPIDown", "EtcdNoLeader"}  # last known
        assert source.last_error is not None and "500" in source.last_error
        answer["status"] = 200
        answer["alerts"] = []
        assert await source.firing() == set() and source.last_error is None
    finally:
        await runner.cleanup()
    down = AlertmanagerSource(f"http://127.0.0.1:{port}", max_age=0, timeout=1.0)
    assert await down.firing() == set()
    assert down.last_error is not None


async def _exists(fetch: Awaitable[Any]) -> bool:
    return await fetch is not None


async def _gone(fetch: Awaitable[Any]) -> bool:
    return await fetch is None


async def test_an_update_of_one_cluster_never_touches_another(client: ApiClient,
                                                              ns: str) -> None:
    """Two clusters in one namespace, each with a master and a worker; the
    real node flow updates ``demo``. No maintenance request is ever made for
    ``other``'s machines, none of its Nodes is ever cordoned, and it keeps
    its release (the split every later change builds on: examples/two-clusters)."""
    world = World(client, ns)
    await world.setup(masters=("m0",), workers=("w0",), update={"autoCommence": True})
    await world.create(CLUSTER, "clusters", {
        "apiVersion": f"{CLUSTER}/{V}", "kind": "Cluster", "metadata": {"name": "other"},
        "spec": {"release": "rel-1", "update": {"autoCommence": True}}})
    others = ("om0", "ow0")
    for name in others:
        await world.create(CLUSTER, "machines", {
            "apiVersion": f"{CLUSTER}/{V}", "kind": "Machine", "metadata": {"name": name},
            "spec": {"clusterName": "other",
                     "roles": ["master", "etcd"] if name == "om0" else ["node"]}})
        await world.create(LCM, "lcmmachines", {
            "apiVersion": f"{LCM}/{V}", "kind": "LCMMachine", "metadata": {"name": name},
            "spec": {"machineRef": {"name": name}, "clusterName": "other",
                     "release": "rel-1"}})
        await world.agent(name, "rel-1")
        await world.core.create_node({"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": name}, "status": {
                                          "conditions": [{"type": "Ready", "status": "True"}]}})
    touched: set[str] = set()

    async def watch() -> None:
        touched.update(set(await world.nmrs()) & set(others))
        for name in others:
            spec = (await world.core.read_node(name)).spec
            if spec is not None and spec.unschedulable:
                touched.add(name)

    await update_to_rel_2(client, world, also=watch)
    assert touched == set(), touched
    assert await world.get(LCM, "clusterupdateplans", "other-rel-2") is None
    for name in others:
        assert await world.release(name) == "rel-1"
        assert not [e for e in await world.events(name, "default") if e.reason == "Cordoned"]
    for name in ("m0", "w0"):
        assert await world.release(name) == "rel-2"


async def test_an_owner_too_long_for_a_label_is_matched_against_the_plans(
        client: ApiClient, ns: str) -> None:
    """A plan whose plan.<ns>.<name> passes a label's 63 characters owns its
    requests through the digest form; the node flow's sweep finds it alive
    while the plan exists, gone after."""
    from racksmith.planners.maintenance import plan_owner

    world = World(client, ns)
    name = "a-cluster-with-a-rather-long-name-" + "x" * 30 + "-rel-2"
    owner = plan_owner(ns, name)
    assert len(owner) <= 63 and owner.startswith("plan-h.")
    flow = NodeMaintenance(client, timings=TIMINGS.node_flow)
    assert await flow.owner_exists(owner) is False
    await world.create(LCM, "clusterupdateplans", {
        "apiVersion": f"{LCM}/{V}", "kind": "ClusterUpdatePlan", "metadata": {"name": name},
        "spec": {"cluster": "demo", "source": "rel-1", "target": "rel-2", "steps": []}})
    assert await flow.owner_exists(owner) is True
    assert await flow.owner_exists(plan_owner(ns, name + "-other")) is False
    await world.delete(LCM, "clusterupdateplans", name)
    await eventually(lambda: _gone(world.plan(name)), "plan gone")
    assert await flow.owner_exists(owner) is False
