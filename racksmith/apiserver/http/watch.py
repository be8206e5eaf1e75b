"""Watch streams.

Owns: the ``watch=true`` protocol: resourceVersion semantics (unset or "0":
synthetic ADDED events for the current state first; N: every change after N,
or one ERROR event with a 410 ``Expired`` Status when N is compacted away),
``sendInitialEvents``, label/field selector filtering (an object that stops
matching is sent as DELETED, one that starts matching as ADDED), BOOKMARK
events, ``timeoutSeconds``, Table-formatted events, and ending the stream
when the client goes away (aiohttp does not cancel the handler for us).
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
from racksmith.apiserver.store.base import EventType, Expired, WatchEvent
from racksmith.apiserver.tables import partial_metadata, to_table

Obj = dict[str, Any]

BOOKMARK_INTERVAL = 15.0
POLL_INTERVAL = 1.0
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


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def serve_watch(request: web.Request, service: ResourceService, info: ResourceInfo,
                      namespace: str | None, params: WatchParams) -> web.StreamResponse:
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

    resp = web.StreamResponse(status=200, headers={
        "Content-Type": "application/json", "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)

    def render(event_type: str, obj: Obj) -> bytes:
        obj = service.present(info, obj)
        if params.table and event_type != "ERROR":
            payload: Obj = to_table(info, [obj], rv=obj["metadata"].get("resourceVersion", ""))
        elif params.partial and event_type != "ERROR":
            payload = partial_metadata(obj)
        else:
            payload = obj
        return orjson.dumps({"type": event_type, "object": payload}) + b"\n"

    async def send(data: bytes) -> bool:
        try:
            await resp.write(data)
        except (ConnectionResetError, ConnectionError, RuntimeError):
            return False
        return True

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
            return resp
    last_rv = since
    if params.send_initial_events and params.bookmarks:
        bookmark = _bookmark(info, last_rv, initial_end=True)
        if not await send(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n"):
            return resp

    timeout = params.timeout_seconds or random.randint(*DEFAULT_TIMEOUT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    queue: asyncio.Queue[WatchEvent | BaseException | None] = asyncio.Queue()
    scope = service.scope(info, namespace)

    async def pump() -> None:
        try:
            async for event in service.store.watch(scope, since):
                await queue.put(event)
            await queue.put(None)
        except (Expired, Exception) as exc:
            await queue.put(exc)

    pump_task = asyncio.create_task(pump())
    next_bookmark = loop.time() + BOOKMARK_INTERVAL
    try:
        while True:
            now = loop.time()
            if now >= deadline or _client_gone(request):
                break
            wait = min(POLL_INTERVAL, deadline - now)
            try:
                item = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                if params.bookmarks and loop.time() >= next_bookmark:
                    next_bookmark = loop.time() + BOOKMARK_INTERVAL
                    bm = _bookmark(info, max(last_rv, _safe_rv(service, queue)))
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
            if isinstance(item, BaseException):
                status = errors.internal("watch stream ended unexpectedly").to_status()
                await send(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
                break
            ident = (item.key.namespace, item.key.name)
            if selective and not known_all and ident not in known:
                was_known, before = await service.store.state_before(item.key, item.rv)
                if (before if was_known else None) is not None and matches(before or {}):
                    matched.add(ident)
                elif not was_known and item.type is not EventType.ADDED:
                    # the log no longer tells: assume it matched before if it does now
                    if matches(item.obj):
                        matched.add(ident)
                known.add(ident)
            out = _filter(item, matches, matched) if selective else item.type.value
            last_rv = item.rv
            chunk = [render(out, item.obj)] if out is not None else []
            # Coalesce what is already queued into one write (one TLS record).
            pending: WatchEvent | BaseException | None = None
            while len(chunk) < 256 and not queue.empty():
                nxt = queue.get_nowait()
                if not isinstance(nxt, WatchEvent):
                    pending = nxt
                    break
                nident = (nxt.key.namespace, nxt.key.name)
                if selective and not known_all and nident not in known:
                    pending = nxt
                    break
                nout = _filter(nxt, matches, matched) if selective else nxt.type.value
                last_rv = nxt.rv
                if nout is not None:
                    chunk.append(render(nout, nxt.obj))
            if chunk and not await send(b"".join(chunk)):
                break
            if pending is not None:
                await _push_front(queue, pending)
    finally:
        pump_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pump_task
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write_eof()
    return resp


async def _push_front(queue: asyncio.Queue[Any], item: Any) -> None:
    """Put ``item`` back at the head of ``queue`` (only the writer reads it)."""
    rest = []
    while not queue.empty():
        rest.append(queue.get_nowait())
    await queue.put(item)
    for other in rest:
        await queue.put(other)


def _safe_rv(service: ResourceService, queue: asyncio.Queue[Any]) -> int:
    """The store's rv is a safe bookmark only when nothing is pending for us."""
    return service.store.current_rv() if queue.empty() else 0


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
