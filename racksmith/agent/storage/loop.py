"""The storage loop: the node's Volumes → storage tasks → job results.

Owns the agent's side of the task protocol (docs/design/volume-contracts.md,
"The task protocol"): at start, :func:`~racksmith.agent.storage.tasks.recover`
(stale ``.tmp`` files removed, sparse files re-attached); then, for every
Volume of ``node`` the watch names (field selector ``spec.nodeName``), read
it (``VolumeApi.get_volume``: the agent answers from that watch's store,
with its own patches in it) and, when ``status.job`` names a job without a result in the
annotation ``storage.racksmith.io/job-result``, run it (``tasks.run_job``)
and write the result by a merge patch on metadata. A malformed job gets a
failed result (``InvalidJob``) so the controller is not left waiting.

Level-based and one job at a time: events are hints, the Volume is
read as it is now before acting, and a re-run of a job (a restart before its result
was written) finishes the same work. A job whose result cannot be written
(the API refusing or unreachable) is retried with capped exponential
back-off. Started by ``main`` next to the LCM loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import structlog

from racksmith.agent.config import AgentTiming
from racksmith.agent.storage.context import StorageContext
from racksmith.agent.storage.tasks import recover, run_job
from racksmith.clock import Clock, wait_event
from racksmith.kinds.volumejobs import JOB_RESULT_ANNOTATION, FailureReason, Job, JobResult
from racksmith.runtime.source import Source

__all__ = ["StorageLoop", "VolumeApi"]

log = structlog.get_logger("racksmith.agent.storage")


class VolumeApi(Protocol):
    """The Volume and StorageClass calls of the loop (``kube.AgentKube``)."""

    async def get_volume(self, name: str) -> dict[str, Any] | None: ...

    async def annotate_volume(self, name: str, annotations: dict[str, str]) -> None: ...

    async def get_storage_class(self, name: str) -> dict[str, Any] | None: ...


class StorageLoop:
    """Runs the storage jobs of one node's Volumes (see the module docstring)."""

    def __init__(
        self,
        api: VolumeApi,
        ctx: StorageContext,
        node_name: str,
        clock: Clock,
        source: Source,
        timing: AgentTiming = AgentTiming(),
    ) -> None:
        self.api = api
        self.ctx = ctx
        self.node_name = node_name
        self.clock = clock
        self.source = source
        self.timing = timing
        self.log = log.bind(node=node_name)

    async def recover(self) -> None:
        """Agent-start work; a failure is logged (each job re-checks what it needs)."""
        try:
            paths = await recover(self.ctx)
        except Exception as exc:  # the tasks still run; a loop device is re-attached by them
            self.log.warning("storage recovery failed", error=f"{type(exc).__name__}: {exc}")
            return
        if paths:
            self.log.info("sparse volumes re-attached", files=len(paths))

    async def sync(self, name: str) -> JobResult | None:
        """Re-read Volume ``name`` and run its pending job; the result written, or None.

        Raises what the API raises (the caller retries).
        """
        obj = await self.api.get_volume(name)
        if obj is None or (obj.get("spec") or {}).get("nodeName") != self.node_name:
            return None
        metadata = obj.get("metadata") or {}
        raw_job = (obj.get("status") or {}).get("job")
        if not raw_job or not isinstance(raw_job, str):
            return None
        previous = JobResult.from_json((metadata.get("annotations") or {}).get(
            JOB_RESULT_ANNOTATION))
        if previous is not None and previous.job == raw_job:
            return None  # done; the controller has not consumed it yet
        job = Job.parse(raw_job)
        bound = self.log.bind(kind="Volume", name=name, job=raw_job)
        if job is None:
            result = JobResult.failure(raw_job, FailureReason.INVALID_JOB,
                                       f"status.job {raw_job!r} is not <prepare|unprepare>:<8 hex>")
        else:
            bound.info("storage job started")
            result = await run_job(self.ctx, job, obj, self.api.get_storage_class)
        await self.api.annotate_volume(name, {JOB_RESULT_ANNOTATION: result.to_json()})
        if result.ok:
            bound.info("storage job succeeded", device=result.device_name,
                       size_bytes=result.size_bytes)
        else:
            bound.warning("storage job failed", reason=result.reason, error=result.error)
        return result

    def backoff(self, attempt: int) -> float:
        """Seconds before retry ``attempt`` (1-based) of a job whose sync raised."""
        return float(min(self.timing.backoff_cap,
                         self.timing.backoff_base * 2.0 ** min(attempt - 1, 30)))

    async def run(self, stop: asyncio.Event) -> None:
        """Recover, then follow the watch until ``stop`` is set."""
        await self.recover()
        pending: set[str] = set()
        retry_at: dict[str, float] = {}
        attempts: dict[str, int] = {}
        wake = asyncio.Event()

        async def feed() -> None:
            async for key in self.source.keys():
                pending.add(key.name)
                wake.set()

        async def relay_stop() -> None:
            await stop.wait()
            wake.set()

        helpers = [asyncio.create_task(feed(), name="racksmith-storage-watch"),
                   asyncio.create_task(relay_stop(), name="racksmith-storage-stop")]
        try:
            while not stop.is_set():
                now = self.clock.now()
                due = {name for name, at in retry_at.items() if at <= now}
                names = pending | due
                pending.clear()
                wake.clear()
                for name in sorted(names):
                    retry_at.pop(name, None)
                    try:
                        await self.sync(name)
                        attempts.pop(name, None)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # API unreachable or refusing: retried
                        attempts[name] = attempts.get(name, 0) + 1
                        delay = self.backoff(attempts[name])
                        retry_at[name] = self.clock.now() + delay
                        self.log.warning("storage sync failed", name=name, retry_in=delay,
                                         error=f"{type(exc).__name__}: {exc}")
                timeout = (max(0.0, min(retry_at.values()) - self.clock.now())
                           if retry_at else None)
                await wait_event(self.clock, wake, timeout)
        finally:
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
