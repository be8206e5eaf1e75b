"""Manager: readiness, /metrics, graceful shutdown, leader hand-over."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry
from runtime_doubles import KEY, FakeSource, ScriptedReconciler, blocks_on

from racksmith.election import PartitionedLeaseStore
from racksmith.runtime import Controller, FakeClock, InMemoryLeaseStore, Manager


def manager(
    clock: FakeClock,
    reconciler: ScriptedReconciler,
    source: FakeSource,
    *,
    identity: str = "a",
    store: object = None,
) -> Manager:
    controller = Controller("hosts", source, reconciler, clock=clock)
    return Manager(
        None,
        [controller],
        leader_election=store is not None,
        identity=identity,
        lease_store=store,  # type: ignore[arg-type]
        clock=clock,
        registry=CollectorRegistry(),
        shutdown_timeout=30,
    )


async def test_runs_controllers_and_is_ready_once_sources_synced(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock)
    m = manager(clock, reconciler, FakeSource([KEY]))
    assert not m.ready
    task = asyncio.create_task(m.run())
    await clock.settle()
    assert m.ready and m.is_leader
    assert len(reconciler.calls) == 1
    text = m.metrics_text().decode()
    assert 'racksmith_reconcile_total{controller="hosts",result="done"} 1.0' in text
    assert 'racksmith_workqueue_depth{controller="hosts"} 0.0' in text
    assert "racksmith_reconcile_duration_seconds_bucket" in text
    await m.stop()
    assert task.done() and not m.ready and not m.is_running


async def test_graceful_shutdown_waits_for_in_flight_work(clock: FakeClock) -> None:
    gate = asyncio.Event()
    reconciler = ScriptedReconciler(clock, blocks_on(gate))
    m = manager(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(m.run())
    await clock.settle()
    stopping = asyncio.create_task(m.stop())
    await clock.advance(20)
    assert not stopping.done()
    gate.set()
    await clock.settle()
    assert stopping.done() and task.done()
    assert reconciler.finished == [KEY]


async def test_graceful_shutdown_gives_up_after_the_timeout(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock, blocks_on(asyncio.Event()))
    m = manager(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(m.run())
    await clock.settle()
    stopping = asyncio.create_task(m.stop())
    await clock.advance(29)
    assert not stopping.done()
    await clock.advance(1)
    assert stopping.done() and task.done()
    assert reconciler.finished == []


async def test_leader_hand_over_on_graceful_stop(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    rec_a, rec_b = ScriptedReconciler(clock), ScriptedReconciler(clock)
    a = manager(clock, rec_a, FakeSource([KEY]), identity="a", store=store)
    b = manager(clock, rec_b, FakeSource([KEY]), identity="b", store=store)
    task_a = asyncio.create_task(a.run())
    await clock.settle()
    task_b = asyncio.create_task(b.run())
    await clock.advance(60)
    assert a.is_leader and a.ready and len(rec_a.calls) == 1
    assert not b.is_leader and not b.ready and rec_b.calls == []
    assert store.record is not None and store.record.holder_identity == "a"

    await a.stop()  # releases the lease
    assert task_a.done()
    assert store.record.holder_identity == ""
    await clock.advance(2.5)  # one retry period (with jitter), far less than the lease
    assert b.is_leader and b.ready and len(rec_b.calls) == 1
    assert store.record.holder_identity == "b"
    assert store.record.lease_transitions == 1
    registry = b.registry
    assert registry.get_sample_value("racksmith_leader_is_leader", {"lease": b.lease_name}) == 1
    await b.stop()
    assert task_b.done()


async def test_leader_hand_over_when_the_leader_is_cut_off(clock: FakeClock) -> None:
    store = InMemoryLeaseStore()
    view_a = PartitionedLeaseStore(store)
    gate = asyncio.Event()
    rec_a = ScriptedReconciler(clock, blocks_on(gate))
    rec_b = ScriptedReconciler(clock)
    a = manager(clock, rec_a, FakeSource([KEY]), identity="a", store=view_a)
    b = manager(clock, rec_b, FakeSource([KEY]), identity="b", store=store)
    task_a = asyncio.create_task(a.run())
    await clock.settle()
    task_b = asyncio.create_task(b.run())
    await clock.advance(5)
    assert a.is_leader and rec_a.calls and not b.is_leader

    view_a.unavailable = True  # a can no longer renew
    await clock.advance(10)  # renew deadline passed
    assert not a.is_leader
    controller_a = a.controllers[0]
    assert not controller_a.is_running  # stopped at once, in-flight work cancelled
    assert rec_a.finished == []
    assert not b.is_leader  # the lease has not expired from b's point of view yet

    await clock.advance(10)  # b saw the last renewal < 15 s ago... now it has expired
    assert b.is_leader and len(rec_b.calls) == 1
    assert store.record is not None
    assert store.record.holder_identity == "b"
    assert store.record.lease_transitions == 1

    view_a.unavailable = False  # a is back: it campaigns, but b holds the lease
    await clock.advance(30)
    assert not a.is_leader and b.is_leader
    await a.stop()
    await b.stop()
    assert task_a.done() and task_b.done()
    assert store.record.holder_identity == ""  # b released it; a never held it again


async def test_http_app_serves_metrics_and_probes(clock: FakeClock) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    reconciler = ScriptedReconciler(clock)
    m = manager(clock, reconciler, FakeSource([KEY]))
    async with TestClient(TestServer(m.http_app())) as client:
        assert (await client.get("/readyz")).status == 503
        task = asyncio.create_task(m.run())
        await clock.settle()
        assert (await client.get("/readyz")).status == 200
        assert (await client.get("/healthz")).status == 200
        response = await client.get("/metrics")
        assert response.status == 200
        assert "racksmith_reconcile_total" in await response.text()
        await m.stop()
        await task
