"""The update controller's node flow is injected: built by the factory the
composition root passes (with the controller's clock and node-flow waits),
or given ready-made; never both, never neither."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.clock import Clock, FakeClock
from racksmith.controllers.update import UpdateTimings, update_controller
from racksmith.planners.maintenance import MaintenanceTimings, NodeJob, NodeProgress


class Flow:
    async def advance(self, job: NodeJob) -> NodeProgress:
        raise NotImplementedError

    async def finish(self, job: NodeJob) -> None:
        raise NotImplementedError

    async def sweep(self, owners_alive: set[str]) -> list[str]:
        return []


async def test_the_factory_gets_the_client_the_clock_and_the_node_flow_waits() -> None:
    client = ApiClient()
    clock = FakeClock()
    timings = UpdateTimings(node_flow=MaintenanceTimings(poll=0.5))
    calls: list[tuple[Any, Clock, MaintenanceTimings]] = []
    flow = Flow()

    def factory(api_client: Any, *, clock: Clock, timings: MaintenanceTimings,
                plane: Any = None) -> Flow:
        calls.append((api_client, clock, timings))
        return flow

    try:
        controller = update_controller(client, node_flow=factory, clock=clock, timings=timings)
    finally:
        await client.close()
    assert calls == [(client, clock, timings.node_flow)]
    assert controller.reconciler.flow is flow  # type: ignore[attr-defined]


async def test_a_ready_flow_is_used_as_given() -> None:
    client = ApiClient()
    flow = Flow()
    try:
        controller = update_controller(client, node_maintenance=flow)
    finally:
        await client.close()
    assert controller.reconciler.flow is flow  # type: ignore[attr-defined]


@pytest.mark.parametrize("given", ["neither", "both"])
async def test_exactly_one_flow_source(given: str) -> None:
    client = ApiClient()
    kwargs: dict[str, Any] = {}
    if given == "both":
        kwargs = {"node_maintenance": Flow(), "node_flow": lambda *_a, **_k: Flow()}
    try:
        with pytest.raises(TypeError, match="exactly one"):
            update_controller(client, **kwargs)
    finally:
        await client.close()
