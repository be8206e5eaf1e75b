"""The web console's server side on a real API server, in-process.

The server is started the way ``racksmith up`` wires it
(``racksmith.app.runner``: ``extra_routes=console.routes(url)``,
``public=console.is_public``). Checked: the page and every asset are served
without a token with the security headers, path traversal never leaves
``static/``, ``/console/alerts`` needs the token and passes Alertmanager's
active alerts through (a fake Alertmanager; a dead one; none), and the
resource API still needs the token. Also static checks of the assets: every
ES module import resolves (to a file, and named imports to exports), and
nothing is loaded from another origin.

The server tests share one console server per module (they only read; the
Alertmanager URL is reset around each test), so they are marked for the
module's loop one by one (the static checks need no loop).
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from multidict import CIMultiDictProxy

from racksmith import console
from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving
from tests.harness.http import ssl_context

STATIC = console.static_dir()
JS = STATIC / "js"
BMH = "/apis/metal3.io/v1alpha1/baremetalhosts"
CONSOLE_INIT = Path(console.__file__).read_bytes()
SHARED = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Reply:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Console:
    server: ApiServer
    session: aiohttp.ClientSession
    ssl: ssl.SSLContext
    alertmanager: dict[str, str | None] = field(default_factory=lambda: {"url": None})

    async def get(self, path: str, token: str | None = None,
                  follow: bool = False) -> Reply:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with self.session.get(self.server.url + path, headers=headers,
                                    allow_redirects=follow) as resp:
            return Reply(resp.status, resp.headers, await resp.read())

    async def raw_get(self, path: str) -> tuple[int, bytes]:
        """GET with the request target sent byte for byte (no client-side
        normalisation of ``..`` or percent escapes); no token."""
        reader, writer = await asyncio.open_connection(
            self.server.config.host, self.server.port, ssl=self.ssl,
            server_hostname=self.server.config.host)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.server.config.host}\r\n"
                         "Connection: close\r\n\r\n".encode())
            await writer.drain()
            async with asyncio.timeout(30):
                data = await reader.read()
        finally:
            writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), body


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def console_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Console]:
    """An API server with the console routes, as ``racksmith up`` builds it; the
    Alertmanager URL is read from ``alertmanager["url"]`` on every request."""
    alertmanager: dict[str, str | None] = {"url": None}
    async with serving(tmp_path_factory.mktemp("console") / "data", extra_routes=console.routes(
            lambda: alertmanager["url"]), public=console.is_public) as server:
        ctx = ssl_context(server)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx),
                                         timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield Console(server, session, ctx, alertmanager)


@pytest.fixture
def web_console(console_server: Console) -> Iterator[Console]:
    """The module's console server, with no Alertmanager at first."""
    console_server.alertmanager["url"] = None
    yield console_server
    console_server.alertmanager["url"] = None


@dataclass
class FakeAlertmanager:
    url: str
    queries: list[dict[str, str]]
    answer: dict[str, Any]


