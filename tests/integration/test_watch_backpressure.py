"""A watch whose client stops reading costs the server bounded memory.

A real API server in-process with a small ``watch_queue_size`` (8). A client
opens a watch over a raw TLS socket with a 4 KiB receive buffer and then
reads nothing while 80 ConfigMaps of 256 KiB each are created (20 MiB, far
more than the socket buffers hold). The server must not queue the whole
stream for it: once the watch's own buffer is full the watch ends with one
ERROR event, a 410 Expired Status (the client re-lists, as after any 410),
before every event was sent. The server keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import aiohttp
import pytest

from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving
from tests.harness.http import ssl_context

CM = "/api/v1/namespaces/default/configmaps"
OBJECTS = 80
BLOB = "x" * (256 * 1024)
ADDED = b'"type":"ADDED"'


async def _create(srv: ApiServer, session: aiohttp.ClientSession, name: str,
                  blob: str = "") -> str:
    async with session.post(srv.url + CM, json={"metadata": {"name": name},
                                                "data": {"k": blob or name}},
                            headers={"Authorization": f"Bearer {srv.token}"}) as resp:
        assert resp.status == 201, await resp.text()
        made = await resp.json()
        return str(made["metadata"]["resourceVersion"])


async def _open_watch(srv: ApiServer, rv: str
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A watch on a raw TLS connection whose socket receives little at a time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.port))
    reader, writer = await asyncio.open_connection(
        sock=sock, ssl=ssl_context(srv), server_hostname="127.0.0.1", limit=4096)
    writer.write((f"GET {CM}?watch=1&resourceVersion={rv} HTTP/1.1\r\n"
                  f"Host: 127.0.0.1\r\nAuthorization: Bearer {srv.token}\r\n\r\n").encode())
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    assert status.startswith(b"HTTP/1.1 200"), status
    return reader, writer


async def test_a_watch_that_is_not_read_ends_with_410_not_a_growing_queue(
        tmp_path: Path) -> None:
    async with serving(tmp_path / "data", with_crds=False, watch_queue_size=8) as srv, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_context(srv)),
                                  timeout=aiohttp.ClientTimeout(total=60)) as session:
        rv = await _create(srv, session, "start")
        reader, writer = await _open_watch(srv, rv)
        try:
            for i in range(OBJECTS):  # the watcher reads nothing meanwhile
                await _create(srv, session, f"big-{i:03d}", BLOB)
            # The server still serves: another create goes through.
            await _create(srv, session, "after")
            # Now read what the watch sends until its ERROR event.
            received = b""
            while b'"type":"ERROR"' not in received:
                try:
                    data = await asyncio.wait_for(reader.read(1 << 20), 30)
                except TimeoutError:
                    sent = received.count(ADDED)
                    pytest.fail(f"no ERROR event: the server queued the whole stream ({sent} sent)")
                assert data, "the watch ended without an ERROR event"
                received += data
            tail = received[received.index(b'"type":"ERROR"'):]
            assert b'"code":410' in tail and b'"reason":"Expired"' in tail, tail[:300]
            added = received.count(ADDED)
            assert 0 < added < OBJECTS, f"{added} of {OBJECTS} events sent before the 410"
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
