"""The SQLite storage backend of the API server.

Owns: the on-disk schema, the global resourceVersion sequence, durable group
commit, the event log and its compaction, and watch replay (the live half of
watches is :mod:`racksmith.apiserver.store.watchhub`).

Schema (one file, WAL mode, ``synchronous=FULL``)::

    objects(resource, namespace, name, rv, data)  PK (resource, namespace, name)
    events(rv PK, type, resource, namespace, name, data)
    meta(k PK, v)                                 k = 'compact_rv', 'schema'

``data`` is the object serialised with orjson, ``metadata.resourceVersion``
included. Every write is one object row change plus one event row, in the same
transaction, so rvs in ``events`` are contiguous: ``compact_rv + 1 .. rv``.

Threads:

* **Writer** — one dedicated thread owns the only write connection. Writes are
  queued on the event loop; a writer task hands *everything queued so far* to
  the thread as one transaction (group commit), so while one commit's fsync is
  in flight the next batch accumulates. Each caller's coroutine returns only
  after the COMMIT of its batch (with ``synchronous=FULL`` that is an fsync of
  the WAL): an acknowledged write survives SIGKILL and power loss. A failing
  operation (NotFound, Conflict, unserialisable object …) fails only its own
  caller and consumes no rv; an SQLite error fails (and rolls back) the batch.
* **Readers** — ``get`` runs directly on the event loop on its own read
  connection (a primary-key lookup is cheaper than a thread hop); ``list`` and
  watch replay run on a small reader pool, each in one read transaction, so a
  list is a consistent snapshot and carries the rv of that snapshot.

Watches: subscribe to the hub first, then replay ``events`` with
``since_rv < rv <= (rv published at subscription)`` from the database, then
deliver live events, dropping any with rv <= the last one delivered — no gaps,
no duplicates. ``since_rv`` below :meth:`SqliteStore.oldest_rv` raises
:class:`Expired` when iteration starts; so does a watcher whose live buffer
(``watch_queue_size`` events) overflows because it is not consuming: the HTTP
layer then closes the watch and the client re-lists. :meth:`SqliteStore.close`
ends all watches (after their buffered events).

Compaction: the writer deletes the oldest events whenever more than
``event_log_size`` are kept, in chunks (down to ``event_log_size`` minus 10%,
at most 5000 below) inside a normal write transaction; ``compact_rv`` in
``meta`` records the point, and a watch may resume from any rv >= it.

Recovery on :meth:`SqliteStore.open`: SQLite replays or discards the WAL
itself (a commit is all-or-nothing). With ``quick_check=True`` (default) the
store also runs ``PRAGMA quick_check`` — O(database size), roughly tens of ms
per 10k objects — and refuses to open a corrupt file
(:class:`StoreCorruptedError`). The rv sequence continues from the maximum of
``objects.rv``, ``events.rv`` and ``compact_rv``.

Modes: the file holds every Secret, so it is made 0600 before SQLite opens
it (created empty if missing, tightened if looser, with a warning); SQLite
creates ``-wal`` and ``-shm`` with the database file's mode, and those left
from an earlier run are tightened too (:mod:`racksmith.filemodes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from racksmith import filemodes
from racksmith.apiserver.store.base import (
    AlreadyExistsError,
    BurstWatches,
    ConflictError,
    EventType,
    Expired,
    Key,
    ListResult,
    NotFoundError,
    Obj,
    OnLive,
    Scope,
    Store,
    StoreUnavailableError,
    WatchBatch,
    WatchEvent,
)
from racksmith.apiserver.store.watchhub import RawEvent, WatchHub, replay_then_follow

__all__ = ["SqliteStore", "StoreClosedError", "StoreCorruptedError"]

_T = TypeVar("_T")

_SCHEMA_VERSION: Final = 1
_MAX_BATCH: Final = 2000
_REPLAY_PAGE: Final = 1000

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS objects (
        resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        rv INTEGER NOT NULL, data BLOB NOT NULL,
        PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS events (
        rv INTEGER PRIMARY KEY, type TEXT NOT NULL, resource TEXT NOT NULL,
        namespace TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)""",
)

