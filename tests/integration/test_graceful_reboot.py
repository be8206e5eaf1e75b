"""The GracefulRebootRequest controller against the real API server.

Machines, BareMetalHosts, LCMMachines and Nodes are made by hand; the test
plays the BareMetalHost controller and the kubelet: when a host carries the
reboot annotation it removes it and gives the Node a new boot ID. The
controller is restarted while the second machine reboots: nothing is done
twice (each host power-cycled once), and a Done machine is never rebooted
again. The server tests share the module's API server, each in its own
namespace (``tests.harness``); they are marked for the module's loop one by
one, as the last test needs no loop at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.maintenance import (
    GracefulRebootTimings,
    MaintenanceTimings,
    graceful_reboot_controller,
    reboot_order,
)
from racksmith.controllers.maintenance.reboot import CONTROLLER_NAME
from racksmith.kinds.cluster import Machine
from racksmith.runtime import Manager
from tests.harness.controllers import finished_reconciles, managed, reconciled_again
from tests.harness.wait import eventually
from tests.integration.test_node_maintenance import ANN, LCM, METAL, REBOOT_KEY, World

REBOOT_ANNOTATION = REBOOT_KEY
SHARED = pytest.mark.asyncio(loop_scope="module")
# Small waits; the reboot retry stays the default (a reboot asked again would be a
# second power cycle, which the test counts).
TIMINGS = GracefulRebootTimings(poll=0.3, node_flow=MaintenanceTimings(
    poll=0.3, lock_retry=0.3, eviction_backoff_base=0.1, eviction_backoff_cap=0.3))


@contextlib.asynccontextmanager
async def running(client: ApiClient) -> AsyncIterator[Manager]:
    async with managed(client, [graceful_reboot_controller(client, timings=TIMINGS)],
                       identity="reboot-test") as manager:
        yield manager


class Hosts:
    """Plays the BareMetalHost controller and the kubelet's boot ID."""

    def __init__(self, world: World, hosts: dict[str, str]) -> None:
        self.world = world
        self.hosts = hosts  # host → node
        self.cycles: list[str] = []
        self.held: set[str] = set()

    async def run(self) -> None:
        while True:
            for host, node in self.hosts.items():
                if host in self.held:
                    continue
                if REBOOT_ANNOTATION in await self.world.bmh_annotations(host):
                    await self.world.power_cycle(host)
                    await eventually(lambda h=host: self.world.released(h),  # type: ignore[misc]
                                     "the flow to release its reboot key")
                    await self.world.power_cycle(host, on=True)
                    self.cycles.append(host)
                    await self.world.kubelet(node, boot_id=str(uuid.uuid4()))
            await asyncio.sleep(0.05)


async def request_status(world: World) -> dict[str, Any]:
    obj = await world.get(LCM, "gracefulrebootrequests", "demo")
    return dict((obj or {}).get("status") or {})


