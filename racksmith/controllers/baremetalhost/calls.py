"""The provisioner as one host's handlers see it: budgeted and counted.

Owns the per-host call budget (at most N provisioner calls per host in any
60 s of the injected clock, so no host can make the controller poll the
backend tightly) and ``HostCalls``, the wrapper handlers call: each call
spends budget (or raises ``BudgetExhausted`` with the wait), is counted in
the metrics and binds the host's identity. The reconciler asks
``HostCalls.admit`` before the handler runs: after a reconcile that ran out
part-way, the next starts only when the calls it needed are left.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from racksmith.clock import Clock
from racksmith.controllers.baremetalhost.metrics import BareMetalHostMetrics
from racksmith.provisioner.base import (
    BackendUnavailable,
    BMCAccess,
    HostIdentity,
    InspectResult,
    Provisioner,
    ProvisionRequest,
    RegisterResult,
    Result,
)
from racksmith.runtime.keys import ObjectKey

T = TypeVar("T")
WINDOW = 60.0


class BudgetExhausted(Exception):
    """The host used its calls for this minute; try again after ``retry_after``."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"provisioner call budget exhausted, retry in {retry_after:.1f}s")
        self.retry_after = retry_after


class CallBudget:
    """A sliding 60 s window of call times per host, and what a host's last
    reconcile found it needed (see ``admit``)."""

    def __init__(self, clock: Clock, per_minute: int) -> None:
        self._clock = clock
        self.per_minute = per_minute
        self._calls: dict[ObjectKey, deque[float]] = {}
        self._needs: dict[ObjectKey, int] = {}

    def _window(self, key: ObjectKey, now: float) -> deque[float]:
        """``key``'s call times within the last ``WINDOW`` seconds before ``now``."""
        calls = self._calls.setdefault(key, deque())
        while calls and calls[0] <= now - WINDOW:
            calls.popleft()
        return calls

    def spend(self, key: ObjectKey) -> None:
        """Record one call of ``key`` or raise ``BudgetExhausted``."""
        now = self._clock.now()
        calls = self._window(key, now)
        if len(calls) >= self.per_minute:
            raise BudgetExhausted(max(0.001, calls[0] + WINDOW - now))
        calls.append(now)

    def ran_out(self, key: ObjectKey, made: int) -> None:
        """A reconcile of ``key`` ran out after ``made`` calls (``made`` > 0):
        the next one is admitted only with ``made + 1`` calls left."""
        if made > 0:
            self._needs[key] = made + 1

    def admit(self, key: ObjectKey) -> None:
        """Let a reconcile of ``key`` start; raise ``BudgetExhausted`` with the
        wait when the last one ran out part-way (``ran_out``) and the calls it
        needed are not left yet. Spends nothing; a reconcile admitted uses up
        the need. Without it the one call freed each time went to the
        reconcile's first call and the second ran out, again and again:
        measured, a provisioned host that had used its budget while deploying
        went on adopting every 1-2 s and never reached its power check or its
        5-minute steady poll. A reconcile that runs out on its first call
        needs no admission (the call itself waits for one free)."""
        need = self._needs.get(key)
        if need is None:
            return
        now = self._clock.now()
        made = self._window(key, now)
        short = min(need, self.per_minute) - (self.per_minute - len(made))
        if short > 0:
            raise BudgetExhausted(max(0.001, made[short - 1] + WINDOW - now))
        del self._needs[key]

    def forget(self, key: ObjectKey) -> None:
        self._calls.pop(key, None)
        self._needs.pop(key, None)


class HostCalls:
    """One host's budgeted, counted view of the provisioner."""

    def __init__(
        self,
        provisioner: Provisioner,
        identity: HostIdentity,
        key: ObjectKey,
        budget: CallBudget,
        metrics: BareMetalHostMetrics,
    ) -> None:
        self._provisioner = provisioner
        self.identity = identity
        self._key = key
        self._budget = budget
        self._metrics = metrics
        self.made = 0
        """Calls that reached the backend in this reconcile."""

    def admit(self) -> None:
        """Before a reconcile's first call: raise ``BudgetExhausted`` while the
        calls the host's last, cut-short reconcile needed are not left
        (``CallBudget.admit``)."""
        self._budget.admit(self._key)

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            self._budget.spend(self._key)
        except BudgetExhausted:
            self._budget.ran_out(self._key, self.made)
            raise
        self.made += 1
        try:
            out = await call()
        except BackendUnavailable:
            self._metrics.calls.labels(operation=operation, outcome="unavailable").inc()
            raise
        result = getattr(out, "result", out)
        outcome = "ok"
        if isinstance(result, Result):
            outcome = "error" if result.error else ("done" if result.done else "wait")
        self._metrics.calls.labels(operation=operation, outcome=outcome).inc()
        return out

    async def register(self, bmc: BMCAccess, *, credentials_changed: bool) -> RegisterResult:
        return await self._call(
            "register",
            lambda: self._provisioner.register(
                self.identity, bmc, credentials_changed=credentials_changed
            ),
        )

    async def inspect(self, *, force: bool = False) -> InspectResult:
        return await self._call("inspect", lambda: self._provisioner.inspect(
            self.identity, force=force))

    async def prepare(self) -> Result:
        return await self._call("prepare", lambda: self._provisioner.prepare(self.identity))

    async def provision(self, request: ProvisionRequest) -> Result:
        return await self._call(
            "provision", lambda: self._provisioner.provision(self.identity, request)
        )

    async def deprovision(self, *, clean: bool) -> Result:
        return await self._call(
            "deprovision", lambda: self._provisioner.deprovision(self.identity, clean=clean)
        )

    async def adopt(self, request: ProvisionRequest) -> Result:
        return await self._call("adopt", lambda: self._provisioner.adopt(self.identity, request))

    async def power(self, on: bool, *, soft: bool = False) -> Result:
        return await self._call("power", lambda: self._provisioner.power(self.identity, on,
                                                                         soft=soft))

    async def power_state(self) -> bool | None:
        return await self._call("power_state", lambda: self._provisioner.power_state(
            self.identity))

    async def delete(self) -> Result:
        return await self._call("delete", lambda: self._provisioner.delete(self.identity))

    async def service_firmware(self, settings: dict[str, str]) -> Result:
        return await self._call("service_firmware",
                                lambda: self._provisioner.service_firmware(self.identity,
                                                                           settings))

    async def detach(self) -> Result:
        return await self._call("detach", lambda: self._provisioner.detach(self.identity))
