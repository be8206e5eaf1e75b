"""One controller: sources → work queue → N workers → ``reconcile(key)``.

The controller owns its work queue and worker tasks. Sources feed keys into
the queue (de-duplicated); each worker takes a key, calls the reconciler with
structlog context bound (``controller``, ``key``, ``reconcile_id``; bound as
contextvars so the reconciler's own log lines carry them too) and acts on the
result (see ``racksmith.runtime.result``). A key is never reconciled by two
workers at once. Metrics go to a ``RuntimeMetrics`` on an explicit registry.

``run()`` can be called again after ``stop()`` (the manager does so when
leadership comes back); each run gets a fresh queue and fresh backoffs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

import structlog

from racksmith.clock import Clock, SystemClock, wait_event
from racksmith.runtime.errors import ApiError, Conflict
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.metrics import RuntimeMetrics
from racksmith.runtime.queue import Backoff, QueueShutDown, WorkQueue
from racksmith.runtime.result import Done, PermanentError, RequeueAfter, Result, TemporaryError
from racksmith.runtime.source import Source


class Reconciler(Protocol):
    """Brings the world in line with one object. Must be idempotent: it may be
    called any number of times for the same key, and must re-read the state it
    needs (the object may be gone: then clean up and return ``Done()``)."""

    async def reconcile(self, key: ObjectKey) -> Result: ...


class Controller:
    """Runs ``reconciler`` over the keys of ``sources`` with ``workers`` tasks."""

    def __init__(
        self,
        name: str,
        sources: Source | Sequence[Source],
        reconciler: Reconciler,
        *,
        workers: int = 1,
        clock: Clock | None = None,
        metrics: RuntimeMetrics | None = None,
        logger: Any = None,
        backoff: Callable[[], Backoff[ObjectKey]] = Backoff,
        source_retry: Backoff[str] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.sources: list[Source] = list(sources) if isinstance(sources, Sequence) else [sources]
        self.reconciler = reconciler
        self.workers = workers
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.metrics = metrics if metrics is not None else RuntimeMetrics()
        log = logger if logger is not None else structlog.get_logger("racksmith.runtime")
        self._log = log.bind(controller=name)
        self._new_backoff = backoff
        self._source_retry: Backoff[str] = (
            source_retry if source_retry is not None else Backoff(cap=30.0)
        )
        self._queue: WorkQueue[ObjectKey] = WorkQueue(self.clock, backoff())
        self._workers: list[asyncio.Task[None]] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._running = False
        self._stopped = asyncio.Event()
        self._stopped.set()
        self.attach_metrics(self.metrics)

    def attach_metrics(self, metrics: RuntimeMetrics) -> None:
        """Report to ``metrics`` (the manager calls this to share its registry)."""
        self.metrics = metrics
        metrics.init_controller(self.name)
        metrics.track_queue_depth(self.name, lambda: len(self._queue))

    @property
    def queue(self) -> WorkQueue[ObjectKey]:
        """The current run's queue (for metrics and tests)."""
        return self._queue

    @property
    def is_running(self) -> bool:
        return self._running

    @property
    def has_synced(self) -> bool:
        """All sources have emitted their initial state."""
        return all(source.has_synced for source in self.sources)

    @property
    def is_ready(self) -> bool:
        """Running, with workers started and every source synced."""
        return self._running and self.has_synced

    def start(self) -> None:
        """Start sources and workers now (needs a running loop); see ``wait``."""
        if self._running:
            raise RuntimeError(f"controller {self.name} is already running")
        queue: WorkQueue[ObjectKey] = WorkQueue(self.clock, self._new_backoff())
        self._queue = queue
        self._stopped.clear()
        self._running = True
        # Each source's first iteration begins now, not when its pump task
        # first runs, so ``has_synced`` already describes this run.
        pumps = [
            asyncio.create_task(self._pump(source, queue, source.keys()))
            for source in self.sources
        ]
        self._workers = [
            asyncio.create_task(self._work(queue), name=f"{self.name}-worker-{i}")
            for i in range(self.workers)
        ]
        self._supervisor = asyncio.create_task(self._supervise(queue, pumps, self._workers))
        self._log.info("controller started", workers=self.workers)

    async def wait(self) -> None:
        """Return once the controller has stopped."""
        await self._stopped.wait()

    async def run(self) -> None:
        """Start, and return once stopped; cancelling it cancels in-flight work."""
        self.start()
        try:
            await self._stopped.wait()
        except asyncio.CancelledError:
            self._queue.shutdown()
            for task in self._workers:
                task.cancel()
            raise

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking work; wait up to ``grace`` clock seconds (None:
        forever, 0: not at all) for in-flight reconciles, then cancel them.
        Returns once stopped. Idempotent."""
        self._queue.shutdown()
        if not self._running:
            return
        if grace == 0 or not await wait_event(self.clock, self._stopped, grace):
            if self._queue.processing:
                self._log.warning(
                    "cancelling in-flight reconciles", grace=grace, count=self._queue.processing
                )
            for task in self._workers:
                task.cancel()
            await self._stopped.wait()

    async def _supervise(
        self,
        queue: WorkQueue[ObjectKey],
        pumps: list[asyncio.Task[None]],
        workers: list[asyncio.Task[None]],
    ) -> None:
        try:
            await asyncio.gather(*workers, return_exceptions=True)
        finally:
            queue.shutdown()
            for task in [*pumps, *workers]:
                task.cancel()
            await asyncio.gather(*pumps, *workers, return_exceptions=True)
            self._running = False
            self._stopped.set()
            self._log.info("controller stopped")

    async def _pump(
        self, source: Source, queue: WorkQueue[ObjectKey], first: AsyncIterator[ObjectKey]
    ) -> None:
        adds = self.metrics.queue_adds.labels(controller=self.name)
        pending: AsyncIterator[ObjectKey] | None = first
        while not queue.is_shut_down:
            keys, pending = (pending if pending is not None else source.keys()), None
            try:
                async for key in keys:
                    adds.inc()
                    queue.add(key)
                return  # a finite source is exhausted
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = self._source_retry.next_delay("pump")
                self._log.exception("source failed, restarting", retry_in=round(delay, 3))
                await self.clock.sleep(delay)
            finally:
                # Close the generator now (not at garbage collection) so a
                # watch connection is dropped as soon as the controller stops.
                aclose = getattr(keys, "aclose", None)
                if aclose is not None:
                    await aclose()

    async def _work(self, queue: WorkQueue[ObjectKey]) -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            try:
                await self._process(queue, key)
            finally:
                queue.done(key)

    async def _process(self, queue: WorkQueue[ObjectKey], key: ObjectKey) -> None:
        reconcile_id = uuid.uuid4().hex[:16]
        log = self._log.bind(key=str(key), reconcile_id=reconcile_id)
        started = self.clock.now()
        outcome = "error"
        with structlog.contextvars.bound_contextvars(
            controller=self.name, key=str(key), reconcile_id=reconcile_id
        ):
            try:
                result = await self.reconciler.reconcile(key)
                if isinstance(result, Done):
                    outcome = "done"
                    queue.forget(key)
                elif isinstance(result, RequeueAfter):
                    outcome = "requeue_after"
                    queue.forget(key)
                    queue.add_after(key, result.seconds)
                else:
                    raise TypeError(f"reconcile returned {result!r}, not Done/RequeueAfter")
                log.debug("reconciled", result=outcome)
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            except Conflict as exc:
                # Lost an optimistic-concurrency race: decide again from a
                # fresh read, soon (not an error; no reconciler catches it).
                outcome = "conflict"
                delay = queue.add_rate_limited(key)
                log.debug("conflicting write, deciding again", error=exc.message,
                          retry_in=round(delay, 3))
            except PermanentError as exc:
                outcome = "permanent_error"
                queue.forget(key)
                log.error("reconcile failed permanently", error=exc.message)
            except TemporaryError as exc:
                if exc.delay is not None:
                    queue.add_after(key, exc.delay)
                    delay = exc.delay
                else:
                    delay = queue.add_rate_limited(key)
                self.metrics.retries.labels(controller=self.name).inc()
                log.warning("reconcile failed, will retry", error=exc.message, retry_in=delay)
            except ApiError as exc:
                delay = queue.add_rate_limited(key)
                self.metrics.retries.labels(controller=self.name).inc()
                log.warning("API request failed, will retry", error=str(exc),
                            retry_in=round(delay, 3))
            except Exception:
                delay = queue.add_rate_limited(key)
                self.metrics.retries.labels(controller=self.name).inc()
                log.exception("reconcile raised, will retry", retry_in=round(delay, 3))
            finally:
                elapsed = self.clock.now() - started
                if outcome != "cancelled":
                    self.metrics.reconciles.labels(controller=self.name, result=outcome).inc()
                    self.metrics.duration.labels(controller=self.name).observe(elapsed)
                    if outcome in ("error", "permanent_error"):  # a conflict is not one
                        self.metrics.errors.labels(controller=self.name).inc()
