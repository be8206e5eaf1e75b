"""Sources of keys: the ``Source`` protocol and ``KubeSource``, list+watch of
one resource over the Kubernetes REST protocol (kubernetes_asyncio).

``KubeSource`` lists the resource (paged with ``limit``/``continue``), emits
the keys of every object, then watches from the list's resourceVersion with
``allowWatchBookmarks=true`` and ``timeoutSeconds``; each event emits keys.
When a watch ends it resumes from the last resourceVersion seen (bookmarks
included); on ``410 Gone`` it lists again (and emits the keys of objects that
vanished meanwhile); on connection or server errors it backs off on the clock
and retries. Keys come from a ``Mapper`` (default: the object's own key), so
the same class serves "secondary" watches that enqueue owners.

Events are hints, never state: the reconciler re-reads what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.runtime.clock import Clock, SystemClock
from racksmith.runtime.keys import Mapper, ObjectKey, key_of, self_keys
from racksmith.runtime.queue import Backoff


class Source(Protocol):
    """Something that yields the keys a controller must reconcile.

    ``keys()`` runs until cancelled (a finite fake may end; the controller
    then simply stops reading it). It may yield a key many times; the work
    queue de-duplicates. ``has_synced`` turns True once the initial state has
    been emitted (the first complete list) and stays True for the rest of that
    ``keys()`` iteration; a new iteration (the controller run again, e.g. when
    leadership comes back) starts unsynced, so readiness waits for its list.
    """

    @property
    def has_synced(self) -> bool: ...

    def keys(self) -> AsyncIterator[ObjectKey]: ...


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource collection: ``group`` ``""`` is the core API (``/api/v1``)."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        """The collection path, across namespaces when ``namespace`` is None."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


