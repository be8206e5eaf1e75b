"""A raw HTTP client of the API server for tests of its wire behaviour.

Owns: :class:`Api` (aiohttp with the server's CA and a bearer token, any
method, body, content type, query and headers; paths written with
``{ns}`` for the test's namespace) and its :class:`Resp`; the assertions
every wire-level test makes (:func:`assert_status`: a Failure ``Status``
with the code, reason and field paths; :func:`nothing_written`: the store's
resourceVersion did not move); and the small object builders and setup
steps those tests share (the widgets.example.com CRD, :func:`settle`), and
their two fixtures: ``shared_server`` (the module's server with the CRD) and
``api`` (a client in the test's namespace), which such a module imports.
Used by tests/integration/test_bad_input.py and test_hardening.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest_asyncio
import yaml

from racksmith.apiserver.server import ApiServer
from tests.harness.http import ssl_context
from tests.harness.manifests import WIDGET_CRD
from tests.harness.wait import eventually

Obj = dict[str, Any]
CM = "/api/v1/namespaces/{ns}/configmaps"
SECRETS = "/api/v1/namespaces/{ns}/secrets"
WIDGETS = "/apis/example.com/v1/namespaces/{ns}/widgets"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
BMHS = "/apis/metal3.io/v1alpha1/namespaces/{ns}/baremetalhosts"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)
MiB = 1024 * 1024
_DEFAULT = object()


# ---- client -------------------------------------------------------------------------------------


@dataclass
class Resp:
    status: int
    headers: Any
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)

    def __repr__(self) -> str:  # shown by pytest on a failed assertion
        return f"Resp({self.status}, {self.raw[:600]!r})"


class Api:
    """A thin aiohttp client: bearer token, TLS trusting the server's CA."""

    def __init__(self, session: aiohttp.ClientSession, server: ApiServer,
                 namespace: str = "default") -> None:
        self.session = session
        self.server = server
        self.url = server.url
        self.token = server.token
        self.ns = namespace

    def path(self, path: str) -> str:
        """Paths are written with ``{ns}``: the test's own namespace."""
        return path.replace("{ns}", self.ns)

    async def call(self, method: str, path: str, *, body: Any = None, data: Any = None,
                   ctype: str | None = None, params: dict[str, str] | None = None,
                   token: Any = _DEFAULT, headers: dict[str, str] | None = None) -> Resp:
        hdrs = dict(headers or {})
        tok = self.token if token is _DEFAULT else token
        if tok is not None:
            hdrs["Authorization"] = f"Bearer {tok}"
        if body is not None:
            data = json.dumps(body).encode()
            ctype = ctype or "application/json"
        if ctype is not None:
            hdrs["Content-Type"] = ctype
        async with self.session.request(method, self.url + self.path(path), data=data,
                                        params=params, headers=hdrs,
                                        timeout=REQUEST_TIMEOUT) as r:
            return Resp(r.status, r.headers, await r.read())

    async def get(self, path: str, **kw: Any) -> Resp:
        return await self.call("GET", path, **kw)

    async def post(self, path: str, body: Any = None, **kw: Any) -> Resp:
        return await self.call("POST", path, body=body, **kw)

    async def put(self, path: str, body: Any = None, **kw: Any) -> Resp:
        return await self.call("PUT", path, body=body, **kw)

    async def patch(self, path: str, body: Any, ctype: str, **kw: Any) -> Resp:
        return await self.call("PATCH", path, body=body, ctype=ctype, **kw)

    async def delete(self, path: str, **kw: Any) -> Resp:
        return await self.call("DELETE", path, **kw)

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Obj:
        r = await self.call(method, path, body=body, **kw)
        assert r.status in (200, 201), r
        return r.body  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def client(server: ApiServer, namespace: str = "default") -> AsyncIterator[Api]:
    conn = aiohttp.TCPConnector(ssl=ssl_context(server))
    async with aiohttp.ClientSession(connector=conn) as session:
        yield Api(session, server, namespace)


# ---- assertions ---------------------------------------------------------------------------------


def assert_status(r: Resp, code: int, reason: str, *, fields: tuple[str, ...] = (),
                  mentions: tuple[str, ...] = ()) -> Obj:
    """``r`` is a Failure Status with ``code``/``reason``; each of ``fields``
    is a ``details.causes[].field`` and appears in the message."""
    assert r.status == code, r
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    st = r.body
    assert st["kind"] == "Status", st
    assert st["apiVersion"] == "v1", st
    assert st["status"] == "Failure", st
    assert st["code"] == code, st
    assert st["reason"] == reason, st
    assert isinstance(st.get("message"), str) and st["message"], st
    causes = (st.get("details") or {}).get("causes") or []
    got_fields = [c.get("field") for c in causes]
    for f in fields:
        assert f in got_fields, (f, st)
        assert f in st["message"], (f, st)
    for text in mentions:
        assert text in st["message"], (text, st)
    return st  # type: ignore[no-any-return]


@contextlib.contextmanager
def nothing_written(server: ApiServer) -> Iterator[None]:
    """Every committed write bumps the store's resourceVersion: it must not move."""
    before = server.store.current_rv()
    yield
    assert server.store.current_rv() == before, "a failed request wrote to the store"


async def assert_absent(api: Api, path: str) -> None:
    r = await api.get(path)
    assert_status(r, 404, "NotFound")


async def list_rv(api: Api, path: str) -> str:
    return str((await api.ok("GET", path))["metadata"]["resourceVersion"])


async def create_widget_crd(api: Api) -> None:
    crd = yaml.safe_load(WIDGET_CRD)
    r = await api.post(CRDS, crd)
    assert r.status == 201, r

    async def established() -> bool:
        got = await api.get(f"{CRDS}/widgets.example.com")
        conds = (got.body.get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
            return False
        return (await api.get("/apis/example.com/v1/widgets")).status == 200

    await eventually(established, "widgets.example.com to be served")


async def settle(server: ApiServer) -> None:
    """Background lifecycles (CRD status, namespaces) write asynchronously:
    wait until the store is quiet before measuring "nothing written"."""
    async def quiet() -> bool:
        rv = server.store.current_rv()
        await asyncio.sleep(0.1)
        return server.store.current_rv() == rv

    await eventually(quiet, "the store to settle")


def cm(name: str, **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": dict(data)}


def widget(name: str, **spec: Any) -> Obj:
    body = {"color": "red", "size": 3, "owner": "alice"}
    body.update(spec)
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name},
            "spec": {k: v for k, v in body.items() if v is not None}}


# ---- the fixtures of a module of wire tests (imported by the module that uses them) ----------


@pytest_asyncio.fixture(scope="module", loop_scope="module", name="shared_server")
async def shared_server_fixture(module_api_server: ApiServer) -> ApiServer:
    """The module's server (``module_api_server``, which a module may
    override) plus widgets.example.com."""
    async with client(module_api_server) as a:
        await create_widget_crd(a)
    return module_api_server


@pytest_asyncio.fixture(loop_scope="module", name="api")
async def api_fixture(shared_server: ApiServer, ns: str) -> AsyncIterator[Api]:
    """An :class:`Api` in the test's own namespace, the server settled."""
    async with client(shared_server, ns) as a:
        await settle(shared_server)
        yield a