@pytest_asyncio.fixture(loop_scope="module")
async def fake_alertmanager() -> AsyncIterator[FakeAlertmanager]:
    """An Alertmanager v2 API answering ``answer["body"]`` with ``answer["status"]``."""
    queries: list[dict[str, str]] = []
    answer: dict[str, Any] = {"status": 200, "body": []}

    async def alerts(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        return web.json_response(answer["body"], status=answer["status"])

    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield FakeAlertmanager(f"http://127.0.0.1:{runner.addresses[0][1]}/", queries, answer)
    finally:
        await runner.cleanup()


def assert_security_headers(reply: Reply) -> None:
    csp = reply.headers.get("Content-Security-Policy", "")
    directives = {d.strip().split(" ", 1)[0]: d.strip() for d in csp.split(";") if d.strip()}
    assert directives.get("script-src") == "script-src 'self'", csp
    assert directives.get("default-src") == "default-src 'self'", csp
    assert directives.get("frame-ancestors") == "frame-ancestors 'none'", csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp
    assert reply.headers.get("X-Content-Type-Options") == "nosniff"
    assert reply.headers.get("Referrer-Policy") == "no-referrer"


# --------------------------------------------------------------------------- pages and assets


@SHARED
async def test_page_is_public_with_a_strict_csp(web_console: Console) -> None:
    for path in ("/console/", "/console/index.html"):
        reply = await web_console.get(path)
        assert reply.status == 200, (path, reply.body[:200])
        assert reply.headers["Content-Type"].startswith("text/html"), reply.headers
        assert reply.body == (STATIC / "index.html").read_bytes()
        assert_security_headers(reply)

    redirect = await web_console.get("/console")
    assert redirect.status in (301, 302, 307, 308)
    assert redirect.headers["Location"] == "/console/"
    followed = await web_console.get("/console", follow=True)
    assert followed.status == 200 and followed.body == (STATIC / "index.html").read_bytes()

    app_js = await web_console.get("/console/static/js/app.js")
    assert app_js.status == 200
    assert app_js.headers["Content-Type"].split(";")[0] == "text/javascript"
    assert app_js.body == (JS / "app.js").read_bytes()
    assert_security_headers(app_js)


@SHARED
async def test_every_static_file_is_served(web_console: Console) -> None:
    files = sorted(p for p in STATIC.rglob("*") if p.is_file())
    assert len(files) >= 7, files
    expected_types = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
    for path in files:
        rel = path.relative_to(STATIC).as_posix()
        reply = await web_console.get(f"/console/static/{rel}")
        assert reply.status == 200, (rel, reply.status)
        assert reply.body == path.read_bytes(), rel
        if path.suffix in expected_types:
            assert reply.headers["Content-Type"].split(";")[0] == expected_types[path.suffix], rel
        assert_security_headers(reply)
    missing = await web_console.get("/console/static/js/no-such-module.js")
    assert missing.status == 404


@pytest.mark.parametrize("path", [
    "/console/static/../__init__.py",
    "/console/static/js/../../__init__.py",
    "/console/static/%2e%2e/__init__.py",
    "/console/static/%2E%2E/__init__.py",
    "/console/static/js/%2e%2e/%2e%2e/__init__.py",
    "/console/static/..%2f__init__.py",
    "/console/static/%2e%2e%2f__init__.py",
    "/console/static/..%5c__init__.py",
    "/console/static//etc/passwd",
    "/console/static/%2fetc%2fpasswd",
    "/console/static/../../../../../../etc/passwd",
    "/console/static/../../apiserver/server.py",
])
@SHARED
async def test_path_traversal_never_leaves_static(web_console: Console, path: str) -> None:
    status, body = await web_console.raw_get(path)
    assert status == 404, (path, status, body[:200])
    assert CONSOLE_INIT[:200] not in body and b"root:" not in body
    assert b"from __future__" not in body


@SHARED
async def test_traversal_to_the_api_does_not_skip_the_token(web_console: Console) -> None:
    """A public-looking prefix must not smuggle an API request past the token check."""
    for path in ("/console/static/../../api/v1/namespaces",
                 "/console/static/%2e%2e/%2e%2e/api/v1/namespaces",
                 f"/console/static/../..{BMH}"):
        status, body = await web_console.raw_get(path)
        assert status in (401, 404), (path, status)
        assert b'"items"' not in body and b"NamespaceList" not in body


# --------------------------------------------------------------------------- token


@SHARED
async def test_alerts_and_the_api_need_the_token(web_console: Console) -> None:
    token = web_console.server.token
    for path in ("/console/alerts", BMH, "/api/v1/namespaces"):
        for bad in (None, "not-the-token", ""):
            reply = await web_console.get(path, token=bad)
            assert reply.status == 401, (path, bad, reply.status)
            status = reply.json()
            assert status["kind"] == "Status" and status["code"] == 401, status
            assert status["reason"] == "Unauthorized"
    ok = await web_console.get(BMH, token=token)
    assert ok.status == 200 and ok.json()["kind"] == "BareMetalHostList"


# --------------------------------------------------------------------------- alerts


@SHARED
async def test_alerts_pass_through_from_alertmanager(
        web_console: Console, fake_alertmanager: FakeAlertmanager) -> None:
    alerts = [
        {"labels": {"alertname": "KubeAPIDown", "severity": "critical", "cluster": "demo"},
         "annotations": {"summary": "The API of cluster demo is down"},
         "startsAt": "2026-12-01T21:00:00.000Z", "endsAt": "2026-12-01T22:00:00.000Z",
         "fingerprint": "a1b2c3", "status": {"state": "active", "silencedBy": [],
                                             "inhibitedBy": []},
         "receivers": [{"name": "null"}], "updatedAt": "2026-12-01T21:01:00.000Z",
         "generatorURL": "http://prometheus:9090/graph"},
        {"labels": {"alertname": "UpdateAutoPause"}, "annotations": {},
         "status": {"state": "active"}},
    ]
    fake_alertmanager.answer["body"] = alerts
    web_console.alertmanager["url"] = fake_alertmanager.url
    reply = await web_console.get("/console/alerts", token=web_console.server.token)
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.json() == {"source": fake_alertmanager.url, "alerts": alerts, "error": None}
    assert fake_alertmanager.queries, "the console did not ask Alertmanager"
    assert fake_alertmanager.queries[-1].get("active") == "true", fake_alertmanager.queries

    fake_alertmanager.answer["body"] = []
    reply = await web_console.get("/console/alerts", token=web_console.server.token)
    assert reply.json() == {"source": fake_alertmanager.url, "alerts": [], "error": None}

    # an answer that is not a list of alerts is no alert, not an error
    fake_alertmanager.answer["body"] = {"unexpected": True}
    reply = await web_console.get("/console/alerts", token=web_console.server.token)
    assert reply.status == 200 and reply.json()["alerts"] == []

    fake_alertmanager.answer.update(status=500, body={"error": "boom"})
    reply = await web_console.get("/console/alerts", token=web_console.server.token)
    body = reply.json()
    assert reply.status == 200
    assert body["source"] == fake_alertmanager.url and body["alerts"] == []
    assert body["error"] and fake_alertmanager.url in body["error"], body


@SHARED
async def test_alerts_from_a_dead_alertmanager(web_console: Console) -> None:
    # Bound but not listening: connections are refused, and no other process
    # can take the port while the test holds it.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        web_console.alertmanager["url"] = url
        reply = await web_console.get("/console/alerts", token=web_console.server.token)
    assert reply.status == 200
    body = reply.json()
    assert body["source"] == url and body["alerts"] == []
    assert isinstance(body["error"], str) and url in body["error"] and "did not answer" in \
        body["error"], body


@SHARED
async def test_alerts_without_an_alertmanager(web_console: Console) -> None:
    reply = await web_console.get("/console/alerts", token=web_console.server.token)
    assert reply.status == 200
    assert reply.json() == {"source": None, "alerts": [], "error": None}


# --------------------------------------------------------------------------- the assets


IMPORT_FROM = re.compile(r"""\b(?:import|export)\s*(\{[^}]*\}|\*\s+as\s+\w+|\w+)?\s*"""
                         r"""(?:,\s*\{[^}]*\})?\s*from\s*["']([^"']+)["']""")
BARE_IMPORT = re.compile(r"""^\s*import\s*["']([^"']+)["']""", re.M)
DYNAMIC_IMPORT = re.compile(r"""\bimport\(\s*["']([^"']+)["']\s*\)""")
EXPORTS = re.compile(r"""\bexport\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+"""
                     r"""([A-Za-z_$][\w$]*)""")
EXPORT_LIST = re.compile(r"""\bexport\s*\{([^}]*)\}""")


def js_modules() -> list[Path]:
    return sorted(JS.rglob("*.js"))


def exports_of(path: Path) -> set[str]:
    text = path.read_text()
    names = set(EXPORTS.findall(text))
    for group in EXPORT_LIST.findall(text):
        for part in group.split(","):
            if part.strip():
                names.add(part.split(" as ")[-1].strip())
    return names


def page_modules() -> list[str]:
    """The page modules app.js loads with ``import(`./pages/${mod}.js`)``."""
    app = (JS / "app.js").read_text()
    assert "import(`./pages/${mod}.js`)" in app, "app.js no longer loads pages that way"
    block = app.split("const PAGES", 1)[1].split("];", 1)[0]
    mods = sorted(set(re.findall(r"""\[\s*/.*?/\s*,\s*"([\w-]+)"\s*,""", block)))
    assert "overview" in mods and "hosts" in mods, mods
    return mods


def test_every_js_import_resolves() -> None:
    problems: list[str] = []
    for module in js_modules():
        text = module.read_text()
        imports = [(names, spec) for names, spec in IMPORT_FROM.findall(text)]
        imports += [("", spec) for spec in BARE_IMPORT.findall(text)]
        imports += [("", spec) for spec in DYNAMIC_IMPORT.findall(text)]
        for names, spec in imports:
            where = f"{module.relative_to(STATIC)}: {spec!r}"
            if not spec.startswith("./") and not spec.startswith("../"):
                problems.append(f"{where} is not a relative import of a local file")
                continue
            target = (module.parent / spec).resolve()
            if not target.is_relative_to(STATIC.resolve()) or not target.is_file():
                problems.append(f"{where} does not exist")
                continue
            if names.startswith("{"):
                wanted = {n.split(" as ")[0].strip() for n in names.strip("{}").split(",")
                          if n.strip()}
                missing = wanted - exports_of(target)
                if missing:
                    problems.append(f"{where} has no export {sorted(missing)}")
    for mod in page_modules():
        page = JS / "pages" / f"{mod}.js"
        if not page.is_file():
            problems.append(f"app.js routes to pages/{mod}.js, which does not exist")
        elif "mount" not in exports_of(page):
            problems.append(f"pages/{mod}.js does not export mount()")
    assert not problems, "\n".join(problems)


def test_index_html_uses_only_local_assets() -> None:
    html = (STATIC / "index.html").read_text()
    refs = re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""", html)
    assert any(r.endswith("/js/app.js") for r in refs), refs
    for ref in refs:
        if ref.startswith("#") or ref.startswith("data:"):
            continue
        assert ref.startswith("/console/static/"), f"index.html loads {ref!r}"
        assert (STATIC / ref.removeprefix("/console/static/")).is_file(), ref
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script> (CSP)"
    assert not re.search(r"""\son\w+\s*=""", html), "inline event handler (CSP)"


# Namespace names are identifiers, never fetched.
XML_NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml",
                  "http://www.w3.org/1999/xlink")


def test_no_remote_urls_in_static() -> None:
    offenders: list[str] = []
    for path in sorted(p for p in STATIC.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            for ns in XML_NAMESPACES:
                line = line.replace(ns, "")
            if re.search(r"https?://|(?<![:\w])//[a-z0-9.-]+\.[a-z]{2,}/", line, re.I):
                offenders.append(f"{path.relative_to(STATIC)}:{number}: {line.strip()}")
    assert not offenders, "remote URLs (no CDN):\n" + "\n".join(offenders)
