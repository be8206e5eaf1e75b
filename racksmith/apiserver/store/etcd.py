"""The etcd v3 storage backend of the API server.

Owns: the key layout in etcd, mapping the Store contract onto etcd's MVCC
(resourceVersion = etcd revision, compare-and-swap writes, lists at one
revision), the watch cache (one etcd watch per process feeding every watcher
of this replica), following writes made by other replicas, and compaction.

Layout: one key per object, ``PREFIX/registry/<resource>!<namespace>!<name>``
(``<resource>`` is ``<group or core>/<plural>``; ``!`` sorts below every
character a resource, namespace or name may hold, so etcd's key order is the
contract's ``(namespace, name)`` order and one resource or namespace is one
key range). The value is the object as JSON; its ``resourceVersion`` is not
trusted on read: it is set from the key's ``mod_revision`` (a DELETED event
carries the delete's revision), as kube-apiserver does.

Writes are single-key transactions: create = ``create_revision == 0`` →
put; update/delete with a precondition = ``mod_revision == rv``, without one
= ``create_revision > 0``; the failure branch reads the key so NotFound and
Conflict are told apart. A write returns once etcd answered, that is once
a quorum of members fsynced it. Reads (``get``, ``list``) are linearizable
range requests: without quorum they fail (:class:`StoreUnavailableError`,
HTTP 503 naming the store) instead of serving stale data. ``list`` with
``rv`` reads at that revision (a continue token's snapshot); a compacted one
raises :class:`Expired` (HTTP 410).

Watches: at :meth:`EtcdStore.open` the store opens *one* etcd watch on the
whole prefix (``prev_kv``) from the revision it read; every event goes into
a per-resource ring (``watch_cache_size`` events per resource, kube's watch
cache) and to the :class:`WatchHub`. A watch from an rv the ring still covers
is served from it and then live; an older one opens its own etcd watch from
that revision (compacted → :class:`Expired`, HTTP 410). ``current_rv`` is the
newest revision this replica's watch has delivered, so a bookmark never
claims events a watcher has not been sent. When the watch stream breaks
(a member died) it resumes on another member from the last revision seen.

Other replicas: an event this store did not write itself (told apart by the
revisions its own writes returned; an event racing its own write's answer
waits for it) is handed to ``on_foreign(key, old, new)`` in revision order:
the API server runs its write hooks (RBAC, token and namespace caches, CRDs,
garbage collection) on it, so every replica's caches follow every write.

Compaction (kube-apiserver's): every ``compact_interval`` seconds the store
compacts etcd to the revision it saw one interval before, keeping at least
``event_log_size`` revisions. Several replicas compacting is harmless (an
older target is refused by etcd and ignored).

The gRPC client: etcd's v3 API through grpcio's asyncio channel, with the
generated stubs aetcd ships (aetcd's own client has no TLS and no ranged
reads at a revision). Several endpoints are one channel with grpc's
pick-first over the addresses, so a dead member's requests fail over.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import grpc
import grpc.aio
import orjson
from aetcd import rpc

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
    TooLargeError,
    WatchBatch,
    WatchEvent,
)
from racksmith.apiserver.store.watchhub import RawEvent, WatchHub, replay_then_follow

__all__ = ["EtcdConfig", "EtcdStore", "open_channel"]

log = logging.getLogger("racksmith.apiserver.store.etcd")

SEP: Final = "!"
_PUT: Final = 0
_DELETE: Final = 1
ForeignHook = Callable[[Key, Obj | None, Obj | None], Awaitable[None]]


@dataclass(frozen=True)
class EtcdConfig:
    """Where the etcd cluster is and how to reach it."""

    endpoints: tuple[str, ...]
    """Client URLs, ``https://127.0.0.1:2379`` (IP literals, or one host name)."""
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    prefix: str = "/racksmith"
    request_timeout: float = 5.0
    """Seconds a request may take before the store reports etcd unavailable."""
    server_name: str = "localhost"
    """The name the members' certificates are checked against."""

    @property
    def tls(self) -> bool:
        return self.ca_file is not None or any(
            e.startswith("https://") for e in self.endpoints)


