"""The node maintenance flow (``NodeMaintenance``) against the real API server.

The objects of one node's maintenance are made by hand. No controller runs:
the test plays the Machine controller (rendering the LCMMachine), the agent
(its report), the kubelet (Ready, boot ID) and the BareMetalHost controller
(consuming the reboot annotation) by writing annotations and status itself.
The helpers here are shared with ``test_graceful_reboot``. The tests share
the module's API server, each in its own namespace; what a test made,
cluster-scoped Nodes, requests and locks included, is deleted after it
(``tests.harness``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.clock import SystemClock
from racksmith.controllers.maintenance import NodeMaintenance
from racksmith.kinds.maintenance import MaintenanceScope
from racksmith.planners.maintenance import (
    BMH_REBOOT_ANNOTATION as REBOOT_KEY,
)
from racksmith.planners.maintenance import (
    MaintenanceTimings,
    NodeJob,
    NodeProgress,
    NodeState,
    RebootPolicy,
)
from tests.harness import api
from tests.harness.api import MERGE
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

V = "v1alpha1"
CLUSTER, LCM, METAL = "cluster.racksmith.io", "lcm.racksmith.io", "metal3.io"
OWNER = "plan.default.demo-rel-2"
ANN = "lcm.racksmith.io/"
# A refused eviction is tried again soon; the other waits stay the defaults (the full
# flow asserts the lock retry and moves its clock past the reboot retry).
FAST_EVICTIONS = MaintenanceTimings(eviction_backoff_base=0.1, eviction_backoff_cap=0.2)


class ShiftClock(SystemClock):
    """The real clock, with a wall time the test can move forward."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def wall(self) -> datetime:
        return super().wall() + self.offset


def node_info(boot_id: str) -> dict[str, str]:
    """A node's system info as a kubelet reports it (every field the clients require)."""
    return {"architecture": "amd64", "operatingSystem": "linux", "osImage": "test",
            "kernelVersion": "6.1", "containerRuntimeVersion": "test://1",
            "kubeletVersion": "v1.30.0", "kubeProxyVersion": "v1.30.0", "machineID": "m",
            "systemUUID": "u", "bootID": boot_id}


