"""Running controllers for the length of a block.

Owns how a test starts the controllers it exercises and how they stop:
:func:`running` starts bare :class:`Controller` objects, :func:`managing`
runs a :class:`Manager` (:func:`managed` builds one first). Each waits
(bounded) until everything is ready -- workers started, sources listed --
before the block runs, and stops everything when the block ends, also when
it fails: gracefully and bounded for a manager, with ``grace`` for bare
controllers. A test on a shared server relies on that: when it ends, none of
its controllers writes any more. :func:`reconciled_again` waits for a
controller to look again, :class:`ReconcileSpy` for it to look at one object
again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from kubernetes_asyncio.client import ApiClient

from racksmith.runtime import Controller, Manager
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.metrics import RESULTS, RuntimeMetrics
from racksmith.runtime.result import Result
from tests.harness.wait import WAIT, eventually


@contextlib.asynccontextmanager
async def running(*controllers: Controller, grace: float = 0.0) -> AsyncIterator[None]:
    """Start ``controllers``, wait until they are ready, stop them at the end."""
    try:
        for ctrl in controllers:
            ctrl.start()
        await eventually(lambda: all(c.is_ready for c in controllers), "controllers ready")
        yield
    finally:
        for ctrl in controllers:
            if ctrl.is_running:
                await ctrl.stop(grace=grace)


@contextlib.asynccontextmanager
async def managing(manager: Manager, *, wait_ready: bool = True
                   ) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``manager`` in a task (waiting until it is ready, unless told not
    to); stop it gracefully (bounded) at the end."""
    task = asyncio.create_task(manager.run(), name=f"manager-{manager.identity}")
    try:
        if wait_ready:
            await eventually(lambda: manager.ready or task.done(),
                             f"{manager.identity} ready")
            if task.done():
                task.result()
                raise AssertionError(f"manager {manager.identity} ended before it was ready")
        yield task
    finally:
        async with asyncio.timeout(WAIT):
            await manager.stop()
            await task


@contextlib.asynccontextmanager
async def managed(client: ApiClient, controllers: Sequence[Controller], *, identity: str,
                  shutdown_timeout: float = 10, **kw: Any) -> AsyncIterator[Manager]:
    """A :class:`Manager` of ``controllers`` running for the block (see :func:`managing`)."""
    manager = Manager(client, list(controllers), identity=identity,
                      shutdown_timeout=shutdown_timeout, **kw)
    async with managing(manager):
        yield manager


def finished_reconciles(metrics: RuntimeMetrics, controller: str) -> float:
    """The reconciles ``controller`` has finished, whatever their outcome."""
    return sum(metrics.count(controller, result) for result in RESULTS)


async def reconciled_again(metrics: RuntimeMetrics, controller: str, what: str, *,
                           since: float | None = None, more: int = 2) -> None:
    """Wait until ``controller`` has finished ``more`` reconciles beyond
    ``since`` (a :func:`finished_reconciles` taken earlier; default: now).
    One key's reconciles never overlap, so with one object in play at least
    the second of two began after this call; with ``since`` taken while the
    controller was idle, before the write it should ignore, one is enough.
    What a test waits on before it asserts that the controller did *not* go
    on (rather than sleeping)."""
    mark = finished_reconciles(metrics, controller) if since is None else since
    await eventually(lambda: finished_reconciles(metrics, controller) >= mark + more,
                     f"{controller} to reconcile again ({what})")


class ReconcileSpy:
    """Counts a controller's finished reconciles per object: wraps its
    reconciler (installed before the objects it should see are made), so a
    test can wait until one object has been looked at again — where the
    controller's own counters mix every object."""

    def __init__(self, controller: Controller) -> None:
        self._inner = controller.reconciler
        self.finished: collections.Counter[ObjectKey] = collections.Counter()
        controller.reconciler = self

    async def reconcile(self, key: ObjectKey) -> Result:
        try:
            return await self._inner.reconcile(key)
        finally:
            self.finished[key] += 1

    async def reconciled(self, key: ObjectKey, times: int, what: str) -> None:
        """Wait until ``key`` has been reconciled ``times`` times in all."""
        await eventually(lambda: self.finished[key] >= times,
                         f"{times} reconciles of {key} ({what})")