@SHARED
async def test_machines_reboot_one_by_one_in_upgrade_order(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.machine("w-a", "h-a", upgrade_index=2)
    await world.machine("w-b", "h-b", upgrade_index=1)
    await world.machine("cp-1", "h-cp", roles=["master", "etcd"])
    await world.pod("web", "w-b")
    hosts = Hosts(world, {"h-a": "w-a", "h-b": "w-b", "h-cp": "cp-1"})
    hosts.held.add("h-b")
    player = asyncio.create_task(hosts.run())
    try:
        await world.make(LCM, "gracefulrebootrequests", "GracefulRebootRequest", "demo", {})
        async with running(client):
            async def machine_state(name: str, state: str) -> bool:
                status = await request_status(world)
                return any(m["name"] == name and m.get("state") == state
                           for m in status.get("machines") or [])
            await eventually(lambda: machine_state("cp-1", "Done"), "cp-1 rebooted")
            await eventually(lambda: machine_state("w-b", "Rebooting"), "w-b rebooting")
            status = await request_status(world)
            assert status["phase"] == "InProgress"
            assert [m["name"] for m in status["machines"]] == ["cp-1", "w-b", "w-a"]
            nmr = await world.nmr("w-b")
            assert nmr is not None
            assert nmr["metadata"]["labels"][f"{ANN}owner"] == f"reboot.{ns}.demo"
            assert await world.nmr("cp-1") is None
            node = await world.node("w-b")
            assert node is not None and (node.get("spec") or {}).get("unschedulable") is True
            assert await world.pods_on("w-b") == set()
        # Restarted while w-b reboots: the reboot is not asked again.
        async with running(client) as manager:
            # the new controller looks at the world while w-b is still held
            await reconciled_again(manager.metrics, CONTROLLER_NAME, "a first", since=0, more=1)
            hosts.held.clear()

            async def completed() -> bool:
                return (await request_status(world)).get("phase") == "Completed"
            await eventually(completed, "the request completed")
            status = await request_status(world)
            assert [(m["name"], m["state"], m["progress"]) for m in status["machines"]] == [
                ("cp-1", "Done", 100), ("w-b", "Done", 100), ("w-a", "Done", 100)]
            assert all(m.get("startedAt") and m.get("finishedAt") for m in status["machines"])
            assert hosts.cycles == ["h-cp", "h-b", "h-a"]
            for name in ("cp-1", "w-b", "w-a"):
                assert await world.nmr(name) is None
                node = await world.node(name)
                assert node is not None and not (node.get("spec") or {}).get("unschedulable")
            conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
            assert conds == {"Blocked": "False", "LockFailed": "False"}

            # Done machines are never rebooted again: the reconcile the edit
            # wakes reads the Completed request and asks nothing.
            before = finished_reconciles(manager.metrics, CONTROLLER_NAME)
            await world.patch(LCM, "gracefulrebootrequests", "demo",
                              {"metadata": {"annotations": {"touch": "1"}}})
            await reconciled_again(manager.metrics, CONTROLLER_NAME, "the edit", since=before,
                                   more=1)
            for host in ("h-cp", "h-b", "h-a"):
                assert REBOOT_ANNOTATION not in await world.bmh_annotations(host)
            assert hosts.cycles == ["h-cp", "h-b", "h-a"]
            assert await world.nmr("cp-1") is None
    finally:
        player.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await player


@SHARED
async def test_listed_machines_only_and_missing_ones(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    await world.machine("w-a", "h-a")
    await world.machine("w-b", "h-b")
    hosts = Hosts(world, {"h-a": "w-a", "h-b": "w-b"})
    player = asyncio.create_task(hosts.run())
    try:
        await world.make(LCM, "gracefulrebootrequests", "GracefulRebootRequest", "demo",
                           {"machines": ["w-b", "nope"]})
        async with running(client):
            async def settled() -> bool:
                return (await request_status(world)).get("phase") == "Failed"
            await eventually(settled, "the request settled")
            status = await request_status(world)
            assert [(m["name"], m.get("state")) for m in status["machines"]] == [
                ("w-b", "Done"), ("nope", "NotFound")]
            assert hosts.cycles == ["h-b"]
            bmh = await world.get(METAL, "baremetalhosts", "h-a")
            assert bmh is not None
    finally:
        player.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await player


def test_reboot_order() -> None:
    def m(name: str, roles: list[str], index: int | None = None) -> Machine:
        spec: dict[str, Any] = {"clusterName": "demo", "roles": roles}
        if index is not None:
            spec["upgradeIndex"] = index
        return Machine.model_validate({"metadata": {"name": name, "namespace": "default"},
                                       "spec": spec})
    machines = [m("w-z", ["node"]), m("w-y", ["node"], 5), m("etcd-2", ["etcd"]),
                m("cp-1", ["master"], 9), m("w-x", ["node"], 1)]
    assert reboot_order(machines, []) == ["cp-1", "etcd-2", "w-x", "w-y", "w-z"]
    assert reboot_order(machines, ["w-z", "cp-1", "gone"]) == ["cp-1", "w-z"]
