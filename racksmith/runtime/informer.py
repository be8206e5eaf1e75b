"""Shared informers: one list+watch per resource, a store with indexes, and
sources that are views of it (what client-go's SharedIndexInformer does).

``SharedInformer`` lists its resource (paged with ``limit``/``continue``),
then watches from the list's resourceVersion with
``allowWatchBookmarks=true`` and ``timeoutSeconds``. Every object it sees is
kept in its store, by key and by namespace, and in each index added with
``add_index`` (an index maps an object to string values: an owner's uid, a
label's value, a field's value). When a watch ends it resumes from the last
resourceVersion seen (bookmarks included); on ``410 Gone`` it lists again
and tells its subscribers about objects that vanished meanwhile; on
connection or server errors it backs off on the clock and retries.

Subscribers get ``(old, new)`` for every change (``old`` None: added, ``new``
None: deleted), synchronously, in order. The informer runs while it has
subscribers (``acquire``/``release``) and empties its store when the last
one leaves, so readers fall back to the API rather than read a cache nobody
keeps fresh. ``has_synced`` is True once the first list is in the store.

``InformerSource`` is a controller :class:`~racksmith.runtime.source.Source`
over a shared informer: it maps each change to keys (the mapper sees both
the old and the new object, so a change of owner reaches the old owner) and
is synced once the informer is and the keys of its snapshot are queued.

A write's answer can be ``offer``-ed to the store (the Client does so), so a
reconcile right after its own write reads what it wrote; an offered object
only replaces an older one, and watch events never move an object back to
an older resourceVersion (resourceVersions compared as integers when both
are; otherwise the watch wins).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from typing import Any

import aiohttp
import orjson
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.clock import Clock, SystemClock
from racksmith.runtime.errors import ApiError, error_from
from racksmith.runtime.keys import Mapper, ObjectKey, OnChange, key_of, self_keys
from racksmith.runtime.queue import Backoff
from racksmith.runtime.resource import Resource

Obj = dict[str, Any]
Objs = list[Obj]
Query = list[tuple[str, str]]
Handler = Callable[[Obj | None, Obj | None], None]
IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]


class _Gone(Exception):
    """The resourceVersion is too old (410): list again."""


_RETRYABLE: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    asyncio.TimeoutError,
    ApiException,
    ApiError,
    orjson.JSONDecodeError,
    OSError,
)


def owner_uid_index(obj: Mapping[str, Any]) -> list[str]:
    """Index values: the uid of every owner reference."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid")]


def owner_name_index(kind: str) -> IndexFunc:
    """Index values: the name of each owner of ``kind`` (same namespace)."""

    def index(obj: Mapping[str, Any]) -> list[str]:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        return [str(r["name"]) for r in refs
                if isinstance(r, Mapping) and r.get("kind") == kind and r.get("name")]

    return index


def label_index(label: str) -> IndexFunc:
    """Index values: the value of ``label`` (absent: no value)."""

    def index(obj: Mapping[str, Any]) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(label) if isinstance(labels, Mapping) else None
        return [str(value)] if value is not None else []

    return index


def field_index(path: str) -> IndexFunc:
    """Index values: the scalar at dotted ``path`` (e.g. ``spec.nodeName``)."""
    parts = path.split(".")

    def index(obj: Mapping[str, Any]) -> list[str]:
        cur: Any = obj
        for part in parts:
            if not isinstance(cur, Mapping):
                return []
            cur = cur.get(part)
        if cur is None or isinstance(cur, Mapping | list):
            return []
        return [str(cur).lower() if isinstance(cur, bool) else str(cur)]

    return index


def fields_match(selector: str, obj: Mapping[str, Any]) -> bool:
    """Does ``obj`` match field selector ``selector`` — equalities only
    (``a.b=v`` or ``a.b==v``, comma-separated)? Any other form: False."""
    for term in selector.split(","):
        path, sep, value = term.partition("=")
        value = value.removeprefix("=")
        if not sep or not path or path.endswith("!"):
            return False
        if field_index(path.strip())(obj) != [value.strip()]:
            return False
    return True


def field_index_name(path: str) -> str:
    """The index name under which a field index for ``path`` is looked up."""
    return f"field:{path}"


_TOMBSTONES = 10_000
"""Deleted keys remembered (with their last resourceVersion) per informer."""