_INSERT_OBJ: Final = ("INSERT INTO objects (resource, namespace, name, rv, data) "
                      "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
_SELECT_RV: Final = "SELECT rv FROM objects WHERE resource = ? AND namespace = ? AND name = ?"
_SELECT_RV_DATA: Final = ("SELECT rv, data FROM objects "
                          "WHERE resource = ? AND namespace = ? AND name = ?")
_SELECT_DATA: Final = "SELECT data FROM objects WHERE resource = ? AND namespace = ? AND name = ?"
_UPDATE_OBJ: Final = ("UPDATE objects SET rv = ?, data = ? "
                      "WHERE resource = ? AND namespace = ? AND name = ?")
_DELETE_OBJ: Final = "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?"
_INSERT_EV: Final = ("INSERT INTO events (rv, type, resource, namespace, name, data) "
                     "VALUES (?, ?, ?, ?, ?, ?)")
_SNAPSHOT_RV: Final = ("SELECT max(coalesce((SELECT max(rv) FROM events), 0), "
                       "coalesce((SELECT v FROM meta WHERE k = 'compact_rv'), 0))")
_COMPACT_RV: Final = "SELECT coalesce((SELECT v FROM meta WHERE k = 'compact_rv'), 0)"
_SET_META: Final = "INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)"

_CREATE: Final = 0
_UPDATE: Final = 1
_DELETE: Final = 2


class StoreCorruptedError(Exception):
    """The database file failed its integrity check on open."""


class StoreClosedError(StoreUnavailableError, RuntimeError):
    """The store is not open (never opened, or closing/closed)."""


class _Op:
    __slots__ = ("expected_rv", "fut", "key", "kind", "obj")

    def __init__(self, kind: int, key: Key, obj: Obj | None, expected_rv: int | None,
                 fut: asyncio.Future[Obj]) -> None:
        self.kind = kind
        self.key = key
        self.obj = obj
        self.expected_rv = expected_rv
        self.fut = fut


_EventRow = tuple[int, str, str, str, bytes]
_EventRows = list[_EventRow]
_Batch = list[_Op]


class _BatchOutcome:
    __slots__ = ("compact_rv", "events", "results", "rv")

    def __init__(self, results: list[Obj | Exception], events: list[RawEvent], rv: int,
                 compact_rv: int) -> None:
        self.results = results
        self.events = events
        self.rv = rv
        self.compact_rv = compact_rv


def _stamp(obj: Obj, rv: int) -> bytes:
    """Serialise a copy of ``obj`` whose metadata.resourceVersion is ``rv``."""
    md = obj.get("metadata")
    if md is None:
        md = {}
    elif not isinstance(md, dict):
        raise TypeError("metadata must be a JSON object")
    new = dict(obj)
    new_md = dict(md)
    new_md["resourceVersion"] = str(rv)
    new["metadata"] = new_md
    return orjson.dumps(new)


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                           timeout=30.0, cached_statements=64)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA cache_size=-32768")  # 32 MiB
    if readonly:
        conn.execute("PRAGMA query_only=1")
    return conn