def _target(endpoints: Sequence[str]) -> str:
    """A grpc target for ``endpoints``: a pick-first list of IP addresses, or
    one DNS name."""
    hosts: list[tuple[str, int]] = []
    for url in endpoints:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname is None:
            raise ValueError(f"etcd endpoint {url!r} names no host")
        hosts.append((parts.hostname, parts.port or 2379))
    try:
        ips = [ipaddress.ip_address(h) for h, _ in hosts]
    except ValueError:
        if len(hosts) != 1:
            raise ValueError("several etcd endpoints must be IP addresses (or put one "
                             "name in front of them)") from None
        return f"dns:///{hosts[0][0]}:{hosts[0][1]}"
    if all(ip.version == 4 for ip in ips):
        return "ipv4:" + ",".join(f"{h}:{p}" for h, p in hosts)
    return "ipv6:" + ",".join(f"[{h}]:{p}" for h, p in hosts)


def open_channel(cfg: EtcdConfig) -> grpc.aio.Channel:
    """A gRPC channel to the cluster (TLS with the client certificate when
    configured; pick-first over the endpoints; quick reconnects)."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", 256 * 1024 * 1024),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000)]
    target = _target(cfg.endpoints)
    if not cfg.tls:
        return grpc.aio.insecure_channel(target, options=options)
    creds = grpc.ssl_channel_credentials(
        root_certificates=cfg.ca_file.read_bytes() if cfg.ca_file else None,
        private_key=cfg.key_file.read_bytes() if cfg.key_file else None,
        certificate_chain=cfg.cert_file.read_bytes() if cfg.cert_file else None)
    options.append(("grpc.ssl_target_name_override", cfg.server_name))
    return grpc.aio.secure_channel(target, creds, options=options)


def _prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for every key starting with ``prefix``."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\x00"


@dataclass
class _Cached:
    """One event of the watch cache (data already carries its rv)."""

    raw: RawEvent
    prev: bytes | None
    """The previous value as etcd stored it (decoded only when asked for)."""
    prev_rv: int = 0

    def previous(self) -> Obj | None:
        return _stamp_obj(self.prev, self.prev_rv) if self.prev else None

    def current(self) -> Obj | None:
        return None if self.raw.type is EventType.DELETED else orjson.loads(self.raw.data)


@dataclass
class _Ring:
    events: deque[_Cached] = field(default_factory=deque)
    evicted_rv: int = 0
    """A watch may resume from any rv >= this one from the ring."""


def _stamp_bytes(value: bytes, rv: int) -> tuple[Obj, bytes]:
    obj: Obj = orjson.loads(value)
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = {}
        obj["metadata"] = md
    md["resourceVersion"] = str(rv)
    return obj, orjson.dumps(obj)


def _stamp_obj(value: bytes, rv: int) -> Obj:
    obj: Obj = orjson.loads(value)
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = {}
        obj["metadata"] = md
    md["resourceVersion"] = str(rv)
    return obj


class EtcdStore(BurstWatches):
    """A :class:`~racksmith.apiserver.store.base.Store` on an etcd v3 cluster.

    ``watch_cache_size``: events kept per resource for watch resumption from
    memory. ``watch_queue_size``: live events buffered per watcher.
    ``compact_interval``: seconds between compactions (0: never).
    """

    def __init__(self, config: EtcdConfig, *, event_log_size: int = 100_000,
                 watch_cache_size: int = 10_000, watch_queue_size: int = 10_000,
                 compact_interval: float = 300.0) -> None:
        self.config = config
        self.event_log_size = event_log_size
        self.watch_cache_size = max(1, watch_cache_size)
        self.compact_interval = compact_interval
        self.on_foreign: ForeignHook | None = None
        self.on_reset: Callable[[], Awaitable[None]] | None = None
        """Called after the watch lost history (see :meth:`_reset_after_compaction`)."""
        base = config.prefix.rstrip("/") + "/registry/"
        self._prefix = base.encode()
        self._hub = WatchHub(watch_queue_size)
        self._rings: dict[str, _Ring] = {}
        self._state = "new"
        self._channel: grpc.aio.Channel | None = None
        self._kv: Any = None
        self._watch_stub: Any = None
        self._rv = 0
        self._start_rv = 0
        self._compact_rv = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._synced = asyncio.Event()
        # Telling own writes from other replicas' (see the module docstring).
        self._own: set[int] = set()
        self._inflight: dict[Key, int] = {}
        self._parked: dict[Key, list[_Cached]] = {}
        self._foreign: asyncio.Queue[_Cached] = asyncio.Queue()

    # ------------------------------------------------------------------ keys

    def _key_bytes(self, key: Key) -> bytes:
        return self._prefix + f"{key.resource}{SEP}{key.namespace}{SEP}{key.name}".encode()

    def _scope_prefix(self, scope: Scope) -> bytes:
        if scope.namespace is None:
            return self._prefix + f"{scope.resource}{SEP}".encode()
        return self._prefix + f"{scope.resource}{SEP}{scope.namespace}{SEP}".encode()

    def _decode_key(self, raw: bytes) -> Key | None:
        if not raw.startswith(self._prefix):
            return None
        parts = raw[len(self._prefix):].decode().split(SEP, 2)
        if len(parts) != 3:
            return None
        return Key(parts[0], parts[1], parts[2])

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._state != "new":
            raise StoreUnavailableError(f"etcd store is {self._state}; open() is allowed once")
        self._channel = open_channel(self.config)
        self._kv = rpc.KVStub(self._channel)
        self._watch_stub = rpc.WatchStub(self._channel)
        try:
            resp = await self._call(self._kv.Range, rpc.RangeRequest(
                key=self._prefix, range_end=_prefix_end(self._prefix), count_only=True))
        except BaseException:
            await self._channel.close()
            self._state = "closed"
            raise
        self._rv = self._start_rv = int(resp.header.revision)
        self._state = "open"
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._watch_loop(), name="racksmith-etcd-watch"))
        self._tasks.append(loop.create_task(self._foreign_loop(),
                                            name="racksmith-etcd-foreign"))
        if self.compact_interval > 0:
            self._tasks.append(loop.create_task(self._compact_loop(),
                                                name="racksmith-etcd-compact"))

    async def close(self) -> None:
        if self._state in ("closing", "closed"):
            return
        if self._state == "new":
            self._state = "closed"
            return
        self._state = "closing"
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._hub.close()
        if self._channel is not None:
            await self._channel.close()
        self._state = "closed"

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreUnavailableError("the etcd store is not open")

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, timeout=self.config.request_timeout)
        except grpc.aio.AioRpcError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: grpc.aio.AioRpcError) -> Exception:
        code = exc.code()
        details = (exc.details() or "")[:200]
        if code == grpc.StatusCode.OUT_OF_RANGE and "compacted" in details:
            return Expired(f"etcd: {details}")
        # etcd: "etcdserver: request is too large"; grpc at the member:
        # "received message larger than max"
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED) \
                and ("too large" in details or "larger than max" in details):
            return TooLargeError(f"the object is too large for the etcd store ({details})")
        return StoreUnavailableError(
            f"etcd store unavailable ({', '.join(self.config.endpoints)}): "
            f"{code.name}: {details}")

    # ------------------------------------------------------------------ reads

    def current_rv(self) -> int:
        return self._rv

    def oldest_rv(self) -> int:
        # etcd keeps the revision it compacted at: a watch from it - 1 works
        return max(self._compact_rv - 1, 0)

    async def get(self, key: Key) -> Obj:
        self._check_open()
        resp = await self._call(self._kv.Range, rpc.RangeRequest(key=self._key_bytes(key)))
        if not resp.kvs:
            raise NotFoundError(key)
        kv = resp.kvs[0]
        return _stamp_obj(kv.value, int(kv.mod_revision))

    async def list(self, scope: Scope, *, after: Key | None = None,
                   limit: int | None = None, rv: int | None = None,
                   contains: tuple[bytes, ...] = ()) -> ListResult:
        """See :meth:`Store.list`; ``contains`` is applied here to the values
        etcd returned, so ``limit`` counts the objects looked at."""
        self._check_open()
        prefix = self._scope_prefix(scope)
        start = prefix if after is None else self._key_bytes(after) + b"\x00"
        req = rpc.RangeRequest(key=start, range_end=_prefix_end(prefix),
                               revision=rv or 0)
        if limit is not None and limit > 0:
            req.limit = limit
        resp = await self._call(self._kv.Range, req)
        items = [_stamp_obj(kv.value, int(kv.mod_revision)) for kv in resp.kvs
                 if all(n in kv.value for n in contains)]
        at = int(resp.header.revision) if not rv else rv
        if not resp.more:
            return ListResult(items=items, rv=at)
        last = self._decode_key(resp.kvs[-1].key)
        remaining = 0 if contains else int(resp.count) - len(resp.kvs)
        return ListResult(items=items, rv=at, next_name=last, remaining=remaining)

    async def state_before(self, key: Key, rv: int) -> tuple[bool, Obj | None]:
        ring = self._rings.get(key.resource)
        if ring is not None:
            for ev in reversed(ring.events):
                if ev.raw.rv == rv and ev.raw.key == key:
                    return True, ev.previous()
                if ev.raw.rv < rv:
                    break
        self._check_open()
        try:
            resp = await self._call(self._kv.Range, rpc.RangeRequest(
                key=self._key_bytes(key), revision=max(rv - 1, 1)))
        except Expired:
            return False, None
        if not resp.kvs:
            return True, None
        kv = resp.kvs[0]
        return True, _stamp_obj(kv.value, int(kv.mod_revision))

    # ------------------------------------------------------------------ writes

    def _compare(self, key: bytes, target: str, result: str, value: int) -> Any:
        cmp = rpc.Compare(key=key, target=getattr(rpc.Compare, target),
                          result=getattr(rpc.Compare, result))
        if target == "MOD":
            cmp.mod_revision = value
        else:
            cmp.create_revision = value
        return cmp

    async def _txn(self, key: Key, request: Any) -> Any:
        self._check_open()
        self._inflight[key] = self._inflight.get(key, 0) + 1
        rev = 0
        try:
            resp = await self._call(self._kv.Txn, request)
            if resp.succeeded:
                rev = int(resp.header.revision)
                self._own.add(rev)
            return resp
        finally:
            left = self._inflight[key] - 1
            if left:
                self._inflight[key] = left
            else:
                del self._inflight[key]
                self._release_parked(key)

    async def create(self, key: Key, obj: Obj) -> Obj:
        raw = self._key_bytes(key)
        value = orjson.dumps(obj)
        resp = await self._txn(key, rpc.TxnRequest(
            compare=[self._compare(raw, "CREATE", "EQUAL", 0)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=value))]))
        if not resp.succeeded:
            raise AlreadyExistsError(key)
        return _stamp_obj(value, int(resp.header.revision))

    def _precondition(self, raw: bytes, expected_rv: int | None) -> Any:
        if expected_rv is None:
            return self._compare(raw, "CREATE", "GREATER", 0)
        return self._compare(raw, "MOD", "EQUAL", expected_rv)

    def _failure(self, key: Key, resp: Any, expected_rv: int | None) -> Exception:
        found = resp.responses[0].response_range.kvs if resp.responses else []
        if not found:
            return NotFoundError(key)
        return ConflictError(f"{key}: resourceVersion is {found[0].mod_revision}, "
                             f"not {expected_rv}")

    async def update(self, key: Key, obj: Obj, *, expected_rv: int | None = None) -> Obj:
        raw = self._key_bytes(key)
        value = orjson.dumps(obj)
        resp = await self._txn(key, rpc.TxnRequest(
            compare=[self._precondition(raw, expected_rv)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=value))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=raw, keys_only=True))]))
        if not resp.succeeded:
            raise self._failure(key, resp, expected_rv)
        return _stamp_obj(value, int(resp.header.revision))

    async def delete(self, key: Key, *, expected_rv: int | None = None) -> Obj:
        raw = self._key_bytes(key)
        resp = await self._txn(key, rpc.TxnRequest(
            compare=[self._precondition(raw, expected_rv)],
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(
                key=raw, prev_kv=True))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=raw, keys_only=True))]))
        if not resp.succeeded:
            raise self._failure(key, resp, expected_rv)
        prev = resp.responses[0].response_delete_range.prev_kvs
        if not prev:  # deleted by someone else between compare and delete: impossible in a txn
            raise NotFoundError(key)
        return _stamp_obj(prev[0].value, int(resp.header.revision))

    async def compact(self, revision: int) -> None:
        """Compact etcd's history up to ``revision`` (an older one is ignored)."""
        self._check_open()
        try:
            await self._call(self._kv.Compact, rpc.CompactionRequest(revision=revision))
        except Expired:
            return
        self._compact_rv = max(self._compact_rv, revision)

    # ------------------------------------------------------------------ the watch cache

    async def wait_synced(self, rv: int, timeout: float = 10.0) -> None:
        """Wait until this replica's watch has delivered ``rv`` (tests, bookmarks)."""
        async with asyncio.timeout(timeout):
            while self._rv < rv:
                self._synced.clear()
                await self._synced.wait()

    async def _watch_loop(self) -> None:
        """The one etcd watch of this replica; resumes after a broken stream."""
        backoff = 0.1
        while self._state == "open":
            try:
                async for resp in self._etcd_watch(self._prefix, self._rv + 1,
                                                   progress=True):
                    backoff = 0.1
                    self._ingest(resp)
            except asyncio.CancelledError:
                raise
            except Expired:
                try:
                    await self._reset_after_compaction()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("etcd watch reset failed (%s); trying again",
                                type(exc).__name__)
            except Exception as exc:
                log.warning("etcd watch broke (%s); resuming from revision %d",
                            type(exc).__name__, self._rv + 1)
            if self._state != "open":
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _reset_after_compaction(self) -> None:
        """The watch fell behind etcd's compaction (this replica was cut off
        from etcd for longer than the history kept): what happened meanwhile
        is gone. Every watcher of this replica expires (clients re-list), the
        watch starts again at etcd's current revision, and ``on_reset`` lets
        the server reload what it keeps in memory from the store."""
        log.warning("etcd compacted past this replica's watch (revision %d); watchers "
                    "must re-list", self._rv)
        resp = await self._call(self._kv.Range, rpc.RangeRequest(
            key=self._prefix, range_end=_prefix_end(self._prefix), count_only=True))
        old = self._hub
        self._hub = WatchHub(old._queue_size)
        old.expire_all()
        self._rings.clear()
        self._own.clear()
        self._parked.clear()
        self._rv = self._start_rv = int(resp.header.revision)
        self._synced.set()
        if self.on_reset is not None:
            await self.on_reset()

    async def _etcd_watch(self, prefix: bytes, start: int, *,
                          progress: bool = False) -> AsyncIterator[Any]:
        """Responses of one etcd watch on ``prefix`` from revision ``start``."""
        request = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=prefix, range_end=_prefix_end(prefix), start_revision=start, prev_kv=True,
            progress_notify=progress))
        queue: asyncio.Queue[Any] = asyncio.Queue()
        await queue.put(request)

        async def requests() -> AsyncIterator[Any]:
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item

        call = self._watch_stub.Watch(requests())
        ticker: asyncio.Task[None] | None = None
        if progress:
            ticker = asyncio.get_running_loop().create_task(self._progress_ticker(queue))
        try:
            async for resp in call:
                if resp.compact_revision:
                    self._compact_rv = max(self._compact_rv, int(resp.compact_revision))
                    raise Expired(f"resourceVersion {start - 1} was compacted (oldest kept "
                                  f"{resp.compact_revision})")
                if resp.canceled:
                    raise StoreUnavailableError(f"etcd cancelled the watch: "
                                                f"{resp.cancel_reason[:200]}")
                yield resp
        except grpc.aio.AioRpcError as exc:
            raise self._unavailable(exc) from None
        finally:
            if ticker is not None:
                ticker.cancel()
            await queue.put(None)
            call.cancel()

    async def _progress_ticker(self, queue: asyncio.Queue[Any]) -> None:
        """Ask etcd for a progress notification now and then, so ``current_rv``
        follows etcd's revision while nothing in the prefix changes."""
        while True:
            await asyncio.sleep(1.0)
            await queue.put(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))

    def _ingest(self, resp: Any) -> None:
        """One etcd watch response: cache, publish, and follow foreign writes."""
        events: list[RawEvent] = []
        for ev in resp.events:
            kv = ev.kv
            key = self._decode_key(kv.key)
            if key is None:
                continue
            rv = int(kv.mod_revision)
            prev_kv = ev.prev_kv if ev.HasField("prev_kv") else None
            if ev.type == _DELETE:
                if prev_kv is None:
                    continue  # history without a previous value: nothing to tell
                _, data = _stamp_bytes(prev_kv.value, rv)
                etype = EventType.DELETED
            else:
                _, data = _stamp_bytes(kv.value, rv)
                etype = EventType.ADDED if kv.create_revision == kv.mod_revision \
                    else EventType.MODIFIED
            raw = RawEvent(rv, etype, key, data)
            cached = _Cached(raw, prev_kv.value if prev_kv is not None else None,
                             int(prev_kv.mod_revision) if prev_kv is not None else 0)
            ring = self._rings.get(key.resource)
            if ring is None:
                ring = self._rings[key.resource] = _Ring(evicted_rv=self._start_rv)
            ring.events.append(cached)
            if len(ring.events) > self.watch_cache_size:
                ring.evicted_rv = ring.events.popleft().raw.rv
            events.append(raw)
            self._follow(cached)
        if events:
            self._hub.publish(events)
        elif resp.created or resp.fragment:
            # The revision of a watch's creation says nothing of what it has
            # delivered: events from its start revision up to it still follow.
            return
        # A progress notification (no events) is sent only to a watcher that
        # has been sent everything up to its revision; with events, the
        # newest one is as far as this replica knows it has delivered.
        revision = events[-1].rv if events else int(resp.header.revision)
        if revision > self._rv:
            self._rv = revision
            self._synced.set()

    def _follow(self, cached: _Cached) -> None:
        rv = cached.raw.rv
        if rv in self._own:
            self._own.discard(rv)
            return
        key = cached.raw.key
        if key in self._inflight:
            self._parked.setdefault(key, []).append(cached)
            return
        if self.on_foreign is not None:
            self._foreign.put_nowait(cached)

    def _release_parked(self, key: Key) -> None:
        for cached in self._parked.pop(key, []):
            if cached.raw.rv in self._own:
                self._own.discard(cached.raw.rv)
            elif self.on_foreign is not None:
                self._foreign.put_nowait(cached)

    async def _foreign_loop(self) -> None:
        while True:
            cached = await self._foreign.get()
            hook = self.on_foreign
            if hook is None:
                continue
            key = cached.raw.key
            try:
                await hook(key, cached.previous(), cached.current())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("following a write of another replica to %s/%s failed: %s",
                            key.resource, key.name, type(exc).__name__)

    async def _compact_loop(self) -> None:
        seen = 0
        while True:
            await asyncio.sleep(self.compact_interval)
            try:
                current = self._rv
                target = min(seen, current - self.event_log_size)
                if target > self._compact_rv:
                    await self.compact(target)
                seen = current
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("etcd compaction failed: %s", type(exc).__name__)

    # ------------------------------------------------------------------ watch

    async def _watch(self, scope: Scope, since_rv: int, on_live: OnLive | None, *,
                     batched: bool) -> AsyncGenerator[WatchBatch, None]:
        if self._state != "open":
            return
        ring = self._rings.get(scope.resource)
        floor = ring.evicted_rv if ring is not None else self._start_rv
        watch = self._direct_watch(scope, since_rv) if since_rv < floor else \
            replay_then_follow(self._hub, scope, since_rv, lambda: self._rv,
                               functools.partial(self._ring_replay, scope), on_live,
                               batched=batched)
        async with contextlib.aclosing(watch) as events:
            async for batch in events:
                yield batch

    async def _ring_replay(self, scope: Scope, after: int, upto: int
                           ) -> AsyncGenerator[WatchBatch, None]:
        """The cached events in ``scope`` with after < rv <= upto, in one batch."""
        ring = self._rings.get(scope.resource)
        if ring is None:
            return
        replay = [WatchEvent(c.raw.type, c.raw.key, c.raw.rv, data=c.raw.data)
                  for c in ring.events
                  if after < c.raw.rv <= upto and scope.contains(c.raw.key)]
        if replay:
            yield replay

    async def _direct_watch(self, scope: Scope, since_rv: int
                            ) -> AsyncGenerator[WatchBatch, None]:
        """A watch older than the cache: its own etcd watch from ``since_rv``
        (one list per etcd watch response)."""
        async for resp in self._etcd_watch(self._scope_prefix(scope), since_rv + 1):
            batch: WatchBatch = []
            for ev in resp.events:
                key = self._decode_key(ev.kv.key)
                if key is None:
                    continue
                rv = int(ev.kv.mod_revision)
                if ev.type == _DELETE:
                    if not ev.HasField("prev_kv"):
                        continue
                    _, data = _stamp_bytes(ev.prev_kv.value, rv)
                    batch.append(WatchEvent(EventType.DELETED, key, rv, data=data))
                else:
                    _, data = _stamp_bytes(ev.kv.value, rv)
                    etype = EventType.ADDED if ev.kv.create_revision == rv \
                        else EventType.MODIFIED
                    batch.append(WatchEvent(etype, key, rv, data=data))
            if batch:
                yield batch


def _conforms(store: EtcdStore) -> Store:
    """Type-checks that EtcdStore fulfils the Store protocol."""
    return store
