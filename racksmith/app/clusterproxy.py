"""The management API's way into each managed cluster's own API: a proxy on
the management API server's port (kube's ``services/proxy``, Rancher's
cluster proxy), for the web console and anyone the management API trusts.

Owns :class:`ClusterProxy`, whose :meth:`~ClusterProxy.routes` serve
``/clusters/{namespace}/{name}/proxy/{path}`` (GET, POST, PUT, PATCH,
DELETE): the request, its query string and its body go to ``/{path}`` of
that Cluster's API; its status, ``Content-Type`` and body come back. A
``watch`` is streamed chunk by chunk as it arrives, never buffered; asked
for over WebSocket (the console's informers: subprotocol
``watch.racksmith.io``, the token in a second one), each event of the
cluster's watch is one text message.

Who may: the caller is authenticated by the API server's middleware (this
path is exempt from the middleware's own RBAC check only, never from its
authentication: an invalid credential is a 401 there, none is a 401 here);
the API server's authorizer is then asked whether the caller may ``VERB``
the subresource ``clusters/proxy`` (group ``cluster.racksmith.io``) of that
Cluster in its namespace, the verb from the method (GET → get, POST →
create, PUT → update, PATCH → patch, DELETE → delete). Refused: a 403
Status in kube-apiserver's words.

As whom: the proxy reaches each cluster as an identity of its own there,
``console`` (:data:`IDENTITY`: the client certificate
``<cluster>-racksmith-console`` the Cluster controller issues, with
:data:`ACCESS` as its role inside the cluster), through the per-cluster
tracker's access (``racksmith.runtime.clusters``), never with the admin
kubeconfig and never with the caller's credentials (no header but
``Accept`` and ``Content-Type`` is passed on). Key material is written for
the TLS layer only, by the tracker (0600 under 0700 folders).

Every failure to reach a cluster (no such Cluster, no endpoint or identity
yet, its API unreachable, no tracker in this process) is a 503 Status that
says so; nothing a client sends makes a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from aiohttp import web
from yarl import URL

from racksmith.apiserver import errors
from racksmith.apiserver.http.app import ATTRS_KEY, USER_KEY, forbidden, subject_of
from racksmith.apiserver.rbac.authorizer import Subject
from racksmith.apiserver.rbac.rules import Attributes
from racksmith.runtime.access import Access, watches, writes
from racksmith.runtime.client import Client
from racksmith.runtime.clusters import ClusterAccess, ClusterClients
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import (
    CLUSTER_LOCKS,
    CMRS,
    NMRS,
    NODE_LOCKS,
    NODES,
    PODS,
    PVCS,
    PVS,
    STORAGE_CLASSES,
    VOLUMES,
)

log = structlog.get_logger("racksmith.app.clusterproxy")

PREFIX = "/clusters/"
"""Where the proxy lives on the management API server's port."""
ROUTE = PREFIX + "{namespace}/{name}/proxy/{path:.*}"
GROUP = "cluster.racksmith.io"
RESOURCE, SUBRESOURCE = "clusters", "proxy"
IDENTITY = "console"
"""The proxy's identity inside every cluster (``<cluster>-racksmith-console``)."""

ACCESS: Access = watches(NODES, PODS, PVS, PVCS, STORAGE_CLASSES, VOLUMES, NMRS, CMRS,
                         NODE_LOCKS, CLUSTER_LOCKS) + writes(VOLUMES, "create", "delete")
"""What the ``console`` identity may do inside every cluster: read what the
console shows of it, create and delete Volumes."""

METHOD_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}
FORWARDED_HEADERS = ("Accept", "Content-Type")
"""The only request headers passed on (never Authorization, cookies or the
WebSocket handshake's)."""
WATCH_PROTOCOL = "watch.racksmith.io"
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 120.0
"""Seconds a request that is not a watch may take at the cluster."""

AccessOf = Callable[[ObjectKey, str], Awaitable[ClusterAccess | None]]
Authorize = Callable[[Subject, Attributes], bool]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]


@dataclass(frozen=True)
class Upstreams:
    """How this process reaches the clusters: the per-cluster tracker and
    the reader of each identity's access (``racksmith.app.clusterplanes``)."""

    tracker: ClusterClients
    access_of: AccessOf


def is_public(path: str) -> bool:
    """Paths the API server's middleware authenticates but leaves the RBAC
    check of to this module (see the module docstring)."""
    return path.startswith(PREFIX)


