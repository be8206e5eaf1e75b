"""The manager: runs a process's controllers, only while it leads if leader
election is on, and owns the process-wide pieces around them: the metrics
registry and its ``/metrics`` text, readiness, and graceful shutdown.

Graceful shutdown (``stop()``): controllers stop taking work, in-flight
reconciles get ``shutdown_timeout`` clock seconds to finish (then are
cancelled), and the Lease is released so a standby takes over at once. On
*loss* of leadership the controllers are stopped at once (another process may
already be acting) and the manager campaigns again.

Called by the composition root (``racksmith.app``) and by tests.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Awaitable, Sequence
from typing import Any

import structlog
from aiohttp import web
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from racksmith.clock import Clock, SystemClock
from racksmith.election import LeaderElector, LeaseStore
from racksmith.runtime.controller import Controller
from racksmith.runtime.leader import KubeLeaseStore
from racksmith.runtime.metrics import RuntimeMetrics


def default_identity() -> str:
    """A leader identity unique to this process: ``<hostname>_<random>``."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Manager:
    """Runs ``controllers`` (see the module doc)."""

    def __init__(
        self,
        api_client: ApiClient | None,
        controllers: Sequence[Controller],
        *,
        leader_election: bool = False,
        identity: str | None = None,
        lease_store: LeaseStore | None = None,
        lease_namespace: str = "default",
        lease_name: str = "racksmith-controllers",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        metrics: RuntimeMetrics | None = None,
        shutdown_timeout: float = 30.0,
        logger: Any = None,
    ) -> None:
        names = [c.name for c in controllers]
        if len(set(names)) != len(names):
            raise ValueError(f"controller names must be unique: {names}")
        self.controllers = list(controllers)
        self.clock: Clock = clock if clock is not None else SystemClock()
        if metrics is None:
            metrics = RuntimeMetrics(registry)
        self.metrics = metrics
        self.registry = metrics.registry
        for controller in self.controllers:
            if controller.metrics.registry is not self.registry:
                controller.attach_metrics(metrics)
        self.identity = identity or default_identity()
        self.shutdown_timeout = shutdown_timeout
        log = logger if logger is not None else structlog.get_logger("racksmith.runtime")
        self._log = log.bind(identity=self.identity)
        self.lease_name = lease_name
        self.elector: LeaderElector | None = None
        if leader_election:
            if lease_store is None:
                if api_client is None:
                    raise ValueError("leader election needs an api_client or a lease_store")
                lease_store = KubeLeaseStore(api_client, lease_namespace, lease_name)
            self.elector = LeaderElector(
                lease_store,
                self.identity,
                clock=self.clock,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                logger=log,
            )
        self._stop_requested = asyncio.Event()
        self._finished = asyncio.Event()
        self._finished.set()
        self._leading = False

    @property
    def is_leader(self) -> bool:
        """True while controllers run (always, once started, without election)."""
        return self._leading

    @property
    def ready(self) -> bool:
        """All controllers run with workers started and sources synced."""
        return self._leading and all(c.is_ready for c in self.controllers)

    @property
    def is_running(self) -> bool:
        return not self._finished.is_set()

    def metrics_text(self) -> bytes:
        """The Prometheus text exposition of this manager's registry."""
        return bytes(generate_latest(self.registry))

    async def run(self) -> None:
        """Run until ``stop()``; cancellation stops controllers without waiting."""
        if self.is_running:
            raise RuntimeError("manager is already running")
        self._stop_requested.clear()
        self._finished.clear()
        try:
            if self.elector is None:
                await self._lead(None)
                return
            while not self._stop_requested.is_set():
                if not await self._unless_stopped(self.elector.acquire()):
                    break
                hold = asyncio.create_task(self.elector.hold())
                try:
                    await self._lead(hold)
                finally:
                    hold.cancel()
                    await asyncio.gather(hold, return_exceptions=True)
        finally:
            self._set_leading(False)
            if self.elector is not None and self.elector.is_leader:
                await self.elector.release()
            self._finished.set()

    async def stop(self) -> None:
        """Graceful shutdown; returns once ``run()`` has finished."""
        self._stop_requested.set()
        await self._finished.wait()

    def http_app(self) -> web.Application:
        """``/metrics``, ``/healthz`` and ``/readyz`` for Prometheus and probes."""

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(
                body=self.metrics_text(), headers={"Content-Type": CONTENT_TYPE_LATEST}
            )

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(
                text="ok" if self.is_running else "stopped", status=200 if self.is_running else 503
            )

        async def readyz(_: web.Request) -> web.Response:
            return web.Response(
                text="ok" if self.ready else "not ready", status=200 if self.ready else 503
            )

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        return app

    async def serve_http(self, host: str, port: int) -> web.AppRunner:
        """Serve ``http_app()``; the caller ``await runner.cleanup()`` at the end."""
        runner = web.AppRunner(self.http_app())
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        return runner

    async def _lead(self, hold: asyncio.Task[None] | None) -> None:
        """Run the controllers until stop is requested or ``hold`` ends (lost)."""
        self._set_leading(True)
        for controller in self.controllers:
            controller.start()
        stop_wait = asyncio.create_task(self._stop_requested.wait())
        waits: set[asyncio.Future[Any]] = {stop_wait}
        if hold is not None:
            waits.add(hold)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            lost = hold is not None and hold.done() and not self._stop_requested.is_set()
            if lost:
                self._log.warning("leadership lost, stopping controllers")
            task = asyncio.current_task()
            cancelled = task is not None and task.cancelling() > 0
            grace = 0 if lost or cancelled else self.shutdown_timeout
            await asyncio.gather(*(c.stop(grace) for c in self.controllers))
            self._set_leading(False)

    async def _unless_stopped(self, work: Awaitable[None]) -> bool:
        """Await ``work`` unless stop is requested first (then cancel it)."""
        task = asyncio.ensure_future(work)
        stop_wait = asyncio.create_task(self._stop_requested.wait())
        try:
            await asyncio.wait({task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, stop_wait, return_exceptions=True)
        return task.done() and not task.cancelled() and task.exception() is None

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        self.metrics.leader.labels(lease=self.lease_name).set(1 if leading else 0)
