"""The agent's reconcile loop: LCMMachine spec → host, then status back.

Owns when items are applied and what is reported (contracts, "The agent"):
read LCMMachine ``lcmMachine`` in ``namespace``; unless ``spec.paused``,
apply ``spec.stateItems`` in order through ``executors``, and after each
item merge-patch the status subresource with ``items[]`` (name, hash =
``planners.release.item_hash``, state, changed, error, finishedAt),
``phase``, ``observedGeneration``, ``agentVersion``, ``heartbeat``,
``rebootRequired`` (whether ``/var/run/reboot-required`` exists on the host,
in every report including the idle heartbeat) and, when Ready, ``release``.
A failed item stops the pass (later items wait) and the pass is retried
with capped, jittered exponential back-off; a new generation starts a pass
at once. When Ready with an unchanged generation the items are only
re-verified every ``reverify`` seconds; the heartbeat is written every
``heartbeat`` seconds even when idle.

Level-based: every pass re-reads the LCMMachine and re-checks every item
(an up-to-date item changes nothing). The loop looks at the LCMMachine every
``poll`` seconds and at once when its watch tells of a change; the reads
come from that watch's cache (``kube.AgentKube.get_lcm_machine``), so an
idle agent asks the API server nothing between its heartbeats. Called by
``main``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import structlog

from racksmith.agent import executors
from racksmith.agent.config import AgentTiming
from racksmith.agent.executors import ExecContext, ItemError
from racksmith.agent.host import REBOOT_REQUIRED, HostError
from racksmith.agent.kube import rfc3339
from racksmith.clock import Clock, wait_event
from racksmith.kinds.cluster import StateItem
from racksmith.kinds.lcm import LCMMachine, LCMMachinePhase, StateItemState, StateItemStatus
from racksmith.planners.release import item_hash
from racksmith.runtime.source import Source

__all__ = ["LCMApi", "Outcome", "PassResult", "ReconcileLoop", "item_phase"]

log = structlog.get_logger("racksmith.agent")


class LCMApi(Protocol):
    """The LCMMachine calls of the loop (``kube.AgentKube``)."""

    async def get_lcm_machine(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def patch_lcm_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> None: ...


class Outcome(StrEnum):
    """How one pass ended."""

    READY = "Ready"
    """Every item applied with its current hash."""
    FAILED = "Failed"
    """An item failed; later items were not applied."""
    PAUSED = "Paused"
    """``spec.paused``: nothing applied."""
    NOT_FOUND = "NotFound"
    """The LCMMachine does not exist (yet)."""


@dataclass
class PassResult:
    """What one pass did: per item name, whether it changed the host."""

    outcome: Outcome
    generation: int | None = None
    changed: dict[str, bool] = field(default_factory=dict)
    error: str | None = None


def item_phase(entries: list[StateItemStatus], hashes: dict[str, str]) -> LCMMachinePhase:
    """The LCMMachine phase for ``entries`` against the current item ``hashes``."""
    if any(e.state == StateItemState.FAILED for e in entries):
        return LCMMachinePhase.FAILED
    if all(e.state == StateItemState.APPLIED and e.hash == hashes.get(e.name) for e in entries):
        return LCMMachinePhase.READY
    return LCMMachinePhase.DEPLOYING


class ReconcileLoop:
    """Applies one LCMMachine's items on one host (see the module docstring)."""

    def __init__(
        self,
        api: LCMApi,
        namespace: str,
        name: str,
        ctx: ExecContext,
        clock: Clock,
        timing: AgentTiming = AgentTiming(),
        agent_version: str = "",
        jitter: Callable[[], float] = lambda: random.uniform(0.8, 1.0),
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.ctx = ctx
        self.clock = clock
        self.timing = timing
        self.agent_version = agent_version
        self.jitter = jitter
        self._last_report: float | None = None
        self.log = log.bind(kind="LCMMachine", name=f"{namespace}/{name}")

    # --- one pass ------------------------------------------------------------------------

    async def run_pass(self, obj: dict[str, Any] | None = None) -> PassResult:
        """Read the LCMMachine (unless given) and apply every item once, reporting as it goes."""
        if obj is None:
            obj = await self.api.get_lcm_machine(self.namespace, self.name)
        if obj is None:
            return PassResult(Outcome.NOT_FOUND)
        lcm = LCMMachine.model_validate(obj)
        generation = (obj.get("metadata") or {}).get("generation")
        if lcm.spec.paused:
            return PassResult(Outcome.PAUSED, generation)
        items = lcm.spec.state_items
        hashes = {item.name: item_hash(item) for item in items}
        previous = {e.name: e for e in (lcm.status.items if lcm.status else [])}
        entries = [
            previous[i.name] if i.name in previous and previous[i.name].hash == hashes[i.name]
            and previous[i.name].state == StateItemState.APPLIED
            else StateItemStatus(name=i.name)
            for i in items
        ]
        base: dict[str, Any] = {"observedGeneration": generation}
        await self._report(entries, hashes, base)
        result = PassResult(Outcome.READY, generation)
        for index, item in enumerate(items):
            entry, error = await self._apply(item, hashes[item.name])
            entries[index] = entry
            if error is not None:
                await self._report(entries, hashes, base)
                self.log.warning("state item failed", item=item.name, error=error)
                result.outcome, result.error = Outcome.FAILED, f"{item.name}: {error}"
                return result
            result.changed[item.name] = bool(entry.changed)
            if entry.changed:
                self.log.info("state item applied", item=item.name, changed=True)
            phase = item_phase(entries, hashes)
            extra = {"release": lcm.spec.release} if phase == LCMMachinePhase.READY else {}
            await self._report(entries, hashes, {**base, **extra})
        if not items:
            await self._report(entries, hashes, {**base, "release": lcm.spec.release})
        return result

    async def plan(self) -> list[tuple[str, list[str]]] | None:
        """The dry run: per item, the exact actions it would take (none: up to date).

        Changes nothing and writes no status; an item that cannot be checked
        shows ``error: ...``. None when the LCMMachine does not exist.
        """
        obj = await self.api.get_lcm_machine(self.namespace, self.name)
        if obj is None:
            return None
        lcm = LCMMachine.model_validate(obj)
        planned: list[tuple[str, list[str]]] = []
        for item in lcm.spec.state_items:
            try:
                texts = [a.text for a in await executors.check(item, self.ctx)]
            except (ItemError, HostError, OSError) as exc:
                texts = [f"error: {exc}"]
            planned.append((item.name, texts))
        return planned

    async def _apply(self, item: StateItem, digest: str) -> tuple[StateItemStatus, str | None]:
        try:
            changed = await executors.apply(item, self.ctx)
        except (ItemError, HostError, OSError) as exc:
            error = str(exc) or type(exc).__name__
            return self._entry(item, digest, StateItemState.FAILED, None, error), error
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an API error of a built-in; reported, retried
            error = f"{type(exc).__name__}: {exc}"
            return self._entry(item, digest, StateItemState.FAILED, None, error), error
        return self._entry(item, digest, StateItemState.APPLIED, changed, None), None

    def _entry(
        self, item: StateItem, digest: str, state: StateItemState, changed: bool | None,
        error: str | None,
    ) -> StateItemStatus:
        return StateItemStatus(
            name=item.name, hash=digest, state=state, changed=changed, error=error,
            finished_at=self.clock.wall().replace(microsecond=0),
        )

    async def _report(
        self, entries: list[StateItemStatus], hashes: dict[str, str], extra: dict[str, Any]
    ) -> None:
        status: dict[str, Any] = {
            "phase": item_phase(entries, hashes).value,
            "items": [e.model_dump(mode="json", by_alias=True, exclude_none=True)
                      for e in entries],
            **{k: v for k, v in extra.items() if v is not None},
        }
        await self.heartbeat(status)

    async def heartbeat(self, status: dict[str, Any] | None = None) -> None:
        """Merge-patch ``status`` (or nothing) with the heartbeat, agent version
        and whether the host needs a reboot."""
        body = {**(status or {}), "heartbeat": rfc3339(self.clock.wall()),
                "agentVersion": self.agent_version,
                "rebootRequired": self.ctx.host.exists(REBOOT_REQUIRED)}
        await self.api.patch_lcm_status(self.namespace, self.name, body)
        self._last_report = self.clock.now()

    # --- the loop ------------------------------------------------------------------------

    def backoff(self, attempt: int) -> float:
        """Seconds before retry ``attempt`` (0-based) of a failed pass."""
        delay = min(self.timing.backoff_cap, self.timing.backoff_base * 2.0 ** min(attempt, 30))
        return float(delay * self.jitter())

    async def run(self, stop: asyncio.Event, changes: Source | None = None) -> None:
        """Pass, wait, repeat until ``stop`` is set (see the module docstring).
        ``changes`` (the watch of the LCMMachine) ends a wait at once."""
        wake = asyncio.Event()

        async def feed(source: Source) -> None:
            async for _key in source.keys():
                wake.set()

        async def relay_stop() -> None:
            await stop.wait()
            wake.set()

        helpers = [asyncio.create_task(relay_stop(), name="racksmith-agent-loop-stop")]
        if changes is not None:
            helpers.append(asyncio.create_task(feed(changes), name="racksmith-agent-lcm-watch"))
        try:
            await self._run(stop, wake)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _run(self, stop: asyncio.Event, wake: asyncio.Event) -> None:
        next_pass = self.clock.now()
        applied_generation: int | None = None
        attempt = 0
        while not stop.is_set():
            wake.clear()
            try:
                obj = await self.api.get_lcm_machine(self.namespace, self.name)
                generation = ((obj or {}).get("metadata") or {}).get("generation")
                if obj is not None and (
                    generation != applied_generation or self.clock.now() >= next_pass
                ):
                    result = await self.run_pass(obj)
                    if result.outcome == Outcome.FAILED:
                        next_pass = self.clock.now() + self.backoff(attempt)
                        attempt += 1
                    elif result.outcome == Outcome.READY:
                        next_pass = self.clock.now() + self.timing.reverify
                        attempt = 0
                    applied_generation = result.generation
                if obj is not None and self._heartbeat_due():
                    await self.heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # API unreachable or refusing; the next poll retries
                self.log.warning("agent pass failed", error=f"{type(exc).__name__}: {exc}")
            await wait_event(self.clock, wake, self.timing.poll)

    def _heartbeat_due(self) -> bool:
        return (self._last_report is None
                or self.clock.now() - self._last_report >= self.timing.heartbeat)