def _strictly_newer(candidate: Mapping[str, Any], resource_version: str) -> bool:
    try:
        return int(str((candidate.get("metadata") or {}).get("resourceVersion"))) > int(
            resource_version)
    except ValueError:
        return False


def newer(candidate: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """``candidate`` is at least as new as ``current`` (by integer resourceVersion)."""
    if current is None:
        return True
    a = (candidate.get("metadata") or {}).get("resourceVersion")
    b = (current.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(a)) >= int(str(b))
    except ValueError:
        return True


class SharedInformer:
    """List+watch of one resource into an indexed store; see the module doc."""

    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        clock: Clock | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 60.0,
        backoff: Backoff[str] | None = None,
        logger: Any = None,
    ) -> None:
        self._api = api_client
        self.resource = resource
        self.namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._page_size = page_size
        self._watch_timeout = watch_timeout_seconds
        self._request_timeout = request_timeout_seconds
        self._backoff: Backoff[str] = backoff if backoff is not None else Backoff(cap=30.0)
        log = logger if logger is not None else structlog.get_logger("racksmith.runtime.informer")
        self._log = log.bind(source=str(resource), namespace=namespace or "")
        self._store: dict[ObjectKey, Obj] = {}
        self._tombstones: dict[ObjectKey, str] = {}
        self._by_namespace: dict[str, dict[ObjectKey, Obj]] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {}
        self._handlers: list[Handler] = []
        self._on_synced: list[Callable[[], None]] = []
        self._users = 0
        self._task: asyncio.Task[None] | None = None
        self._synced = False

    # --- reading ----------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """The first list is in the store (and the informer is running)."""
        return self._synced

    @property
    def plain(self) -> bool:
        """No label or field selector: the store holds every object in scope."""
        return not self._label_selector and not self._field_selector

    def get(self, key: ObjectKey) -> Obj | None:
        """The stored object (shared: do not modify it)."""
        return self._store.get(key)

    def list(self, namespace: str | None = None) -> Objs:
        """Stored objects, of one namespace or all (shared: do not modify them)."""
        if namespace is None:
            return list(self._store.values())
        return list((self._by_namespace.get(namespace) or {}).values())

    def __len__(self) -> int:
        return len(self._store)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Index the store by ``func`` under ``name`` (idempotent for a name)."""
        if name in self._indexers:
            return
        self._indexers[name] = func
        index: dict[str, set[ObjectKey]] = {}
        for key, obj in self._store.items():
            for value in _values(func, obj):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def has_index(self, name: str) -> bool:
        return name in self._indexers

    def index_func(self, name: str) -> IndexFunc | None:
        return self._indexers.get(name)

    def by_index(self, name: str, value: str, namespace: str | None = None) -> Objs:
        """Stored objects whose index ``name`` holds ``value`` (shared: do not modify)."""
        keys = self._indexes[name].get(value) or ()
        out = [self._store[k] for k in keys if k in self._store]
        if namespace is not None:
            out = [o for o in out if key_of(o).namespace == namespace]
        return sorted(out, key=lambda o: key_of(o))

    # --- subscribers ------------------------------------------------------------

    def subscribe(self, handler: Handler, on_synced: Callable[[], None]) -> None:
        """Call ``handler`` for every change from now on; ``on_synced`` once the
        store holds the first list (at once, after a snapshot replayed through
        ``handler``, if it already does)."""
        self._handlers.append(handler)
        self._on_synced.append(on_synced)
        if self._synced:
            for obj in list(self._store.values()):
                handler(None, obj)
            on_synced()

    def unsubscribe(self, handler: Handler, on_synced: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._handlers.remove(handler)
        with contextlib.suppress(ValueError):
            self._on_synced.remove(on_synced)

    def acquire(self) -> None:
        """One more user: start list+watch if it is not running (needs a loop)."""
        self._users += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"informer-{self.resource}")

    async def release(self) -> None:
        """One user fewer: the last one stops list+watch and empties the store."""
        self._users = max(0, self._users - 1)
        if self._users or self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._users == 0:
            self._clear()

    async def stop(self) -> None:
        """Stop list+watch whoever still uses it (the cluster it watches is
        gone: ``runtime.clusters``)."""
        self._users = 0
        await self.release()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # --- writing the store --------------------------------------------------------

    def offer(self, obj: Mapping[str, Any]) -> None:
        """A write's answer: stored when the informer runs and it is newer
        (a create's answer too, so a reconcile sees what it just made). An
        answer older than a deletion the watch already told (a tombstone)
        is dropped: a late answer never brings a deleted object back. The
        watch event of the write still comes, and is told to the handlers."""
        if not self._synced or not self._in_scope(obj):
            return
        key = key_of(obj)
        current = self._store.get(key)
        if current is None:
            dead = self._tombstones.get(key)
            if dead is not None and not _strictly_newer(obj, dead):
                return
        elif not newer(obj, current):
            return
        self._apply(key, dict(obj), notify=False)

    def _deleted(self, key: ObjectKey, obj: Mapping[str, Any]) -> None:
        """The watch told ``key``'s deletion: gone from the store, its tombstone
        at the deletion's own resourceVersion (newer than the stored copy's:
        the answer of the write that deleted it — say the update that
        removed its last finalizer — must not bring it back)."""
        self._apply(key, None)
        self._remember_deleted(key, obj)

    def _remember_deleted(self, key: ObjectKey, obj: Mapping[str, Any]) -> None:
        if len(self._tombstones) >= _TOMBSTONES:
            for old in list(self._tombstones)[: _TOMBSTONES // 2]:
                del self._tombstones[old]
        self._tombstones[key] = str(_resource_version(obj) or "")

    def _in_scope(self, obj: Mapping[str, Any]) -> bool:
        """Would the list+watch hold ``obj``? Known for no selector and for a
        field selector of equalities (``spec.nodeName=n1``); a label
        selector, or a field selector of another form, says no (the watch
        event brings the object)."""
        if self._label_selector:
            return False
        if self._field_selector and not fields_match(self._field_selector, obj):
            return False
        return self.namespace is None or key_of(obj).namespace == self.namespace

    def _apply(self, key: ObjectKey, obj: Obj | None, *, notify: bool = True) -> None:
        old = self._store.get(key)
        if old is not None:
            self._unindex(key, old)
        if obj is None:
            gone = self._store.pop(key, None)
            if gone is not None:
                self._remember_deleted(key, gone)
        else:
            self._store[key] = obj
            self._by_namespace.setdefault(key.namespace, {})[key] = obj
            for name, func in self._indexers.items():
                for value in _values(func, obj):
                    self._indexes[name].setdefault(value, set()).add(key)
        if notify:
            for handler in list(self._handlers):
                try:
                    handler(old, obj)
                except Exception:  # a mapper must never stop the informer
                    self._log.exception("informer handler failed")

    def _unindex(self, key: ObjectKey, old: Obj) -> None:
        ns = self._by_namespace.get(key.namespace)
        if ns is not None:
            ns.pop(key, None)
            if not ns:
                del self._by_namespace[key.namespace]
        for name, func in self._indexers.items():
            index = self._indexes[name]
            for value in _values(func, old):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _clear(self) -> None:
        self._synced = False
        self._store.clear()
        self._by_namespace.clear()
        for index in self._indexes.values():
            index.clear()

    # --- list+watch ---------------------------------------------------------------

    async def _run(self) -> None:
        rv: str | None = None
        quick_rounds = 0  # consecutive rounds that ended at once with no event
        try:
            while True:
                if quick_rounds > 1:
                    # Guard against a server that keeps ending watches at once or
                    # answering 410 to a fresh resourceVersion: never spin.
                    await self._clock.sleep(self._backoff.next_delay("source"))
                started, events_seen = self._clock.now(), False
                try:
                    if rv is None:
                        items, rv = await self._list()
                        self._replace(items)
                        self._log.debug("listed", objects=len(items), resource_version=rv)
                        if not self._synced:
                            self._synced = True
                            for on_synced in list(self._on_synced):
                                on_synced()
                        self._backoff.forget("source")
                    async with contextlib.aclosing(self._watch(rv)) as events:
                        async for event_type, obj in events:
                            events_seen = True
                            rv = _resource_version(obj) or rv
                            if event_type == "BOOKMARK":
                                continue
                            key = key_of(obj)
                            if event_type == "DELETED":
                                self._deleted(key, obj)
                            elif newer(obj, self._store.get(key)):
                                self._apply(key, obj)
                            self._backoff.forget("source")
                except _Gone:
                    self._log.info("resource version expired, listing again",
                                   resource_version=rv)
                    rv = None
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    delay = self._backoff.next_delay("source")
                    if isinstance(exc, _RETRYABLE):
                        self._log.warning("list/watch failed, retrying", error=repr(exc),
                                          retry_in=round(delay, 3))
                    else:
                        self._log.exception("list/watch raised, retrying",
                                            retry_in=round(delay, 3))
                    await self._clock.sleep(delay)
                    quick_rounds = 0
                    continue
                quick = not events_seen and self._clock.now() - started < 1.0
                quick_rounds = quick_rounds + 1 if quick else 0
        finally:
            self._synced = False

    def _replace(self, items: Objs) -> None:
        """A (re-)list: every listed object is told again, vanished ones deleted."""
        fresh = {key_of(obj): obj for obj in items}
        gone = [k for k in self._store if k not in fresh]
        for key, obj in fresh.items():
            self._apply(key, obj)
        for key in gone:
            self._apply(key, None)

    async def _list(self) -> tuple[Objs, str]:
        items: Objs = []
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

    async def _watch(self, rv: str) -> AsyncGenerator[tuple[str, Obj], None]:
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
                    raise ApiError(0, "", f"malformed watch event: {line[:200]!r}")
                if event_type == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:
                        raise _Gone
                    raise error_from(code, orjson.dumps(obj))
                yield event_type, obj
        finally:
            resp.close()  # an abandoned stream must not go back to the pool

    async def _request(
        self, query: Query, read_timeout: float
    ) -> aiohttp.ClientResponse:
        """GET the collection; the caller reads and releases the response."""
        resp: aiohttp.ClientResponse = await self._api.call_api(
            self.resource.path(self.namespace),
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
            text = await resp.read()
        finally:
            resp.release()
        if resp.status == 410:
            raise _Gone
        raise error_from(resp.status, text[:2000])

    def _selectors(self) -> Query:
        query: Query = []
        if self._label_selector:
            query.append(("labelSelector", self._label_selector))
        if self._field_selector:
            query.append(("fieldSelector", self._field_selector))
        return query


class InformerSource:
    """A controller source over a shared informer; see the module doc."""

    def __init__(self, informer: SharedInformer, mapper: Mapper = self_keys,
                 check: Callable[[], Awaitable[None]] | None = None) -> None:
        self.informer = informer
        self.resource = informer.resource
        self._mapper = mapper
        self._check = check
        self._synced = False

    @property
    def has_synced(self) -> bool:
        return self._synced and self.informer.has_synced

    def keys(self) -> AsyncIterator[ObjectKey]:
        """A new iteration; ``has_synced`` is False until its snapshot is queued
        (reset here, synchronously, so a restarted controller lists again)."""
        self._synced = False
        return self._keys()

    async def _keys(self) -> AsyncIterator[ObjectKey]:
        pending: deque[ObjectKey | None] = deque()  # None: the snapshot is complete
        wake = asyncio.Event()
        mapper = self._mapper

        def handler(old: Obj | None, new: Obj | None) -> None:
            seen: dict[ObjectKey, None] = {}
            if isinstance(mapper, OnChange):  # an update predicate: compares old and new
                objects: Iterable[Mapping[str, Any] | None] = mapper.objects(old, new)
                keys_of: Mapper = mapper.keys
            else:
                objects, keys_of = (new, old), mapper
            for obj in objects:
                if obj is not None:
                    try:
                        for key in keys_of(obj):
                            seen.setdefault(key)
                    except Exception:  # mappers are pure and must not raise
                        continue
            if seen:
                pending.extend(seen)
                wake.set()

        def on_synced() -> None:
            pending.append(None)
            wake.set()

        if self._check is not None:
            # May the reading component list and watch this itself? (The
            # informer lists and watches as the process; see Client.)
            await self._check()
        self.informer.subscribe(handler, on_synced)
        self.informer.acquire()
        try:
            while True:
                while pending:
                    key = pending.popleft()
                    if key is None:
                        self._synced = True
                        continue
                    yield key
                wake.clear()
                await wake.wait()
        finally:
            self.informer.unsubscribe(handler, on_synced)
            await self.informer.release()


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


def _values(func: IndexFunc, obj: Mapping[str, Any]) -> list[str]:
    try:
        return list(func(obj))
    except Exception:  # an index function must never break the store
        return []
