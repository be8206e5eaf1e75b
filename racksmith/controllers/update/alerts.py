"""Alert sources: which alerts fire now, for UpdateAutoPause.

Owns the ``AlertSource`` protocol the update controller reads, the
Alertmanager v2 client ``AlertmanagerSource`` and ``NoAlerts``. The composition
root picks one (``AlertmanagerSource(url)`` when an Alertmanager URL is set).
"""

from __future__ import annotations

from typing import Any, Protocol

import aiohttp
import structlog

from racksmith.clock import Clock, SystemClock

ALERTS_PATH = "/api/v2/alerts"
ALERTS_QUERY = {"active": "true", "silenced": "false", "inhibited": "false"}


class AlertSource(Protocol):
    """Where the names of the alerts firing now come from.

    ``firing`` may be called repeatedly and concurrently; it never raises for
    an unreachable backend (it keeps its last answer and says why in
    ``last_error``).
    """

    @property
    def last_error(self) -> str | None:
        """Why the last query failed (None: it succeeded)."""
        ...

    async def firing(self) -> set[str]:
        """Names of the alerts active, not silenced and not inhibited."""
        ...


class NoAlerts:
    """An alert source where nothing ever fires."""

    @property
    def last_error(self) -> str | None:
        return None

    async def firing(self) -> set[str]:
        return set()


class AlertmanagerSource:
    """Alertmanager's v2 API: ``GET <url>/api/v2/alerts?active=true&silenced=false&
    inhibited=false``, the ``labels.alertname`` of each alert.

    Answers are cached for ``max_age`` seconds of ``clock`` (several clusters
    reconcile at once). On an error (connection, status, body) the last known
    set is kept and ``last_error`` says what went wrong.
    """

    def __init__(self, url: str, *, timeout: float = 5.0, max_age: float = 2.0,
                 clock: Clock | None = None, logger: Any = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_age = max_age
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._known: set[str] = set()
        self._error: str | None = None
        self._at: float | None = None
        self._log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.update.alerts")

    @property
    def last_error(self) -> str | None:
        return self._error

    async def firing(self) -> set[str]:
        now = self.clock.now()
        if self._at is not None and now - self._at < self.max_age:
            return set(self._known)
        self._at = now
        try:
            self._known = await self._fetch()
            self._error = None
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            message = f"GET {self.url}{ALERTS_PATH}: {exc or type(exc).__name__}"
            if message != self._error:
                self._log.warning("alert source unreachable", url=self.url, error=message)
            self._error = message
        return set(self._known)

    async def _fetch(self) -> set[str]:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(
                self.url + ALERTS_PATH, params=ALERTS_QUERY) as resp:
            if resp.status != 200:
                raise ValueError(f"status {resp.status}")
            body = await resp.json(content_type=None)
        if not isinstance(body, list):
            raise ValueError("the answer is not a list of alerts")
        names: set[str] = set()
        for alert in body:
            labels = alert.get("labels") if isinstance(alert, dict) else None
            name = labels.get("alertname") if isinstance(labels, dict) else None
            if isinstance(name, str) and name:
                names.add(name)
        return names