class World(api.World):
    """The test's view of the API and the parts it plays."""

    async def make(self, group: str, plural: str, kind: str, name: str,
                   spec: dict[str, Any], namespace: str | None = "",
                   labels: dict[str, str] | None = None,
                   annotations: dict[str, str] | None = None) -> None:
        meta: dict[str, Any] = {"name": name, "labels": labels or {},
                                "annotations": annotations or {}}
        body = {"apiVersion": f"{group}/{V}", "kind": kind, "metadata": meta, "spec": spec}
        await self.create(group, plural, body, namespace)

    # --- a machine with its objects ----------------------------------------------------

    async def machine(self, name: str, host: str, *, roles: list[str] | None = None,
                      upgrade_index: int | None = None, release: str = "rel-1",
                      boot_id: str = "boot-1") -> None:
        """Machine, BMH, LCMMachine (Ready at ``release``) and Node (Ready)."""
        spec: dict[str, Any] = {"clusterName": "demo", "roles": roles or ["node"]}
        if upgrade_index is not None:
            spec["upgradeIndex"] = upgrade_index
        await self.make(CLUSTER, "machines", "Machine", name, spec)
        await self.put_status(CLUSTER, "machines", name, {
            "phase": "Ready", "hostRef": {"name": host, "namespace": self.ns}, "release": release})
        await self.make(METAL, "baremetalhosts", "BareMetalHost", host, {
            "bmc": {"address": f"redfish://bmc-{host}.example/redfish/v1/Systems/1",
                    "credentialsName": f"{host}-bmc"},
            "bootMACAddress": "52:54:00:00:00:01"})
        await self.make(LCM, "lcmmachines", "LCMMachine", name, {
            "machineRef": {"name": name}, "clusterName": "demo", "release": release})
        await self.agent(name, release)
        resp = await self.core.create_node({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": node_info(boot_id)}}, _preload_content=False)
        resp.release()

    async def agent(self, machine: str, release: str, *, reboot_required: bool = False,
                    phase: str = "Ready", error: str | None = None) -> None:
        """The agent's report for the LCMMachine's current generation."""
        lcm = await self.get(LCM, "lcmmachines", machine)
        assert lcm is not None
        status: dict[str, Any] = {
            "phase": phase, "observedGeneration": lcm["metadata"]["generation"],
            "rebootRequired": reboot_required}
        if phase == "Ready":
            status["release"] = release
        if error is not None:
            status["items"] = [{"name": "kernel", "state": "Failed", "error": error}]
        await self.put_status(LCM, "lcmmachines", machine, status)

    async def render(self, machine: str, release: str) -> None:
        """The Machine controller's part: the LCMMachine renders ``release``."""
        await self.patch(LCM, "lcmmachines", machine, {"spec": {"release": release}})

    async def patch_node(self, name: str, body: dict[str, Any]) -> None:
        resp = await self.core.patch_node(name, body, _preload_content=False, **MERGE)
        resp.release()

    async def kubelet(self, name: str, *, ready: bool = True, boot_id: str | None = None
                      ) -> None:
        """The kubelet's part: Ready condition and boot ID."""
        raw = await self.node(name)
        assert raw is not None
        status = raw.setdefault("status", {})
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        if boot_id is not None:
            status.setdefault("nodeInfo", {})["bootID"] = boot_id
        resp = await self.core.replace_node_status(name, raw, _preload_content=False)
        resp.release()

    async def power_cycle(self, host: str, *, on: bool = False) -> None:
        """The BareMetalHost controller's part of Metal3's keyed reboot: the host
        reads powered off (the flow then removes its key), then ``on`` again."""
        def power(obj: dict[str, Any]) -> None:
            obj.setdefault("status", {})["poweredOn"] = on
        await self.update(METAL, "baremetalhosts", host, power, status=True)

    async def released(self, host: str) -> bool:
        """The flow removed its reboot key (the host powers on again)."""
        return REBOOT_KEY not in await self.bmh_annotations(host)

    async def bmh_annotations(self, host: str) -> dict[str, str]:
        bmh = await self.get(METAL, "baremetalhosts", host)
        assert bmh is not None
        return dict(bmh["metadata"].get("annotations") or {})

    async def nmr(self, node: str) -> dict[str, Any] | None:
        return await self.get(LCM, "nodemaintenancerequests", node, None)

    async def pod(self, name: str, node: str, *, labels: dict[str, str] | None = None,
                  daemonset: bool = False) -> None:
        meta: dict[str, Any] = {"name": name, "labels": labels or {}}
        if daemonset:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                        "name": "agent", "uid": "ds-uid"}]
        await self.core.create_namespaced_pod(self.ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "img"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}})

    async def pods_on(self, node: str) -> set[str]:
        out = await self.core.list_namespaced_pod(self.ns)
        return {p.metadata.name for p in out.items if p.spec.node_name == node}

    async def pdb(self, name: str, labels: dict[str, str], min_available: int) -> None:
        await self.policy.create_namespaced_pod_disruption_budget(self.ns, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}}})

    async def lock(self, name: str, node: str, state: str, *, error: str | None = None,
                   percentage: int | None = None) -> None:
        if await self.get(LCM, "nodeworkloadlocks", name, None) is None:
            await self.make(LCM, "nodeworkloadlocks", "NodeWorkloadLock", name,
                              {"controllerName": "ctrl", "nodeName": node}, None)
        status: dict[str, Any] = {"state": state}
        if error is not None:
            status["errorMessage"] = error
        if percentage is not None:
            status["inactivationProgress"] = {"percentage": percentage,
                                              "description": "moving instances"}
        await self.put_status(LCM, "nodeworkloadlocks", name, status, None)

    def job(self, machine: str = "m1", *, owner: str = OWNER, release: str | None = "rel-2",
            reboot: RebootPolicy = RebootPolicy.IF_REQUIRED, drain_timeout: float = 0.3,
            scope: MaintenanceScope = MaintenanceScope.OS) -> NodeJob:
        """A node job of cluster ``demo`` in the test's namespace."""
        return NodeJob(namespace=self.ns, machine=machine, owner=owner, cluster="demo",
                       scope=scope, release=release, reboot=reboot,
                       drain_timeout=drain_timeout)


