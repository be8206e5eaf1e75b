"""Watch streams.

Owns: the ``watch=true`` protocol: resourceVersion semantics (unset or "0":
synthetic ADDED events for the current state first; N: every change after N,
or one ERROR event with a 410 ``Expired`` Status when N is compacted away),
``sendInitialEvents``, label/field selector filtering (an object that stops
matching is sent as DELETED, one that starts matching as ADDED), BOOKMARK
events, ``timeoutSeconds``, Table-formatted events, and ending the stream
when the client goes away (aiohttp does not cancel the handler for us).
The same stream is served over WebSocket when the request asks for an
upgrade (one event per text message; the subprotocol ``watch.racksmith.io``),
which is how the web console watches many collections at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from racksmith.apiserver import errors
from racksmith.apiserver.registry import ResourceInfo
from racksmith.apiserver.service import ListOptions, ResourceService
from racksmith.apiserver.store.base import EventType, Expired, StoreUnavailableError, WatchEvent
from racksmith.apiserver.tables import partial_metadata, to_table

Obj = dict[str, Any]

BOOKMARK_INTERVAL = 15.0
POLL_INTERVAL = 1.0
CHUNK = 256
"""Events joined into one write, at most (more when one burst is longer)."""
QUEUED_BURSTS = 4
"""Bursts taken from the store and not yet sent, at most, per watch."""
DEFAULT_TIMEOUT = (1800, 3600)


class WatchParams:
    def __init__(self, *, resource_version: str, timeout_seconds: int, bookmarks: bool,
                 send_initial_events: bool, list_opts: ListOptions, table: bool,
                 partial: bool) -> None:
        self.resource_version = resource_version
        self.timeout_seconds = timeout_seconds
        self.bookmarks = bookmarks
        self.send_initial_events = send_initial_events
        self.list_opts = list_opts
        self.table = table
        self.partial = partial


WEBSOCKET_PROTOCOL = "watch.racksmith.io"
"""The subprotocol a browser offers for a watch over WebSocket (with its token
in a second one, ``base64url.bearer.authorization.k8s.io.<token>``, as
kube-apiserver accepts): the server selects this one, never the token."""


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


class _HttpSink:
    """A watch as a chunked HTTP response of JSON lines (kubectl, clients)."""

    def __init__(self) -> None:
        self.response = web.StreamResponse(status=200, headers={
            "Content-Type": "application/json", "Cache-Control": "no-cache, private"})
        self.gone = False

    async def prepare(self, request: web.Request) -> None:
        self.response.enable_chunked_encoding()
        await self.response.prepare(request)

    async def send(self, data: bytes) -> bool:
        try:
            await self.response.write(data)
        except (ConnectionResetError, ConnectionError, RuntimeError):
            return False
        return True

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write_eof()


class _WebSocketSink:
    """A watch over WebSocket, one event per text message (browsers: an
    HTTP/1.1 page may hold only 6 connections to a host, WebSockets do not
    count against that). Messages from the client are read and dropped; a
    close from the client ends the watch."""

    def __init__(self) -> None:
        self.response = web.WebSocketResponse(protocols=(WEBSOCKET_PROTOCOL,), heartbeat=30.0,
                                              autoping=True)
        self.gone = False
        self._reader: asyncio.Task[None] | None = None

    async def prepare(self, request: web.Request) -> None:
        await self.response.prepare(request)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for _msg in self.response:
                pass
        finally:
            self.gone = True

    async def send(self, data: bytes) -> bool:
        if self.gone or self.response.closed:
            return False
        try:
            for line in data.split(b"\n"):
                if line:
                    await self.response.send_str(line.decode())
        except (ConnectionResetError, ConnectionError, RuntimeError):
            return False
        return True

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader


_Sink = _HttpSink | _WebSocketSink


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


class RenderCache:
    """Watch lines rendered once and shared by every watcher of the server.

    Watchers of the same resource, version and form (plain, Table,
    PartialObjectMetadata) send the same bytes for the same event: the first
    one to send it renders it (decode, present at the version, encode), the
    others take the bytes (and never decode the event). Bounded: the oldest
    entries go first.
    """

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._lines: dict[tuple[Any, ...], bytes] = {}
        self.hits = 0
        self.renders = 0

    def line(self, key: tuple[Any, ...], render: Callable[[], bytes]) -> bytes:
        cached = self._lines.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        out = render()
        self.renders += 1
        lines = self._lines
        if len(lines) >= self.size:
            del lines[next(iter(lines))]
        lines[key] = out
        return out


_TICK = object()
"""Put into a watcher's queue every POLL_INTERVAL: time to check the
deadline, the client and bookmarks (no timeout is armed per event)."""


async def serve_watch(request: web.Request, service: ResourceService, info: ResourceInfo,
                      namespace: str | None, params: WatchParams,
                      renders: RenderCache | None = None) -> web.StreamResponse:
    label, fieldsel = service.parse_selectors(info, params.list_opts)
    matches = service.matcher(info, label, fieldsel)
    rv_text = params.resource_version
    if rv_text not in ("", "0"):
        try:
            since = int(rv_text)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {rv_text}") from None
    else:
        since = -1

    sink: _Sink = (_WebSocketSink() if is_websocket(request) else _HttpSink())
    await sink.prepare(request)

    def render(event_type: str, obj: Obj) -> bytes:
        obj = service.present(info, obj)
        if params.table and event_type != "ERROR":
            payload: Obj = to_table(info, [obj], rv=obj["metadata"].get("resourceVersion", ""))
        elif params.partial and event_type != "ERROR":
            payload = partial_metadata(obj)
        else:
            payload = obj
        return orjson.dumps({"type": event_type, "object": payload}) + b"\n"

    send = sink.send
    cache = renders if renders is not None else RenderCache(size=256)
    form = "table" if params.table else "partial" if params.partial else ""
    identity = (info.group, info.version, info.plural, form)

    def render_event(event_type: str, event: WatchEvent) -> bytes:
        key = (*identity, event_type, event.rv, event.key.namespace, event.key.name)
        return cache.line(key, lambda: render(event_type, event.decoded()))

    selective = label is not None or fieldsel is not None
    matched: set[tuple[str, str]] = set()
    known: set[tuple[str, str]] = set()
    """Keys whose matching state at the current point of the stream is known."""
    initial: list[Obj] = []
    if since < 0 or params.send_initial_events:
        page = await service.list(info, namespace, ListOptions(
            label_selector=params.list_opts.label_selector,
            field_selector=params.list_opts.field_selector))
        initial = page.items
        # the list is the whole state at its rv: anything not in it is absent
        since = page.rv
        known_all = True
    else:
        known_all = False
    for obj in initial:
        meta = obj["metadata"]
        matched.add((meta.get("namespace", ""), meta["name"]))
        if not await send(render("ADDED", obj)):
            return sink.response
    last_rv = since
    if params.send_initial_events and params.bookmarks:
        bookmark = _bookmark(info, last_rv, initial_end=True)
        if not await send(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n"):
            return sink.response

    timeout = params.timeout_seconds or random.randint(*DEFAULT_TIMEOUT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # Bounded: while the client is not reading, the pump stops taking bursts
    # from the store's subscription, whose own bound (the store's
    # watch_queue_size) then ends the watch with Expired — a watcher that
    # does not keep up costs bounded memory, never the whole event stream.
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=QUEUED_BURSTS)
    scope = service.scope(info, namespace)

    probes: list[Callable[[], int]] = []

    def safe_rv() -> int:
        """What a bookmark may name: everything up to it was yielded by the
        store's watch (and, with the queue empty, sent)."""
        return probes[0]() if probes and queue.empty() else 0

    async def pump() -> None:
        try:
            async for batch in service.store.watch_batches(scope, since,
                                                           on_live=probes.append):
                await queue.put(batch)
            await queue.put(None)
        except (Expired, Exception) as exc:
            await queue.put(exc)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(max(0.0, min(POLL_INTERVAL, deadline - loop.time())))
            if not queue.full():  # full: the client is not reading; the loop is awake anyway
                queue.put_nowait(_TICK)

    pump_task = asyncio.create_task(pump())
    tick_task = asyncio.create_task(ticker())
    next_bookmark = loop.time() + BOOKMARK_INTERVAL
    carried: Any = None
    """A tick or an end taken from the queue while coalescing: it is the next
    item handled (nothing is put back in the queue)."""
    try:
        while True:
            now = loop.time()
            if now >= deadline or _client_gone(request) or sink.gone:
                break
            if carried is not None:
                item, carried = carried, None
            else:
                item = await queue.get()
            if item is _TICK:
                if params.bookmarks and loop.time() >= next_bookmark:
                    next_bookmark = loop.time() + BOOKMARK_INTERVAL
                    bm = _bookmark(info, max(last_rv, safe_rv()))
                    if not await send(orjson.dumps({"type": "BOOKMARK", "object": bm}) + b"\n"):
                        break
                continue
            if item is None:
                break
            if isinstance(item, Expired):
                status = errors.gone(f"too old resource version: {since} "
                                     f"({service.store.oldest_rv()})").to_status()
                await send(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
                break
            if isinstance(item, StoreUnavailableError):
                status = errors.unavailable(f"storage unavailable: {item}").to_status()
                await send(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
                break
            if isinstance(item, BaseException):
                status = errors.internal("watch stream ended unexpectedly").to_status()
                await send(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
                break
            # ``item`` is a burst of events (a list); what else is already
            # queued joins it: one write (one TLS record) per CHUNK events.
            chunk: list[bytes] = []
            pending: Any = None
            batch: list[WatchEvent] = item
            while True:
                for event in batch:
                    ident = (event.key.namespace, event.key.name)
                    if selective and not known_all and ident not in known:
                        await _learn(service, event, ident, matches, matched)
                        known.add(ident)
                    out = _filter(event, matches, matched) if selective else event.type.value
                    last_rv = event.rv
                    if out is not None:
                        chunk.append(render_event(out, event))
                if len(chunk) >= CHUNK or queue.empty():
                    break
                nxt = queue.get_nowait()
                if not isinstance(nxt, list):
                    pending = nxt
                    break
                batch = nxt
            if chunk and not await send(b"".join(chunk)):
                break
            carried = pending
    finally:
        pump_task.cancel()
        tick_task.cancel()
        for task in (pump_task, tick_task):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    await sink.close()
    return sink.response


async def _learn(service: ResourceService, event: WatchEvent, ident: tuple[str, str],
                 matches: Callable[[Obj], bool], matched: set[tuple[str, str]]) -> None:
    """Whether the object of ``event`` matched the selectors just before it
    (adds ``ident`` to ``matched`` if so). An object created by the event
    matched nothing before (no store read); otherwise the store tells its
    state before the event, and where its log no longer does, the object is
    taken to have matched before if it matches now."""
    if event.type is EventType.ADDED:
        return
    was_known, before = await service.store.state_before(event.key, event.rv)
    if was_known:
        if before is not None and matches(before):
            matched.add(ident)
    elif matches(event.obj):
        matched.add(ident)


def _bookmark(info: ResourceInfo, rv: int, initial_end: bool = False) -> Obj:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}


def _filter(event: WatchEvent, matches: Callable[[Obj], bool],
            matched: set[tuple[str, str]]) -> str | None:
    ident = (event.key.namespace, event.key.name)
    if event.type is EventType.DELETED:
        if ident in matched:
            matched.discard(ident)
            return "DELETED"
        return "DELETED" if matches(event.obj) else None
    now = matches(event.obj)
    before = ident in matched
    if now:
        matched.add(ident)
        if event.type is EventType.ADDED or not before:
            return "ADDED"
        return "MODIFIED"
    if before:
        matched.discard(ident)
        return "DELETED"
    return None
