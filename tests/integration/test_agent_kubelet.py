"""The agent and its emulated kubelet against the real in-process API server:
the Node reports the boot id the emulated OS boot wrote; the LCMMachine
reports ``rebootRequired`` once an item with ``requiresReboot`` changed the
host (and no more once the file is gone); pods bound to the node are made
Running and Ready through the pod status subresource, except a pod being
deleted and pods of other nodes. The test runs on a server of the module,
in a namespace of its own (``tests.harness``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.agent import run_agent
from racksmith.agent.config import AgentTiming
from racksmith.apiserver.server import ApiServer
from racksmith.kinds.cluster import ClusterRelease
from racksmith.planners.release import PlannedRelease
from tests.harness.wait import eventually
from tests.integration.test_agent import (
    NAME,
    TEST_SECONDS,
    TIMING,
    get_lcm,
    lcm_machine,
    planned,
    write_config,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

KERNEL = {"name": "linux-image", "phase": "configuration", "type": "package",
          "requiresReboot": True, "params": {"name": "linux-image", "version": "6.8.0-50"}}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc/racksmith").mkdir(parents=True)
    (root / "etc/racksmith/hardware.json").write_text('{"cpus": 2, "memoryBytes": 1073741824}')
    return root


def with_kernel(plan: PlannedRelease, namespace: str) -> dict[str, Any]:
    """The LCMMachine of ``plan`` plus the rebooting kernel item (as the planner renders it)."""
    obj = lcm_machine(plan, namespace)
    kernel = ClusterRelease.model_validate({"metadata": {"name": "x"}, "spec": {
        "version": "1", "stateItems": [KERNEL]}}).spec.state_items[0]
    obj["spec"]["stateItems"].insert(1, kernel.model_dump(mode="json", by_alias=True))
    return obj


def pod(name: str, node: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}]}}


def conditions(obj: Any) -> dict[str, str]:
    return {c.type: c.status for c in ((obj.status and obj.status.conditions) or [])}


async def test_boot_id_reboot_required_and_pods(api_server: ApiServer, client: ApiClient,
                                                ns: str, root: Path) -> None:
    custom, core = CustomObjectsApi(client), CoreV1Api(client)
    boot_id = str(uuid.uuid4())
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")
    await custom.create_namespaced_custom_object(
        "lcm.racksmith.io", "v1alpha1", ns, "lcmmachines", with_kernel(planned(), ns))
    await core.create_namespaced_pod(ns, pod("web", NAME))
    await core.create_namespaced_pod(ns, pod("elsewhere", "other-node"))
    await core.create_namespaced_pod(ns, pod("going", NAME, finalizers=["test/hold"]))
    await core.delete_namespaced_pod("going", ns)
    config = await write_config(api_server, client, root, ns)
    stop = asyncio.Event()
    agent = asyncio.create_task(run_agent(config, root=root, emulated=True, stop=stop,
                                          timing=TIMING, handle_signals=False))
    try:
        async with asyncio.timeout(TEST_SECONDS):
            async def ready() -> dict[str, Any] | None:
                obj = await get_lcm(custom, ns)
                return obj if (obj.get("status") or {}).get("phase") == "Ready" else None

            status = (await eventually(ready, "LCMMachine Ready"))["status"]
            assert status["rebootRequired"] is True
            assert (root / "var/run/reboot-required").exists()
            node = await core.read_node(NAME)
            assert node.status.node_info.boot_id == boot_id

            async def running() -> Any:
                got = await core.read_namespaced_pod("web", ns)
                return got if got.status.phase == "Running" else None

            web = await eventually(running, "pod web Running")
            assert conditions(web) == {"PodScheduled": "True", "Initialized": "True",
                                       "ContainersReady": "True", "Ready": "True"}
            assert web.status.start_time is not None
            assert [(c.name, c.ready) for c in web.status.container_statuses] == [("app", True)]
            # Written once: a later tick leaves a Ready pod alone.
            version = web.metadata.resource_version
            await ticked(client, 2)
            assert (await core.read_namespaced_pod("web", ns)).metadata.resource_version \
                == version
            for name in ("elsewhere", "going"):
                other = await core.read_namespaced_pod(name, ns)
                assert (other.status is None or other.status.phase != "Running"), name
                assert "Ready" not in conditions(other), name

            # The host rebooted (the emulated boot deletes the file): reported.
            (root / "var/run/reboot-required").unlink()

            async def cleared() -> bool:
                st = (await get_lcm(custom, ns)).get("status") or {}
                return st.get("rebootRequired") is False
            await eventually(cleared, "rebootRequired false after the file went")
    finally:
        stop.set()
        assert await asyncio.wait_for(agent, 10) == 0
        await core.patch_namespaced_pod("going", ns, {"metadata": {"finalizers": None}})


async def test_a_pod_placed_later_runs_through_the_watch(api_server: ApiServer, client: ApiClient,
                                                        ns: str, root: Path) -> None:
    """With a status tick far beyond the test, only the kubelet's watch of its
    node's pods can make a pod created after the start look running."""
    core = CoreV1Api(client)
    slow_tick = dataclasses.replace(TIMING, kubelet_status=3600.0)
    # Every item applied (the kubeadm join ticked the kubelet once): from
    # now on nothing but the watch runs pods before the hour is over.
    async with ready_agent(api_server, client, ns, root, slow_tick):
        await core.create_namespaced_pod(ns, pod("late", NAME))

        async def running() -> Any:
            got = await core.read_namespaced_pod("late", ns)
            return got if got.status is not None and got.status.phase == "Running" else None

        late = await eventually(running, "pod late Running")
        assert conditions(late)["Ready"] == "True"


