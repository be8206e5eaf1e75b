"""Watches over WebSocket, as the web console uses them (a browser may hold
only six HTTP/1.1 connections to a host; WebSockets do not count).

A real API server in-process. The token travels as the subprotocol
``base64url.bearer.authorization.k8s.io.<token>`` (kube-apiserver's
convention; browsers cannot set headers on a WebSocket) next to
``watch.racksmith.io``, which the server selects. Checked: events arrive one
per message in order, resumption from a resourceVersion, bookmarks, a 410
ERROR for an expired resourceVersion, and refusal (401, before the upgrade)
without a token, with a wrong one or a malformed one.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving
from tests.harness.http import ssl_context

CM = "/api/v1/namespaces/default/configmaps"


def bearer(token: str) -> str:
    raw = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"base64url.bearer.authorization.k8s.io.{raw}"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, aiohttp.ClientSession]]:
    """A server of the test's own: a short event log (50), so that a
    resourceVersion expires within the test, and no CRDs."""
    async with serving(tmp_path / "data", with_crds=False, event_log_size=50) as srv, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_context(srv)),
                                  timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield srv, session


async def create(srv: ApiServer, session: aiohttp.ClientSession, name: str) -> dict[str, Any]:
    async with session.post(srv.url + CM, json={"metadata": {"name": name},
                                                "data": {"k": name}},
                            headers={"Authorization": f"Bearer {srv.token}"}) as resp:
        assert resp.status == 201, await resp.text()
        result: dict[str, Any] = await resp.json()
        return result


async def events(ws: aiohttp.ClientWebSocketResponse, n: int) -> list[dict[str, Any]]:
    out = []
    while len(out) < n:
        msg = await ws.receive(timeout=20)
        assert msg.type is aiohttp.WSMsgType.TEXT, msg
        out.append(orjson.loads(msg.data))
    return out


async def test_watch_over_websocket_streams_events(
        server: tuple[ApiServer, aiohttp.ClientSession]) -> None:
    srv, session = server
    first = await create(srv, session, "one")
    rv = first["metadata"]["resourceVersion"]
    async with session.ws_connect(
            f"{srv.url}{CM}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true",
            protocols=("watch.racksmith.io", bearer(srv.token))) as ws:
        assert ws.protocol == "watch.racksmith.io"
        await create(srv, session, "two")
        await create(srv, session, "three")
        got = await events(ws, 2)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
            ("ADDED", "two"), ("ADDED", "three")]
    # no resourceVersion: the current state first, as synthetic ADDED events
    async with session.ws_connect(f"{srv.url}{CM}?watch=1",
                                  protocols=("watch.racksmith.io", bearer(srv.token))) as ws:
        got = await events(ws, 3)
        assert sorted(e["object"]["metadata"]["name"] for e in got) == ["one", "three", "two"]


async def test_expired_resource_version_is_a_410_error_event(
        server: tuple[ApiServer, aiohttp.ClientSession]) -> None:
    srv, session = server
    first = await create(srv, session, "old")
    for i in range(80):  # past the event log of 50
        await create(srv, session, f"n{i}")
    async with session.ws_connect(
            f"{srv.url}{CM}?watch=1&resourceVersion={first['metadata']['resourceVersion']}",
            protocols=("watch.racksmith.io", bearer(srv.token))) as ws:
        (err,) = await events(ws, 1)
        assert err["type"] == "ERROR" and err["object"]["code"] == 410


@pytest.mark.parametrize("protocols", [
    ("watch.racksmith.io",),
    ("watch.racksmith.io", bearer("not-a-token")),
    ("watch.racksmith.io", "base64url.bearer.authorization.k8s.io.%%%"),
])
async def test_watch_over_websocket_needs_a_valid_token(
        server: tuple[ApiServer, aiohttp.ClientSession], protocols: tuple[str, ...]) -> None:
    srv, session = server
    with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
        async with session.ws_connect(f"{srv.url}{CM}?watch=1", protocols=protocols):
            pass
    assert exc.value.status == 401


async def test_the_token_subprotocol_is_ignored_on_plain_requests(
        server: tuple[ApiServer, aiohttp.ClientSession]) -> None:
    """Only a WebSocket upgrade may carry the token as a subprotocol."""
    srv, session = server
    async with session.get(srv.url + CM,
                           headers={"Sec-WebSocket-Protocol": bearer(srv.token)}) as resp:
        assert resp.status == 401