def attributes(method: str, namespace: str, name: str, path: str) -> Attributes:
    """The RBAC attributes of a proxied request."""
    return Attributes(verb=METHOD_VERBS.get(method, method.lower()), api_group=GROUP,
                      api_version="v1alpha1", resource=RESOURCE, subresource=SUBRESOURCE,
                      namespace=namespace, name=name, path=path)


def is_watch(request: web.Request) -> bool:
    return request.method == "GET" and request.query.get("watch", "") in _TRUE


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


class ClusterProxy:
    """The routes and their upstream sessions (see the module docstring).
    ``authorize``: the API server's authorizer; ``upstreams``: how clusters
    are reached now (None: not from this process)."""

    def __init__(self, authorize: Authorize,
                 upstreams: Callable[[], Upstreams | None] = lambda: None) -> None:
        self.authorize = authorize
        self.upstreams = upstreams
        self._sessions: dict[ObjectKey, tuple[Client, aiohttp.ClientSession, str]] = {}

    def routes(self) -> list[Route]:
        """The proxy's routes, for ``ApiServer(extra_routes=...)``."""
        return [(method, ROUTE, self.handle) for method in METHOD_VERBS]

    async def close(self) -> None:
        for _client, session, _server in self._sessions.values():
            await session.close()
        self._sessions.clear()

    # --- one request -----------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        key = ObjectKey(namespace, name)
        attrs = attributes(request.method, namespace, name, request.path)
        request[ATTRS_KEY] = attrs  # the audit line names clusters/proxy
        user = request.get(USER_KEY)
        if user is None:
            raise errors.unauthorized()
        if user.host is not None or not self.authorize(subject_of(user), attrs):
            raise forbidden(attrs, user)
        upstreams = self.upstreams()
        if upstreams is None:
            raise errors.unavailable(
                f"the API of cluster {key} cannot be reached from this server: it runs "
                "no cluster tracker (the controllers run elsewhere, or cluster endpoints "
                "are not probed)")
        session, server = await self._session(upstreams, key)
        url = self._target(request, server)
        headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
        if is_websocket(request):
            if not is_watch(request):
                raise errors.bad_request("a WebSocket through the cluster proxy is a watch: "
                                         "add watch=1")
            return await self._websocket_watch(request, session, url, headers, key)
        body = await request.read() if request.method in ("POST", "PUT", "PATCH") else None
        watch = is_watch(request)
        timeout = aiohttp.ClientTimeout(total=None if watch else REQUEST_TIMEOUT,
                                        sock_connect=CONNECT_TIMEOUT)
        try:
            async with session.request(request.method, url, headers=headers, data=body,
                                       timeout=timeout, allow_redirects=False) as upstream:
                if watch and upstream.status == 200:
                    return await self._stream(request, upstream, key)
                data = await upstream.read()
                resp = web.Response(status=upstream.status, body=data, content_type=None)
                if "Content-Type" in upstream.headers:
                    resp.headers["Content-Type"] = upstream.headers["Content-Type"]
                return resp
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise _unreachable(key, exc) from None

    @staticmethod
    def _target(request: web.Request, server: str) -> URL:
        """``server/{path}?{query}`` of the request, as sent (percent escapes kept)."""
        parts = request.rel_url.raw_path.split("/", 5)  # "", clusters, ns, name, proxy, rest
        rest = parts[5] if len(parts) > 5 else ""
        query = request.rel_url.raw_query_string
        return URL(f"{server}/{rest}" + (f"?{query}" if query else ""), encoded=True)

    async def _session(self, upstreams: Upstreams, key: ObjectKey
                       ) -> tuple[aiohttp.ClientSession, str]:
        """The session to cluster ``key`` as :data:`IDENTITY`: made from the
        tracker's client for the current access (remade when it changes)."""
        verdict = upstreams.tracker.reachability(key)
        if verdict.reachable is False:
            raise errors.unavailable(f"the API of cluster {key} cannot be reached now: "
                                     f"{verdict.reason}")
        try:
            access = await upstreams.access_of(key, IDENTITY)
        except Exception as exc:  # the management API's own trouble: not the caller's
            log.warning("cluster access not readable", cluster=str(key),
                        error=type(exc).__name__)
            raise errors.unavailable(f"how to reach cluster {key} cannot be read now") from None
        if access is None:
            raise errors.unavailable(
                f"cluster {key} has no API the proxy can reach yet (no such Cluster, no "
                f"control-plane endpoint yet, or its {IDENTITY} identity not issued yet)")
        client = upstreams.tracker.client(key, access, field_manager=IDENTITY)
        known = set(upstreams.tracker.known())
        for gone in [k for k in self._sessions if k not in known]:  # Clusters deleted
            await self._sessions.pop(gone)[1].close()
        kept = self._sessions.get(key)
        if kept is not None and kept[0] is client:
            return kept[1], kept[2]
        if kept is not None:
            await kept[1].close()
        conf = client.api_client.configuration
        context = ssl.create_default_context(cafile=conf.ssl_ca_cert)
        if conf.cert_file:
            context.load_cert_chain(conf.cert_file, keyfile=conf.key_file)
        # no connection limit: every open watch holds one
        session = aiohttp.ClientSession(
            trust_env=False, connector=aiohttp.TCPConnector(limit=0, ssl=context),
            read_bufsize=2 ** 21)
        server = str(conf.host).rstrip("/")
        self._sessions[key] = (client, session, server)
        return session, server

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse,
                      key: ObjectKey) -> web.StreamResponse:
        """A watch as a chunked HTTP response, each chunk written as it arrives."""
        resp = web.StreamResponse(status=200, headers={
            "Content-Type": upstream.headers.get("Content-Type", "application/json"),
            "Cache-Control": "no-cache, private"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.info("cluster watch ended", cluster=str(key), error=type(exc).__name__)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
        return resp

    async def _websocket_watch(self, request: web.Request, session: aiohttp.ClientSession,
                               url: URL, headers: dict[str, str],
                               key: ObjectKey) -> web.StreamResponse:
        """The cluster's watch (a stream of JSON lines) as one WebSocket text
        message per event. The upgrade is answered once the cluster answered:
        a refusal there is an ERROR event carrying its Status; a broken stream
        closes with 1011 (the client lists again), its end with 1000."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
        ws = web.WebSocketResponse(protocols=(WATCH_PROTOCOL,), heartbeat=30.0)
        try:
            upstream = await session.get(url, headers=headers, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise _unreachable(key, exc) from None
        try:
            await ws.prepare(request)
            if upstream.status != 200:
                await _send(ws, {"type": "ERROR", "object": await _status_of(upstream)})
                await ws.close(code=aiohttp.WSCloseCode.OK)
                return ws
            pump = asyncio.create_task(_pump(upstream.content, ws, key))
            reader = asyncio.create_task(_drain(ws))
            done, _pending = await asyncio.wait({pump, reader},
                                                return_when=asyncio.FIRST_COMPLETED)
            for task in (pump, reader):
                if task not in done:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            code = aiohttp.WSCloseCode.OK
            if pump in done and not pump.cancelled() and pump.exception() is None \
                    and not pump.result():
                code = aiohttp.WSCloseCode.INTERNAL_ERROR
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.close(code=code)
            return ws
        finally:
            upstream.release()


async def _pump(content: aiohttp.StreamReader, ws: web.WebSocketResponse,
                key: ObjectKey) -> bool:
    """Each line of the cluster's watch as a message; True: the stream ended
    cleanly, False: it broke."""
    try:
        async for line in _lines(content):
            if ws.closed:
                return True
            await ws.send_str(line)
    except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError) as exc:
        log.info("cluster watch broke", cluster=str(key), error=type(exc).__name__)
        return False
    return True


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The non-empty lines of a JSON-lines stream (a long line is read whole)."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                yield line.decode()
    if buffer.strip():
        yield buffer.decode()


async def _drain(ws: web.WebSocketResponse) -> None:
    """Read (and drop) the client's messages until it closes."""
    async for _msg in ws:
        pass


async def _send(ws: web.WebSocketResponse, event: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        await ws.send_str(orjson.dumps(event).decode())


async def _status_of(upstream: aiohttp.ClientResponse) -> dict[str, Any]:
    """The Status the cluster answered with (one made up if it sent none)."""
    try:
        body = orjson.loads(await upstream.read())
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError):
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return body
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure",
            "code": upstream.status, "reason": upstream.reason or "",
            "message": f"the cluster's API answered {upstream.status}"}


def _unreachable(key: ObjectKey, exc: BaseException) -> errors.ApiError:
    return errors.unavailable(f"the API of cluster {key} did not answer "
                              f"({type(exc).__name__})")


__all__ = ["ACCESS", "IDENTITY", "PREFIX", "ClusterProxy", "Upstreams", "attributes",
           "is_public"]
