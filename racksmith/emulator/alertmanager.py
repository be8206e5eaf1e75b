"""The built-in alert source: a subset of the Prometheus Alertmanager v2 API.

Owns the alerts of an emulated site, so UpdateAutoPause can be exercised
without a Prometheus stack (``docs/design/maintenance-contracts.md``, "Alert
source"). ``racksmith up`` starts it in its own process on a loopback port
when hosts are emulated and no ``--alertmanager-url`` is given.

Endpoints (what the update controller and ``curl`` need, nothing more):

- ``GET /api/v2/alerts`` — the alerts that have not ended: ``labels``,
  ``annotations``, ``startsAt``, ``endsAt``, ``updatedAt``, ``fingerprint``,
  ``status {state: active, silencedBy: [], inhibitedBy: []}``, ``receivers``.
  The filters ``active``, ``silenced``, ``inhibited`` (and ``unprocessed``)
  are accepted; nothing is ever silenced or inhibited, so only
  ``active=false`` changes the answer (to none).
- ``POST /api/v2/alerts`` — a JSON list of ``{labels, annotations?,
  startsAt?, endsAt?}``. An alert is identified by its label set (a repeat
  updates it); ``endsAt`` in the past resolves it; without ``endsAt`` it
  lasts ``resolve_timeout`` (5 minutes, Alertmanager's default) from now.
- ``GET /-/healthy`` (and ``/-/ready``).

State is in memory only (as Alertmanager's without a data dir).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

RESOLVE_TIMEOUT = timedelta(minutes=5)


def _now() -> datetime:
    return datetime.now(UTC)


def _parse_time(value: Any, what: str) -> datetime | None:
    if value in (None, "", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"):
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be an RFC 3339 string")
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what}: {value!r} is not an RFC 3339 time") from None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _format(stamp: datetime) -> str:
    return stamp.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(labels: dict[str, str]) -> str:
    """A stable id of a label set (hex, like Alertmanager's)."""
    text = "\0".join(f"{k}\0{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Alert:
    """One alert, identified by its labels."""

    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    starts_at: datetime = field(default_factory=_now)
    ends_at: datetime = field(default_factory=_now)
    updated_at: datetime = field(default_factory=_now)

    def as_json(self) -> dict[str, Any]:
        return {
            "labels": dict(self.labels), "annotations": dict(self.annotations),
            "startsAt": _format(self.starts_at), "endsAt": _format(self.ends_at),
            "updatedAt": _format(self.updated_at), "fingerprint": fingerprint(self.labels),
            "generatorURL": "", "receivers": [{"name": "racksmith"}],
            "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
        }


class AlertStore:
    """The alerts by fingerprint; expired ones are dropped on read."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        self._alerts: dict[str, Alert] = {}

    def post(self, body: Any) -> None:
        """Add/update/resolve alerts from a v2 ``postableAlerts`` body; ValueError if invalid."""
        if not isinstance(body, list):
            raise ValueError("body must be a list of alerts")
        now = self.clock()
        parsed: list[Alert] = []
        for i, item in enumerate(body):
            if not isinstance(item, dict):
                raise ValueError(f"alert {i} must be an object")
            labels, notes = item.get("labels"), item.get("annotations") or {}
            if not isinstance(labels, dict) or not labels or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
                raise ValueError(f"alert {i}: labels must be a non-empty map of strings")
            if not isinstance(notes, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
                raise ValueError(f"alert {i}: annotations must be a map of strings")
            starts = _parse_time(item.get("startsAt"), f"alert {i}: startsAt")
            ends = _parse_time(item.get("endsAt"), f"alert {i}: endsAt")
            parsed.append(Alert(dict(labels), dict(notes), starts or now,
                                ends or now + RESOLVE_TIMEOUT, now))
        for alert in parsed:
            key = fingerprint(alert.labels)
            old = self._alerts.get(key)
            if old is not None and old.ends_at > now:
                alert.starts_at = min(old.starts_at, alert.starts_at)
            self._alerts[key] = alert

    def active(self) -> list[Alert]:
        """The alerts that have not ended, oldest first."""
        now = self.clock()
        self._alerts = {k: a for k, a in self._alerts.items() if a.ends_at > now}
        return sorted((a for a in self._alerts.values() if a.starts_at <= now),
                      key=lambda a: (a.starts_at, fingerprint(a.labels)))


def _flag(request: web.Request, name: str, default: bool = True) -> bool:
    raw = request.query.get(name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise web.HTTPBadRequest(text=f"{name} must be true or false")


class BuiltinAlertmanager:
    """The Alertmanager v2 subset on aiohttp (see the module docstring)."""

    def __init__(self, store: AlertStore | None = None) -> None:
        self.store = store if store is not None else AlertStore()
        self.url: str | None = None
        self.port = 0
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v2/alerts", self._get_alerts)
        app.router.add_post("/api/v2/alerts", self._post_alerts)
        app.router.add_get("/-/healthy", self._healthy)
        app.router.add_get("/-/ready", self._healthy)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: a free port); the base URL."""
        if self._runner is not None:
            raise RuntimeError("already started")
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0][1]
        self.port = int(bound)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}"
        return self.url

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _get_alerts(self, request: web.Request) -> web.Response:
        active = _flag(request, "active")
        _flag(request, "silenced")
        _flag(request, "inhibited")
        _flag(request, "unprocessed")
        alerts = self.store.active() if active else []
        return web.json_response([a.as_json() for a in alerts])

    async def _post_alerts(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            self.store.post(body)
        except ValueError as exc:
            return web.json_response(str(exc), status=400)
        return web.json_response(None, status=200)

    async def _healthy(self, _request: web.Request) -> web.Response:
        return web.Response(text="OK")


__all__ = ["Alert", "AlertStore", "BuiltinAlertmanager", "fingerprint"]