async def test_the_lease_is_the_heartbeat_and_status_is_posted_when_it_changes(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    """As the kubelet since node leases: every tick renews the Lease, the
    Node's status is written only when it changed (here: the hardware), and
    a Node deleted under the agent is registered again."""
    core = CoreV1Api(client)
    timing = dataclasses.replace(TIMING, kubelet_report=3600.0)
    async with ready_agent(api_server, client, ns, root, timing):
        node_version = (await core.read_node(NAME)).metadata.resource_version
        await ticked(client, 3)
        assert (await core.read_node(NAME)).metadata.resource_version == node_version

        (root / "etc/racksmith/hardware.json").write_text(
            '{"cpus": 4, "memoryBytes": 1073741824}')

        async def four_cpus() -> bool:
            return (await core.read_node(NAME)).status.capacity["cpu"] == "4"

        await eventually(four_cpus, "the changed capacity posted")
        uid = (await core.read_node(NAME)).metadata.uid
        await core.delete_node(NAME)

        async def registered_again() -> bool:
            try:
                node = await core.read_node(NAME)
            except ApiException:
                return False
            return node.metadata.uid != uid and node.status.capacity["cpu"] == "4"

        await eventually(registered_again, "the deleted Node registered again")


@contextlib.asynccontextmanager
async def ready_agent(api_server: ApiServer, client: ApiClient, ns: str, root: Path,
                      timing: AgentTiming) -> AsyncIterator[None]:
    """The agent (emulated, ``timing``) of a plain LCMMachine, once the
    machine is Ready; stopped (and its exit status checked) afterwards."""
    custom = CustomObjectsApi(client)
    await custom.create_namespaced_custom_object(
        "lcm.racksmith.io", "v1alpha1", ns, "lcmmachines", lcm_machine(planned(), ns))
    config = await write_config(api_server, client, root, ns)
    stop = asyncio.Event()
    agent = asyncio.create_task(run_agent(config, root=root, emulated=True, stop=stop,
                                          timing=timing, handle_signals=False))
    try:
        async with asyncio.timeout(TEST_SECONDS):
            async def ready() -> bool:
                obj = await get_lcm(custom, ns)
                return (obj.get("status") or {}).get("phase") == "Ready"

            await eventually(ready, "LCMMachine Ready")
            yield
    finally:
        stop.set()
        assert await asyncio.wait_for(agent, 10) == 0


async def _later(read: Any, than: Any) -> bool:
    return bool(await read() > than)


async def ticked(client: ApiClient, ticks: int) -> None:
    """Wait until the kubelet has ticked ``ticks`` more times: each tick
    renews the node's Lease (what a test waits on before it asserts that a
    tick wrote nothing)."""
    coordination = CoordinationV1Api(client)

    async def renew_time() -> Any:
        return (await coordination.read_namespaced_lease(NAME, "kube-node-lease")
                ).spec.renew_time

    for _ in range(ticks):
        last = await renew_time()
        await eventually(lambda last=last: _later(renew_time, last), "the Lease renewed")


async def test_the_agent_follows_its_lcmmachine_through_a_watch(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    """With a poll far beyond the test, only the agent's watch of its
    LCMMachine can start the pass a new generation asks for (the loop reads
    the machine from that watch's cache, not with a GET per poll)."""
    custom = CustomObjectsApi(client)
    slow_poll = dataclasses.replace(TIMING, poll=3600.0)
    async with ready_agent(api_server, client, ns, root, slow_poll):
        changed = await custom.patch_namespaced_custom_object(
            "lcm.racksmith.io", "v1alpha1", ns, "lcmmachines", NAME,
            {"spec": {"clusterName": "demo-renamed"}},
            _content_type="application/merge-patch+json")
        generation = changed["metadata"]["generation"]

        async def observed() -> bool:
            status = (await get_lcm(custom, ns)).get("status") or {}
            return bool(status.get("observedGeneration") == generation)

        await eventually(observed, "the new generation observed without a poll")
