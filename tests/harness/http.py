"""A tiny raw HTTP client for tests that need exact requests and status codes.

Owns: an aiohttp session bound to an in-process :class:`ApiServer` over TLS
with its token, returning ``(status, body, headers)`` without raising. Paths
may be written with ``{ns}``: it stands for the client's namespace (the
test's own, see :mod:`tests.harness.fixtures`).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from racksmith.apiserver.server import ApiServer


class RawClient:
    def __init__(self, server: ApiServer, session: aiohttp.ClientSession,
                 namespace: str = "default") -> None:
        self.server = server
        self.session = session
        self.ns = namespace

    def path(self, path: str) -> str:
        """``path`` with ``{ns}`` replaced by this client's namespace."""
        return path.replace("{ns}", self.ns)

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = "application/json", raw: bytes | None = None,
                      headers: dict[str, str] | None = None
                      ) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
        data = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
        hdrs = {"Authorization": f"Bearer {self.server.token}", "Content-Type": content_type}
        hdrs.update(headers or {})
        async with self.session.request(method, self.server.url + self.path(path), data=data,
                                        headers=hdrs) as resp:
            text = await resp.read()
            try:
                parsed: Any = json.loads(text) if text else None
            except ValueError:
                parsed = text
            return resp.status, parsed, resp.headers

    async def get(self, path: str) -> tuple[int, Any]:
        code, body, _ = await self.request("GET", path)
        return code, body

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        code, out, _ = await self.request("POST", path, body)
        return code, out

    async def put(self, path: str, body: Any) -> tuple[int, Any]:
        code, out, _ = await self.request("PUT", path, body)
        return code, out

    async def patch(self, path: str, body: Any,
                    content_type: str = "application/merge-patch+json") -> tuple[int, Any]:
        code, out, _ = await self.request("PATCH", path, body, content_type=content_type)
        return code, out

    async def delete(self, path: str, body: Any = None) -> tuple[int, Any]:
        code, out, _ = await self.request("DELETE", path, body)
        return code, out


def ssl_context(server: ApiServer) -> ssl.SSLContext:
    """A client TLS context trusting ``server``'s CA."""
    return ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))


@asynccontextmanager
async def raw_client(server: ApiServer, namespace: str = "default"
                     ) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context(server))) as session:
        yield RawClient(server, session, namespace)
