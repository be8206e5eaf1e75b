"""The web console's server side: static assets and the alerts read-through.

Owns: the ``/console/`` routes that ``racksmith up`` adds to the API
server's TLS port — the single-page app's files (``static/``: plain ES
modules, CSS and one HTML page, no build step, no CDN), served without a
token because they hold no data, with a strict Content-Security-Policy —
and ``/console/alerts``, a read-only pass-through of the Alertmanager's
active alerts (the browser cannot reach Alertmanager's own port; this route
sits behind the API server's bearer-token middleware like every other
path). Everything the console shows or changes goes through the
Kubernetes API from the browser with the operator's token (a managed
cluster's node-side objects through the management API's cluster proxy,
``/clusters/<ns>/<name>/proxy/...``, served by ``racksmith.app.clusterproxy``
beside these routes), so validation and authorisation apply: this package
never imports the API server (an import-linter contract), so it cannot
write the store. Design:
``docs/design/console-contracts.md``; user guide: ``docs/console.md``.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]

PREFIX = "/console/"
"""Where the console lives on the API server's port."""
PUBLIC_PREFIX = "/console/static/"
"""Asset paths served without a token (the HTML page is public too)."""

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
          ".html": "text/html", ".svg": "image/svg+xml", ".json": "application/json"}


def static_dir() -> Path:
    """The directory of the bundled assets."""
    return Path(str(resources.files(__package__) / "static"))


def is_public(path: str) -> bool:
    """Paths the API server serves without a bearer token (no data in them)."""
    return path in ("/console", PREFIX, PREFIX + "index.html") or path.startswith(PUBLIC_PREFIX)


def _headers(resp: web.StreamResponse) -> None:
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-cache"


def _file_response(path: Path) -> web.Response:
    ctype = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] \
        or "application/octet-stream"
    resp = web.Response(body=path.read_bytes(), content_type=None)
    resp.headers["Content-Type"] = ctype + ("; charset=utf-8" if ctype.startswith("text/")
                                            else "")
    _headers(resp)
    return resp


def routes(alertmanager_url: Callable[[], str | None] = lambda: None) -> list[Route]:
    """The console's routes, for ``ApiServer(extra_routes=...)``."""
    root = static_dir().resolve()

    async def index(_request: web.Request) -> web.Response:
        return _file_response(root / "index.html")

    async def redirect(_request: web.Request) -> web.Response:
        raise web.HTTPFound(PREFIX)

    async def asset(request: web.Request) -> web.Response:
        rel = request.match_info["path"]
        try:
            if "\x00" in rel:
                raise ValueError("NUL in path")
            target = (root / rel).resolve()
            found = target.is_relative_to(root) and target.is_file()
        except (OSError, ValueError):
            found = False
        if not found:
            raise web.HTTPNotFound(text="no such console asset")
        return _file_response(target)

    async def alerts(_request: web.Request) -> web.Response:
        url = alertmanager_url()
        body: dict[str, object]
        if not url:
            body = {"source": None, "alerts": [], "error": None}
        else:
            try:
                timeout = aiohttp.ClientTimeout(total=5)
                async with aiohttp.ClientSession(timeout=timeout) as session, session.get(
                        url.rstrip("/") + "/api/v2/alerts",
                        params={"active": "true", "silenced": "false",
                                "inhibited": "false"}) as upstream:
                    upstream.raise_for_status()
                    data = await upstream.json()
                body = {"source": url, "alerts": data if isinstance(data, list) else [],
                        "error": None}
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                body = {"source": url, "alerts": [],
                        "error": f"Alertmanager at {url} did not answer: "
                                 f"{type(exc).__name__}"}
        resp = web.Response(body=orjson.dumps(body), content_type="application/json")
        _headers(resp)
        return resp

    return [
        ("GET", "/console", redirect),
        ("GET", PREFIX, index),
        ("GET", PREFIX + "index.html", index),
        ("GET", PREFIX + "alerts", alerts),
        ("GET", PUBLIC_PREFIX + "{path:.+}", asset),
    ]
