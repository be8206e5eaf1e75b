"""Controller: dedup, exclusion per key, results, errors, metrics, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import structlog
from prometheus_client import CollectorRegistry
from runtime_doubles import KEY, FakeSource, ScriptedReconciler, blocks_on, done, raises, returns

from racksmith.runtime import (
    Backoff,
    Controller,
    Done,
    FakeClock,
    ObjectKey,
    PermanentError,
    RequeueAfter,
    Result,
    RuntimeMetrics,
    TemporaryError,
)


def make(
    clock: FakeClock,
    reconciler: ScriptedReconciler,
    source: FakeSource,
    workers: int = 1,
) -> Controller:
    return Controller(
        "hosts",
        source,
        reconciler,
        workers=workers,
        clock=clock,
        metrics=RuntimeMetrics(CollectorRegistry()),
        backoff=lambda: Backoff(base=0.5, cap=300, random=lambda: 0.5),  # no jitter
    )


async def stop(controller: Controller, task: asyncio.Task[None]) -> None:
    await controller.stop(0)
    await task


async def test_a_key_emitted_ten_times_is_reconciled_once(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock)
    controller = make(clock, reconciler, FakeSource([KEY] * 10), workers=4)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    assert [k for k, _ in reconciler.calls] == [KEY]
    assert controller.metrics.count("hosts", "done") == 1
    await stop(controller, task)


async def test_a_key_re_added_during_reconcile_runs_again_after_never_concurrently(
    clock: FakeClock,
) -> None:
    gate = asyncio.Event()
    reconciler = ScriptedReconciler(clock, blocks_on(gate), done)
    source = FakeSource([KEY])
    controller = make(clock, reconciler, source, workers=4)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    source.emit(KEY)
    source.emit(KEY)
    await clock.settle()
    assert len(reconciler.calls) == 1  # three idle workers, yet no second reconcile
    gate.set()
    await clock.settle()
    assert len(reconciler.calls) == 2
    assert reconciler.max_in_flight == 1
    await stop(controller, task)


async def test_different_keys_are_reconciled_in_parallel(clock: FakeClock) -> None:
    gate = asyncio.Event()
    reconciler = ScriptedReconciler(clock, blocks_on(gate))
    keys = [ObjectKey("default", f"h{i}") for i in range(3)]
    controller = make(clock, reconciler, FakeSource(keys), workers=3)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    assert sorted(k for k, _ in reconciler.calls) == keys
    gate.set()
    await clock.settle()
    assert sorted(reconciler.finished) == keys
    await stop(controller, task)


async def test_requeue_after_is_honoured_on_the_clock(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock, returns(RequeueAfter(30)), done)
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    start = clock.now()
    await clock.settle()
    await clock.advance(29.9)
    assert len(reconciler.calls) == 1
    await clock.advance(0.1)
    assert reconciler.times() == [start, start + 30]
    await clock.advance(1000)
    assert len(reconciler.calls) == 2
    assert controller.metrics.count("hosts", "requeue_after") == 1
    assert controller.metrics.count("hosts", "done") == 1
    await stop(controller, task)


async def test_a_reconcile_that_raises_is_retried_with_backoff_and_counted(
    clock: FakeClock,
) -> None:
    boom = raises(RuntimeError("BMC unreachable"))
    reconciler = ScriptedReconciler(clock, boom, boom, boom, done)
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    start = clock.now()
    await clock.settle()
    await clock.advance(100)
    assert reconciler.times() == [start, start + 0.5, start + 1.5, start + 3.5]
    metrics = controller.metrics
    assert metrics.error_count("hosts") == 3
    assert metrics.count("hosts", "error") == 3
    assert metrics.count("hosts", "done") == 1
    assert controller.queue.num_requeues(KEY) == 0  # success forgot the backoff
    await stop(controller, task)


async def test_backoff_restarts_after_a_success(clock: FakeClock) -> None:
    boom = raises(RuntimeError("x"))
    reconciler = ScriptedReconciler(clock, boom, boom, done, boom, done)
    source = FakeSource([KEY])
    controller = make(clock, reconciler, source)
    task = asyncio.create_task(controller.run())
    await clock.advance(10)
    assert len(reconciler.calls) == 3
    source.emit(KEY)
    before = clock.now()
    await clock.advance(10)
    assert reconciler.times()[3:] == [before, before + 0.5]
    await stop(controller, task)


async def test_temporary_error_with_delay_retries_after_that_delay(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock, raises(TemporaryError("wait", delay=7)), done)
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    start = clock.now()
    await clock.advance(100)
    assert reconciler.times() == [start, start + 7]
    assert controller.metrics.error_count("hosts") == 1
    await stop(controller, task)


async def test_temporary_error_without_delay_uses_backoff(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock, raises(TemporaryError("again")), done)
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    start = clock.now()
    await clock.advance(100)
    assert reconciler.times() == [start, start + 0.5]
    await stop(controller, task)


async def test_permanent_error_is_not_retried_until_the_object_changes(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock, raises(PermanentError("bad spec")), done)
    source = FakeSource([KEY])
    controller = make(clock, reconciler, source)
    task = asyncio.create_task(controller.run())
    await clock.advance(10_000)
    assert len(reconciler.calls) == 1
    assert controller.metrics.count("hosts", "permanent_error") == 1
    assert controller.metrics.error_count("hosts") == 1
    source.emit(KEY)  # the object changed: a watch event
    await clock.settle()
    assert len(reconciler.calls) == 2
    await stop(controller, task)


async def test_a_result_of_the_wrong_type_is_an_error(clock: FakeClock) -> None:
    async def bad(_: ObjectKey) -> Result:
        return None  # type: ignore[return-value]

    reconciler = ScriptedReconciler(clock, bad, done)
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    await clock.advance(1)
    assert len(reconciler.calls) == 2
    assert controller.metrics.count("hosts", "error") == 1
    await stop(controller, task)


async def test_logs_carry_controller_key_and_reconcile_id(clock: FakeClock) -> None:
    seen: list[dict[str, object]] = []

    async def capture(_: ObjectKey) -> Result:
        seen.append(dict(structlog.contextvars.get_contextvars()))
        return Done()

    reconciler = ScriptedReconciler(clock, capture)
    source = FakeSource([KEY])
    controller = make(clock, reconciler, source)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    source.emit(KEY)
    await clock.settle()
    assert [(s["controller"], s["key"]) for s in seen] == [("hosts", "default/host-0")] * 2
    assert seen[0]["reconcile_id"] != seen[1]["reconcile_id"]
    assert structlog.contextvars.get_contextvars() == {}
    await stop(controller, task)


async def test_metrics_report_duration_and_queue_depth(clock: FakeClock) -> None:
    async def slow(_: ObjectKey) -> Result:
        await clock.sleep(2)
        return Done()

    keys = [ObjectKey("", f"n{i}") for i in range(3)]
    reconciler = ScriptedReconciler(clock, slow)
    controller = make(clock, reconciler, FakeSource(keys))
    registry = controller.metrics.registry
    task = asyncio.create_task(controller.run())
    await clock.settle()
    depth = registry.get_sample_value("racksmith_workqueue_depth", {"controller": "hosts"})
    assert depth == 2  # one in flight, two waiting
    await clock.advance(10)
    labels = {"controller": "hosts"}
    assert registry.get_sample_value("racksmith_reconcile_duration_seconds_count", labels) == 3
    assert registry.get_sample_value("racksmith_reconcile_duration_seconds_sum", labels) == 6
    assert registry.get_sample_value("racksmith_workqueue_depth", labels) == 0
    assert registry.get_sample_value("racksmith_workqueue_adds_total", labels) == 3
    await stop(controller, task)


async def test_stop_waits_for_in_flight_reconciles_and_takes_no_new_work(
    clock: FakeClock,
) -> None:
    gate = asyncio.Event()
    reconciler = ScriptedReconciler(clock, blocks_on(gate), done)
    source = FakeSource([KEY, ObjectKey("default", "other")])
    controller = make(clock, reconciler, source)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    stopping = asyncio.create_task(controller.stop(grace=30))
    await clock.advance(10)
    assert not stopping.done() and controller.is_running
    gate.set()
    await clock.settle()
    assert stopping.done() and task.done()
    assert reconciler.finished == [KEY]  # finished, not cancelled; "other" never started
    assert not controller.is_running
    assert source.closed  # the watch is dropped at once


async def test_stop_cancels_in_flight_reconciles_after_the_grace_period(
    clock: FakeClock,
) -> None:
    reconciler = ScriptedReconciler(clock, blocks_on(asyncio.Event()))
    controller = make(clock, reconciler, FakeSource([KEY]))
    task = asyncio.create_task(controller.run())
    await clock.settle()
    stopping = asyncio.create_task(controller.stop(grace=5))
    await clock.advance(4.9)
    assert not stopping.done()
    await clock.advance(0.1)
    assert stopping.done() and task.done()
    assert reconciler.finished == []
    assert controller.metrics.count("hosts", "error") == 0  # cancellation is no error


async def test_a_controller_can_run_again_after_stop(clock: FakeClock) -> None:
    reconciler = ScriptedReconciler(clock)
    source = FakeSource([KEY])
    controller = make(clock, reconciler, source)
    task = asyncio.create_task(controller.run())
    await clock.settle()
    await stop(controller, task)
    assert not controller.is_ready
    task = asyncio.create_task(controller.run())
    await clock.settle()
    assert len(reconciler.calls) == 2  # the new run starts with a fresh list
    source.emit(KEY)
    await clock.settle()
    assert len(reconciler.calls) == 3
    assert controller.is_ready
    await stop(controller, task)


async def test_a_failing_source_is_restarted_with_backoff(clock: FakeClock) -> None:
    class Flaky:
        def __init__(self) -> None:
            self.runs = 0

        @property
        def has_synced(self) -> bool:
            return self.runs > 1

        async def keys(self) -> AsyncIterator[ObjectKey]:
            self.runs += 1
            if self.runs == 1:
                raise ConnectionError("down")
            yield KEY
            await asyncio.Event().wait()

    reconciler = ScriptedReconciler(clock)
    source = Flaky()
    controller = Controller(
        "hosts", source, reconciler, clock=clock, source_retry=Backoff(random=lambda: 0.5)
    )
    task = asyncio.create_task(controller.run())
    await clock.settle()
    assert reconciler.calls == [] and not controller.is_ready
    await clock.advance(0.5)
    assert [k for k, _ in reconciler.calls] == [KEY]
    assert controller.is_ready
    await stop(controller, task)