# --- the tests ---------------------------------------------------------------------------


async def until(flow: NodeMaintenance, j: NodeJob, *states: NodeState) -> NodeProgress:
    """Advance (as a caller would on requeue) until the flow is in one of ``states``."""
    seen: list[NodeProgress] = []

    async def check() -> bool:
        seen.append(await flow.advance(j))
        if seen[-1].state in states:
            return True
        await asyncio.sleep(min(0.2, seen[-1].requeue))
        return False
    try:
        await eventually(check, f"flow in {states}")
    except AssertionError:
        raise AssertionError(f"flow never reached {states}; last {seen[-1:]}") from None
    return seen[-1]


async def test_full_flow_locks_drain_apply_reboot_resume(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    clock = ShiftClock()
    await world.machine("m1", "h1")
    await world.machine("m2", "h2")
    await world.pod("web-1", "m1", labels={"app": "web"})
    await world.pod("web-2", "m2", labels={"app": "web"})
    await world.pod("plain", "m1")
    await world.pod("ds-1", "m1", daemonset=True)
    await world.pdb("web", {"app": "web"}, 2)
    await world.lock("ctrl.m1", "m1", "active", percentage=40)
    flow = NodeMaintenance(client, clock=clock, timings=FAST_EVICTIONS)
    j = world.job()

    # Requested, then held by the active lock.
    p = await flow.advance(j)
    assert p.state == NodeState.WAITING_FOR_LOCKS
    assert "ctrl.m1 (ctrl)" in p.message and "moving instances" in p.message
    nmr = await world.nmr("m1")
    assert nmr is not None
    assert nmr["metadata"]["labels"] == {f"{ANN}owner": OWNER,
                                         "cluster.racksmith.io/cluster": "demo",
                                         "cluster.racksmith.io/machine": "m1"}
    assert nmr["metadata"]["annotations"] == {f"{ANN}namespace": ns}
    assert nmr["spec"] == {"nodeName": "m1", "scope": "os", "release": "rel-2"}
    node = await world.node("m1")
    assert node is not None and not (node.get("spec") or {}).get("unschedulable")

    # Another owner waits.
    other = await flow.advance(world.job(owner="reboot.default.demo"))
    assert other.state == NodeState.WAITING_FOR_OTHER
    assert other.message == f"node in maintenance by {OWNER}"

    # A failed lock pauses the node.
    await world.lock("ctrl.m1", "m1", "failed", error="instance x is pinned")
    p = await flow.advance(j)
    assert p.state == NodeState.LOCK_FAILED
    assert p.message == "NodeWorkloadLock ctrl.m1 (ctrl) failed: instance x is pinned"
    assert p.requeue == 10.0

    # Inactive: cordon, evict; the PDB refuses web-1; past the timeout: Blocked.
    await world.lock("ctrl.m1", "m1", "inactive")
    p = await flow.advance(j)
    assert p.state in (NodeState.DRAINING, NodeState.BLOCKED)
    node = await world.node("m1")
    assert node is not None and (node.get("spec") or {}).get("unschedulable") is True
    assert node["metadata"]["annotations"][f"{ANN}cordoned-by"] == OWNER
    assert await world.pods_on("m1") == {"web-1", "ds-1"}
    nmr = await world.nmr("m1")
    assert nmr is not None and f"{ANN}drain-started" in nmr["metadata"]["annotations"]
    p = await until(flow, j, NodeState.BLOCKED)  # once the drain timeout has passed
    assert p.message.startswith(
        f"drain blocked: pod {ns}/web-1 is protected by PodDisruptionBudget {ns}/web (")
    assert "needs 2 healthy pods" in p.message

    # The budget goes; the drain ends (DaemonSet pod stays); the release is set.
    await world.policy.delete_namespaced_pod_disruption_budget("web", ns)
    p = await until(flow, j, NodeState.APPLYING)
    assert await world.pods_on("m1") == {"ds-1"}
    machine = await world.get(CLUSTER, "machines", "m1")
    assert machine is not None
    assert machine["metadata"]["annotations"][f"{ANN}release"] == "rel-2"
    assert "render release rel-2" in p.message

    # The machine controller renders, the agent fails an item, then succeeds and
    # needs a reboot.
    await world.render("m1", "rel-2")
    await world.agent("m1", "rel-2", phase="Failed", error="dkms build failed")
    p = await flow.advance(j)
    assert p.state == NodeState.APPLYING
    assert "Failed" in p.message and "kernel: dkms build failed" in p.message
    await world.agent("m1", "rel-2", reboot_required=True)
    p = await flow.advance(j)
    assert p.state == NodeState.REBOOTING
    nmr = await world.nmr("m1")
    assert nmr is not None
    annotations = nmr["metadata"]["annotations"]
    assert annotations[f"{ANN}reboot-boot-id"] == "boot-1"
    requested = annotations[f"{ANN}reboot-requested"]
    assert REBOOT_KEY in await world.bmh_annotations("h1")

    # A restarted executor resumes without asking again.
    flow = NodeMaintenance(client, clock=clock, timings=FAST_EVICTIONS)
    p = await flow.advance(j)
    assert p.state == NodeState.REBOOTING
    await world.power_cycle("h1")
    p = await flow.advance(j)
    assert p.state == NodeState.REBOOTING
    assert REBOOT_KEY not in await world.bmh_annotations("h1")
    await world.power_cycle("h1", on=True)
    nmr = await world.nmr("m1")
    assert nmr is not None and nmr["metadata"]["annotations"][f"{ANN}reboot-requested"] == \
        requested

    # Ten minutes with the annotation gone and the same boot: requested once more.
    clock.offset = timedelta(minutes=11)
    p = await flow.advance(j)
    assert p.state == NodeState.REBOOTING
    assert REBOOT_KEY in await world.bmh_annotations("h1")
    nmr = await world.nmr("m1")
    assert nmr is not None
    again = nmr["metadata"]["annotations"][f"{ANN}reboot-requested"]
    assert again != requested
    p = await flow.advance(j)
    nmr = await world.nmr("m1")
    assert nmr is not None and nmr["metadata"]["annotations"][f"{ANN}reboot-requested"] == again

    # The host power-cycles and boots: a new boot ID, not Ready yet.
    await world.power_cycle("h1")
    await world.kubelet("m1", ready=False, boot_id="boot-2")
    await world.agent("m1", "rel-2", reboot_required=False)
    p = await flow.advance(j)
    assert p.state == NodeState.WAITING_FOR_NODE
    await world.kubelet("m1", ready=True)
    p = await flow.advance(j)
    assert p.state == NodeState.READY_TO_FINISH and p.progress == 100
    node = await world.node("m1")
    assert node is not None and not (node.get("spec") or {}).get("unschedulable")
    assert f"{ANN}cordoned-by" not in (node["metadata"].get("annotations") or {})

    # Asking again changes nothing (no second cordon, no second reboot).
    await world.pod("back", "m1")
    p = await NodeMaintenance(client, clock=clock).advance(j)
    assert p.state == NodeState.READY_TO_FINISH
    node = await world.node("m1")
    assert node is not None and not (node.get("spec") or {}).get("unschedulable")
    assert "back" in await world.pods_on("m1")
    assert REBOOT_KEY not in await world.bmh_annotations("h1")

    # An Event about the Node per write of the flow (in default: Nodes are cluster-scoped),
    # a repeat folded into its count.
    events = await world.events("m1", "default")
    assert {e.involved_object.kind for e in events} == {"Node"}
    assert {e.source.component for e in events} == {"racksmith-maintenance"}
    told = Counter[str]()
    for e in events:
        told[e.reason] += e.count
    assert (told["Cordoned"], told["DrainStarted"], told["Uncordoned"]) == (1, 1, 1)
    assert told["RebootRequested"] == 2  # asked again after the reboot retry
    assert sorted(e.message for e in events if e.reason == "Evicted") == [
        f"evicted pod {ns}/plain", f"evicted pod {ns}/web-1"]
    refused = [e for e in events if e.reason == "EvictionRefused"]
    assert refused and {e.type for e in refused} == {"Warning"}
    assert f"pod {ns}/web-1 refused (PodDisruptionBudget {ns}/web)" in refused[0].message

    await flow.finish(j)
    assert await world.nmr("m1") is None
    await flow.finish(j)  # idempotent


async def test_was_unschedulable_is_never_uncordoned(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.machine("m1", "h1")
    await world.patch_node("m1", {"spec": {"unschedulable": True}})
    await world.pod("plain", "m1")
    flow = NodeMaintenance(client)
    j = world.job(release=None, reboot=RebootPolicy.NEVER, scope=MaintenanceScope.DRAIN)
    p = await flow.advance(j)
    assert p.state == NodeState.READY_TO_FINISH
    nmr = await world.nmr("m1")
    assert nmr is not None
    assert nmr["metadata"]["annotations"][f"{ANN}was-unschedulable"] == "true"
    assert nmr["spec"]["scope"] == "drain" and "release" not in nmr["spec"]
    assert await world.pods_on("m1") == set()
    node = await world.node("m1")
    assert node is not None and (node.get("spec") or {}).get("unschedulable") is True
    assert f"{ANN}cordoned-by" not in (node["metadata"].get("annotations") or {})
    await flow.finish(j)
    await NodeMaintenance(client).sweep({OWNER})
    node = await world.node("m1")
    assert node is not None and (node.get("spec") or {}).get("unschedulable") is True


async def test_reboot_always_without_release(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.machine("m1", "h1")
    flow = NodeMaintenance(client)
    j = world.job(release=None, reboot=RebootPolicy.ALWAYS, owner="reboot.default.demo")
    p = await flow.advance(j)
    assert p.state == NodeState.REBOOTING
    assert REBOOT_KEY in await world.bmh_annotations("h1")
    machine = await world.get(CLUSTER, "machines", "m1")
    assert machine is not None and f"{ANN}release" not in (
        machine["metadata"].get("annotations") or {})
    await world.power_cycle("h1")
    assert (await flow.advance(j)).state == NodeState.REBOOTING  # the key released
    assert await world.released("h1")
    await world.power_cycle("h1", on=True)
    await world.kubelet("m1", boot_id="boot-2")
    assert (await flow.advance(j)).state == NodeState.READY_TO_FINISH


async def test_sweep(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.machine("m1", "h1")
    await world.machine("m2", "h2")
    await world.machine("m3", "h3")
    # m1: cordoned by a plan that crashed before its request existed / after it was gone.
    await world.patch_node("m1", {"metadata": {"annotations": {
        f"{ANN}cordoned-by": "plan.default.old"}}, "spec": {"unschedulable": True}})
    # m2: in maintenance by an owner that is gone.
    gone = "plan.default.gone"
    flow = NodeMaintenance(client)
    p = await flow.advance(world.job("m2", owner=gone, release=None, reboot=RebootPolicy.ALWAYS))
    assert p.state == NodeState.REBOOTING
    node = await world.node("m2")
    assert node is not None and (node.get("spec") or {}).get("unschedulable") is True
    # m3: in maintenance by a live owner: untouched.
    alive = "reboot.default.demo"
    p = await flow.advance(world.job("m3", owner=alive, release=None, reboot=RebootPolicy.ALWAYS))
    assert p.state == NodeState.REBOOTING
    # A lock of a node that is gone, and a request whose node and machine are gone.
    await world.lock("ctrl.ghost", "ghost", "active")
    await world.make(LCM, "nodemaintenancerequests", "NodeMaintenanceRequest", "ghost",
                       {"nodeName": "ghost", "scope": "os"}, None,
                       labels={f"{ANN}owner": alive},
                       annotations={f"{ANN}namespace": ns})

    done = await flow.sweep(lambda owner: owner == alive)
    assert any("ghost" in line for line in done)
    assert await world.get(LCM, "nodeworkloadlocks", "ctrl.ghost", None) is None
    assert await world.nmr("ghost") is None
    assert await world.nmr("m2") is None
    assert await world.nmr("m3") is not None
    for name in ("m1", "m2"):
        node = await world.node(name)
        assert node is not None and not (node.get("spec") or {}).get("unschedulable"), name
        assert f"{ANN}cordoned-by" not in (node["metadata"].get("annotations") or {})
    node = await world.node("m3")
    assert node is not None and (node.get("spec") or {}).get("unschedulable") is True
    assert await flow.sweep({alive}) == []