class ApiStatusError(Exception):
    """A non-2xx answer from the API server (``status`` 0: no answer)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


class _Gone(Exception):
    """The resourceVersion is too old (410): list again."""


_RETRYABLE: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    asyncio.TimeoutError,
    ApiException,
    ApiStatusError,
    orjson.JSONDecodeError,
    OSError,
)


class KubeSource:
    """List+watch of one resource, yielding mapped keys; see the module doc."""

    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        mapper: Mapper = self_keys,
        clock: Clock | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 60.0,
        backoff: Backoff[str] | None = None,
        logger: Any = None,
    ) -> None:
        self._api = api_client
        self.resource = resource
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._mapper = mapper
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._page_size = page_size
        self._watch_timeout = watch_timeout_seconds
        self._request_timeout = request_timeout_seconds
        self._backoff: Backoff[str] = backoff if backoff is not None else Backoff(cap=30.0)
        log = logger if logger is not None else structlog.get_logger("racksmith.runtime.source")
        self._log = log.bind(source=str(resource), namespace=namespace or "")
        self._synced = False

    @property
    def has_synced(self) -> bool:
        return self._synced

    def keys(self) -> AsyncIterator[ObjectKey]:
        """A new list+watch iteration; ``has_synced`` is False until its first
        list has been emitted (reset here, synchronously, so a controller that
        is started again is not ready before it has listed again)."""
        self._synced = False
        return self._keys()

    async def _keys(self) -> AsyncIterator[ObjectKey]:
        # What each object last mapped to, so a re-list can emit the keys of
        # objects deleted while we were not watching, and an update that
        # changes the mapping (e.g. an owner reference) reaches the old key.
        known: dict[ObjectKey, tuple[ObjectKey, ...]] = {}
        rv: str | None = None
        quick_rounds = 0  # consecutive rounds that ended at once with no event
        while True:
            if quick_rounds > 1:
                # Guard against a server that keeps ending watches at once or
                # answering 410 to a fresh resourceVersion: never spin.
                await self._clock.sleep(self._backoff.next_delay("source"))
            started, events_seen = self._clock.now(), False
            try:
                if rv is None:
                    items, rv = await self._list()
                    fresh = {key_of(obj): tuple(self._mapper(obj)) for obj in items}
                    gone = [mapped for key, mapped in known.items() if key not in fresh]
                    known = fresh
                    self._log.debug("listed", objects=len(items), resource_version=rv)
                    for key in _unique([*fresh.values(), *gone]):
                        yield key
                    self._synced = True
                    self._backoff.forget("source")
                async with contextlib.aclosing(self._watch(rv)) as events:
                    async for event_type, obj in events:
                        events_seen = True
                        new_rv = _resource_version(obj)
                        if event_type == "BOOKMARK":
                            rv = new_rv or rv
                            continue
                        rv = new_rv or rv
                        key = key_of(obj)
                        mapped = tuple(self._mapper(obj))
                        previous = known.pop(key, ())
                        if event_type != "DELETED":
                            known[key] = mapped
                        for k in _unique([mapped, previous]):
                            yield k
                        self._backoff.forget("source")
            except _Gone:
                self._log.info("resource version expired, listing again", resource_version=rv)
                rv = None
            except _RETRYABLE as exc:
                delay = self._backoff.next_delay("source")
                self._log.warning(
                    "list/watch failed, retrying", error=repr(exc), retry_in=round(delay, 3)
                )
                await self._clock.sleep(delay)
                quick_rounds = 0
                continue
            quick = not events_seen and self._clock.now() - started < 1.0
            quick_rounds = quick_rounds + 1 if quick else 0

    async def _list(self) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            query = [*self._selectors(), ("limit", str(self._page_size))]
            if cont:
                query.append(("continue", cont))
            resp = await self._request(query, self._request_timeout)
            try:
                body = orjson.loads(await resp.read())
            finally:
                resp.release()
            items.extend(i for i in body.get("items") or [] if isinstance(i, dict))
            meta = body.get("metadata") or {}
            cont = meta.get("continue") or None
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    async def _watch(self, rv: str) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        query = [
            *self._selectors(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._watch_timeout)),
        ]
        if rv:
            query.append(("resourceVersion", rv))
        resp = await self._request(query, self._watch_timeout + 30.0)
        try:
            async for line in _lines(resp.content):
                event = orjson.loads(line)
                event_type = str(event.get("type") or "")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    raise ApiStatusError(0, f"malformed watch event: {line[:200]!r}")
                if event_type == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:
                        raise _Gone
                    raise ApiStatusError(code, str(obj.get("message") or obj))
                yield event_type, obj
        finally:
            resp.close()  # an abandoned stream must not go back to the pool

    async def _request(
        self, query: list[tuple[str, str]], read_timeout: float
    ) -> aiohttp.ClientResponse:
        """GET the collection; the caller reads and releases the response."""
        resp: aiohttp.ClientResponse = await self._api.call_api(
            self.resource.path(self._namespace),
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(
                connect=10.0, sock_connect=10.0, sock_read=read_timeout
            ),
        )
        if resp.status == 200:
            return resp
        try:
            text = (await resp.read()).decode("utf-8", "replace")
        finally:
            resp.release()
        if resp.status == 410:
            raise _Gone
        raise ApiStatusError(resp.status, text[:500])

    def _selectors(self) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        if self._label_selector:
            query.append(("labelSelector", self._label_selector))
        if self._field_selector:
            query.append(("fieldSelector", self._field_selector))
        return query


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Newline-delimited chunks of a stream, of any length (unlike readline)."""
    buf = bytearray()
    while True:
        chunk = await content.readany()
        if not chunk:
            break
        buf.extend(chunk)
        while (i := buf.find(b"\n")) >= 0:
            line = bytes(buf[:i]).strip()
            del buf[: i + 1]
            if line:
                yield line
    rest = bytes(buf).strip()
    if rest:
        yield rest


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and meta.get("resourceVersion"):
        return str(meta["resourceVersion"])
    return None


def _unique(groups: Iterable[Iterable[ObjectKey]]) -> list[ObjectKey]:
    seen: dict[ObjectKey, None] = {}
    for group in groups:
        for key in group:
            seen.setdefault(key)
    return list(seen)