class SqliteStore(BurstWatches):
    """A :class:`~racksmith.apiserver.store.base.Store` in one SQLite file.

    ``event_log_size``: how many events the log keeps for watch resumption.
    ``watch_queue_size``: live events buffered per watcher before it expires.
    ``quick_check``: run ``PRAGMA quick_check`` on open.
    ``readers``: threads serving ``list`` and watch replay.

    ``watch_queue_size`` should stay well above the largest commit batch
    (2000 writes), or even a prompt watcher can overflow on one big batch.

    Open once with :meth:`open`, end with :meth:`close`; a closed store cannot
    be reopened (make a new instance on the same path). Callers must not mutate
    an object passed to ``create``/``update`` until the call returns.
    """

    def __init__(self, path: Path, *, event_log_size: int = 100_000,
                 watch_queue_size: int = 10_000, quick_check: bool = True,
                 readers: int = 2) -> None:
        if event_log_size < 0:
            raise ValueError("event_log_size must be >= 0")
        self.path = Path(path)
        self.event_log_size = event_log_size
        self._compact_slack = min(event_log_size // 10, 5000)
        self._quick_check = quick_check
        self._readers = max(1, readers)
        self._hub = WatchHub(watch_queue_size)
        self._state = "new"  # new -> open -> closing -> closed
        # Loop side: committed and published.
        self._rv = 0
        self._compact_rv = 0
        self._pending: list[_Op] = []
        self._wake: asyncio.Event | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._wexec: ThreadPoolExecutor | None = None
        self._rexec: ThreadPoolExecutor | None = None
        self._wconn: sqlite3.Connection | None = None
        self._gconn: sqlite3.Connection | None = None
        self._rconns: list[sqlite3.Connection] = []
        self._rlocal = threading.local()
        self._rlock = threading.Lock()
        # Writer-thread side: the rv of the last commit and the compaction point.
        self._wrv = 0
        self._wcompact = 0

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._state != "new":
            raise StoreClosedError(f"store is {self._state}; open() is allowed once")
        loop = asyncio.get_running_loop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._wexec = ThreadPoolExecutor(1, thread_name_prefix="racksmith-store-writer")
        try:
            await loop.run_in_executor(self._wexec, self._open_sync)
            self._gconn = _connect(self.path, readonly=True)
        except BaseException:
            if self._wconn is not None:
                self._wconn.close()
                self._wconn = None
            self._wexec.shutdown(wait=False)
            self._state = "closed"
            raise
        self._rv = self._wrv
        self._compact_rv = self._wcompact
        self._rexec = ThreadPoolExecutor(self._readers,
                                         thread_name_prefix="racksmith-store-reader")
        self._wake = asyncio.Event()
        self._state = "open"
        self._writer_task = loop.create_task(self._writer_loop(), name="racksmith-store-writer")

    def _open_sync(self) -> None:
        filemodes.private_file(self.path, create=True)
        for suffix in ("-wal", "-shm"):
            filemodes.private_file(self.path.with_name(self.path.name + suffix))
        conn = _connect(self.path, readonly=False)
        self._wconn = conn
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreCorruptedError(f"cannot enable WAL mode on {self.path} (got {mode!r})")
        if self._quick_check:
            rows = conn.execute("PRAGMA quick_check").fetchall()
            if [r[0] for r in rows] != ["ok"]:
                raise StoreCorruptedError(
                    f"{self.path} failed quick_check: {[r[0] for r in rows][:10]}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA:
                conn.execute(stmt)
            row = conn.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
            if row is None:
                conn.execute(_SET_META, ("schema", _SCHEMA_VERSION))
            elif row[0] != _SCHEMA_VERSION:
                raise StoreCorruptedError(f"{self.path}: unknown schema version {row[0]}")
            compact = conn.execute(_COMPACT_RV).fetchone()[0]
            max_obj = conn.execute("SELECT coalesce(max(rv), 0) FROM objects").fetchone()[0]
            max_ev = conn.execute("SELECT coalesce(max(rv), 0) FROM events").fetchone()[0]
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._wcompact = int(compact)
        self._wrv = max(int(max_obj), int(max_ev), int(compact))

    async def close(self) -> None:
        if self._state in ("closing", "closed"):
            return
        if self._state == "new":
            self._state = "closed"
            return
        self._state = "closing"
        assert self._wake is not None and self._writer_task is not None
        self._wake.set()
        try:
            await self._writer_task  # drains everything queued before close()
        finally:
            self._hub.close()
            self._state = "closed"
            assert self._wexec is not None and self._rexec is not None
            rexec, wexec = self._rexec, self._wexec
            await asyncio.to_thread(rexec.shutdown, True)
            await asyncio.to_thread(wexec.shutdown, True)
            with self._rlock:
                conns, self._rconns = self._rconns, []
            for c in conns:
                c.close()
            if self._gconn is not None:
                self._gconn.close()
                self._gconn = None
            if self._wconn is not None:
                # Closing the last connection checkpoints the WAL into the main file.
                self._wconn.close()
                self._wconn = None

    # ------------------------------------------------------------------ reads

    def current_rv(self) -> int:
        return self._rv

    def oldest_rv(self) -> int:
        return self._compact_rv

    async def get(self, key: Key) -> Obj:
        conn = self._gconn
        if conn is None or self._state != "open":
            raise StoreClosedError("store is not open")
        row = conn.execute(_SELECT_DATA, (key.resource, key.namespace, key.name)).fetchone()
        if row is None:
            raise NotFoundError(key)
        result: Obj = orjson.loads(row[0])
        return result

    async def list(self, scope: Scope, *, after: Key | None = None,
                   limit: int | None = None, rv: int | None = None,
                   contains: tuple[bytes, ...] = ()) -> ListResult:
        """See :meth:`Store.list`; ``limit`` None or <= 0 means no limit;
        ``rv`` is ignored (no history: the continuation reads the latest
        state); ``contains`` is applied in the query (``instr``), so
        ``limit`` counts the objects returned."""
        return await self._read(self._list_sync, scope, after, limit, contains)

    def _reader_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._rlocal, "conn", None)
        if conn is None:
            conn = _connect(self.path, readonly=True)
            self._rlocal.conn = conn
            with self._rlock:
                self._rconns.append(conn)
        return conn

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._state != "open" or self._rexec is None:
            raise StoreClosedError("store is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._rexec, fn, *args)

    def _list_sync(self, scope: Scope, after: Key | None, limit: int | None,
                   contains: tuple[bytes, ...] = ()) -> ListResult:
        conn = self._reader_conn()
        where = "resource = ?"
        params: list[Any] = [scope.resource]
        if scope.namespace is not None:
            where += " AND namespace = ?"
            params.append(scope.namespace)
        tail_where = where + " AND (namespace, name) > (?, ?)"
        if after is not None:
            where = tail_where
            params += [after.namespace, after.name]
        for needle in contains:
            where += " AND instr(data, ?) > 0"
            params.append(needle)
        order = " ORDER BY namespace, name"
        conn.execute("BEGIN")
        try:
            rv = int(conn.execute(_SNAPSHOT_RV).fetchone()[0])
            if limit is None or limit <= 0:
                rows = conn.execute(f"SELECT data FROM objects WHERE {where}{order}",
                                    params).fetchall()
                loads = orjson.loads
                return ListResult(items=[loads(r[0]) for r in rows], rv=rv)
            rows = conn.execute(
                f"SELECT namespace, name, data FROM objects WHERE {where}{order} LIMIT ?",
                [*params, limit]).fetchall()
            items = [orjson.loads(r[2]) for r in rows]
            if len(rows) < limit:
                return ListResult(items=items, rv=rv)
            last_ns, last_name = rows[-1][0], rows[-1][1]
            if contains:  # more may follow; not counted (a selector's page)
                return ListResult(items=items, rv=rv,
                                  next_name=Key(scope.resource, last_ns, last_name))
            tail_params = params[:2] if scope.namespace is not None else params[:1]
            remaining = int(conn.execute(
                f"SELECT count(*) FROM objects WHERE {tail_where}",
                [*tail_params, last_ns, last_name]).fetchone()[0])
            next_name = Key(scope.resource, last_ns, last_name) if remaining else None
            return ListResult(items=items, rv=rv, next_name=next_name, remaining=remaining)
        finally:
            conn.execute("COMMIT")

    # ------------------------------------------------------------------ writes

    async def create(self, key: Key, obj: Obj) -> Obj:
        return await self._submit(_CREATE, key, obj, None)

    async def update(self, key: Key, obj: Obj, *, expected_rv: int | None = None) -> Obj:
        return await self._submit(_UPDATE, key, obj, expected_rv)

    async def delete(self, key: Key, *, expected_rv: int | None = None) -> Obj:
        return await self._submit(_DELETE, key, None, expected_rv)

    async def _submit(self, kind: int, key: Key, obj: Obj | None,
                      expected_rv: int | None) -> Obj:
        if self._state != "open" or self._wake is None:
            raise StoreClosedError("store is not open")
        fut: asyncio.Future[Obj] = asyncio.get_running_loop().create_future()
        self._pending.append(_Op(kind, key, obj, expected_rv, fut))
        self._wake.set()
        return await fut

    async def _writer_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None and self._wexec is not None
        wake, wexec, hub = self._wake, self._wexec, self._hub
        while True:
            if not self._pending:
                if self._state != "open":
                    return
                wake.clear()
                await wake.wait()
                continue
            batch = self._pending[:_MAX_BATCH]
            del self._pending[:_MAX_BATCH]
            try:
                out = await loop.run_in_executor(wexec, self._apply_batch, batch)
            except Exception as exc:  # the whole transaction failed and rolled back
                for op in batch:
                    if not op.fut.done():
                        op.fut.set_exception(exc)
                continue
            if out.events:
                self._rv = out.rv
                self._compact_rv = out.compact_rv
                hub.publish(out.events)
            for op, res in zip(batch, out.results, strict=True):
                if op.fut.done():  # the caller was cancelled; the write stands
                    continue
                if isinstance(res, Exception):
                    op.fut.set_exception(res)
                else:
                    op.fut.set_result(res)

    def _apply_batch(self, batch: _Batch) -> _BatchOutcome:
        """Writer thread: apply ``batch`` in one transaction and commit it."""
        conn = self._wconn
        assert conn is not None
        execute = conn.execute
        loads = orjson.loads
        rv = self._wrv
        compact = self._wcompact
        results: list[Obj | Exception] = []
        events: list[RawEvent] = []
        execute("BEGIN IMMEDIATE")
        try:
            for op in batch:
                key = op.key
                pk = (key.resource, key.namespace, key.name)
                nrv = rv + 1
                try:
                    if op.kind == _CREATE:
                        assert op.obj is not None
                        data = _stamp(op.obj, nrv)
                        cur = execute(_INSERT_OBJ, (*pk, nrv, data))
                        if cur.rowcount == 0:
                            raise AlreadyExistsError(key)
                        etype = EventType.ADDED
                    else:
                        row = execute(_SELECT_RV_DATA if op.kind == _DELETE else _SELECT_RV,
                                      pk).fetchone()
                        if row is None:
                            raise NotFoundError(key)
                        if op.expected_rv is not None and op.expected_rv != row[0]:
                            raise ConflictError(
                                f"{key}: resourceVersion is {row[0]}, not {op.expected_rv}")
                        if op.kind == _UPDATE:
                            assert op.obj is not None
                            data = _stamp(op.obj, nrv)
                            execute(_UPDATE_OBJ, (nrv, data, *pk))
                            etype = EventType.MODIFIED
                        else:
                            data = _stamp(loads(row[1]), nrv)
                            execute(_DELETE_OBJ, pk)
                            etype = EventType.DELETED
                except (NotFoundError, AlreadyExistsError, ConflictError, TypeError,
                        ValueError) as exc:
                    results.append(exc)
                    continue
                execute(_INSERT_EV, (nrv, etype.value, *pk, data))
                rv = nrv
                results.append(loads(data))
                events.append(RawEvent(nrv, etype, key, data))
            if rv - compact > self.event_log_size:
                compact = rv - (self.event_log_size - self._compact_slack)
                execute("DELETE FROM events WHERE rv <= ?", (compact,))
                execute(_SET_META, ("compact_rv", compact))
            execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._wrv = rv
        self._wcompact = compact
        return _BatchOutcome(results, events, rv, compact)

    # ------------------------------------------------------------------ watch

    async def _watch(self, scope: Scope, since_rv: int, on_live: OnLive | None, *,
                     batched: bool) -> AsyncGenerator[WatchBatch, None]:
        if self._state != "open":
            return
        async with contextlib.aclosing(replay_then_follow(
                self._hub, scope, since_rv, lambda: self._rv,
                functools.partial(self._replay, scope), on_live, batched=batched)) as watch:
            async for batch in watch:
                yield batch

    async def _replay(self, scope: Scope, after: int, upto: int
                      ) -> AsyncGenerator[WatchBatch, None]:
        """The event log's events in ``scope`` with after < rv <= upto, a page
        at a time; nothing more once the store closes."""
        if after < self._compact_rv:
            raise Expired(f"resourceVersion {after} is older than the oldest kept "
                          f"({self._compact_rv})")
        last = after
        while last < upto:
            try:
                rows: _EventRows = await self._read(self._replay_sync, scope, last, upto)
            except RuntimeError:  # StoreClosedError, or the reader pool shut down
                if self._state != "open":
                    return
                raise
            if rows:
                yield [WatchEvent(EventType(etype), Key(scope.resource, ns, name), erv,
                                  data=data)
                       for erv, etype, ns, name, data in rows]
            if len(rows) < _REPLAY_PAGE:
                return
            last = rows[-1][0]

    def _replay_sync(self, scope: Scope, after: int,
                     upto: int) -> _EventRows:
        """Reader thread: one page of logged events in ``scope`` with after < rv <= upto."""
        conn = self._reader_conn()
        sql = ("SELECT rv, type, namespace, name, data FROM events "
               "WHERE rv > ? AND rv <= ? AND resource = ?")
        params: list[Any] = [after, upto, scope.resource]
        if scope.namespace is not None:
            sql += " AND namespace = ?"
            params.append(scope.namespace)
        sql += " ORDER BY rv LIMIT ?"
        params.append(_REPLAY_PAGE)
        conn.execute("BEGIN")
        try:
            compact = int(conn.execute(_COMPACT_RV).fetchone()[0])
            if after < compact:
                raise Expired(f"resourceVersion {after} was compacted (oldest kept {compact})")
            rows: _EventRows = conn.execute(sql, params).fetchall()
            return rows
        finally:
            conn.execute("COMMIT")

    async def state_before(self, key: Key, rv: int) -> tuple[bool, Obj | None]:
        return await self._read(self._state_before_sync, key, rv)

    def _state_before_sync(self, key: Key, rv: int) -> tuple[bool, Obj | None]:
        """Reader thread: the newest logged state of ``key`` older than ``rv``."""
        conn = self._reader_conn()
        conn.execute("BEGIN")
        try:
            row = conn.execute(
                "SELECT type, data FROM events WHERE resource = ? AND namespace = ? AND "
                "name = ? AND rv < ? ORDER BY rv DESC LIMIT 1",
                [key.resource, key.namespace, key.name, rv]).fetchone()
            if row is not None:
                return True, None if row[0] == EventType.DELETED.value else orjson.loads(
                    row[1])
            compact = int(conn.execute(_COMPACT_RV).fetchone()[0])
            return compact == 0, None
        finally:
            conn.execute("COMMIT")


def _conforms(store: SqliteStore) -> Store:
    """Type-checks that SqliteStore fulfils the Store protocol."""
    return store


# ------------------------------------------------------------------ backups


@dataclass(frozen=True)
class StoreFacts:
    """What a store file holds, read without changing it (``inspect_file``)."""

    schema: int
    resource_version: int
    objects: int
    integrity: list[str]
    """``PRAGMA integrity_check``'s answer: ``["ok"]`` for a sound file."""


def online_copy(src: Path, dst: Path) -> None:
    """Copy any SQLite database ``src`` (the store, Ironic's) into a new file
    ``dst`` (0600, must not exist) with SQLite's online backup, all pages in
    one step: one read transaction, so a consistent snapshot while writers go
    on — never a file copy, which could be torn."""
    if dst.exists():
        raise FileExistsError(dst)
    filemodes.private_file(dst, create=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=60.0)
    try:
        target = sqlite3.connect(str(dst))
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
        finally:
            target.close()
    finally:
        source.close()


def snapshot_file(src: Path, dst: Path) -> int:
    """:func:`online_copy` of the store at ``src``; returns the snapshot's
    resourceVersion."""
    online_copy(src, dst)
    return inspect_file(dst, check=False).resource_version


def inspect_file(path: Path, *, check: bool = True) -> StoreFacts:
    """Open the store file at ``path`` read-only: its schema version,
    resourceVersion, object count and (``check``) integrity check."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    try:
        integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()] \
            if check else ["ok"]
        row = conn.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
        schema = int(row[0]) if row is not None else 0
        compact = conn.execute(_COMPACT_RV).fetchone()[0]
        max_obj = conn.execute("SELECT coalesce(max(rv), 0) FROM objects").fetchone()[0]
        max_ev = conn.execute("SELECT coalesce(max(rv), 0) FROM events").fetchone()[0]
        count = conn.execute("SELECT count(*) FROM objects").fetchone()[0]
    finally:
        conn.close()
    return StoreFacts(schema=schema, resource_version=max(int(max_obj), int(max_ev),
                                                           int(compact)),
                      objects=int(count), integrity=integrity)


SCHEMA_VERSION: Final = _SCHEMA_VERSION
"""The store schema this Racksmith reads and writes."""
