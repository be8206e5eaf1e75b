"""A small async client for Ironic's REST API (the calls Racksmith makes).

Owns: HTTP to Ironic — nodes (CRUD, JSON-patch), ports, provision and power
state changes, validation, inventory — with one fixed API microversion, error
translation (Ironic's error JSON → :class:`IronicAPIError` carrying Ironic's
message; connection failures → :class:`IronicUnavailable`) and per-host
call counting (the benchmark "Ironic API calls per host"), and the shared
node listing: with ``node_poll_interval`` one background task lists every
node (paged, :data:`NODE_FIELDS` only) on that cadence — the provisioner's
informer: node reads are served from it and :meth:`IronicClient.node_changes`
yields the names of nodes whose listed data changed between two listings,
so a controller can queue those hosts instead of each host polling.

Why not openstacksdk: it is synchronous (we would need a thread per call),
pulls in keystoneauth and a large dependency tree, and we use a dozen
endpoints whose JSON we translate at our edge anyway. Calling the REST API
directly over aiohttp keeps the controller's event loop free and our
dependencies small.

Used only by :mod:`racksmith.provisioner.ironic` (and tests). Request bodies
can hold BMC passwords: they are never logged or put into exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import structlog

#: One microversion for every call: 1.95 has node inventory (1.81),
#: configdrive as JSON (1.56), ``automated_clean`` (1.47), no ``.json``
#: suffix stripping of node names (1.91) and node names on ports (1.94).
API_VERSION = "1.95"
API_VERSION_HEADER = "X-OpenStack-Ironic-API-Version"

JsonObject = dict[str, Any]

#: The node fields the provisioner reads: what the node cache lists (a
#: listing of only these costs Ironic about a third less than ``/detail``).
NODE_FIELDS = (
    "uuid", "name", "driver", "driver_info", "properties", "instance_info",
    "provision_state", "target_provision_state", "power_state", "target_power_state",
    "last_error", "maintenance", "fault", "automated_clean", "inspection_finished_at",
    "bios_interface", "extra",
)


class IronicUnavailable(Exception):
    """Ironic cannot be reached or answers 503 (retry later). The provisioner
    adapter turns it into the provisioner contract's ``BackendUnavailable``:
    this client knows nothing of that contract."""


class IronicAPIError(Exception):
    """Ironic answered with an error; ``message`` is Ironic's faultstring."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Ironic API error {status}: {message}")
        self.status = status
        self.message = message

    @property
    def is_not_found(self) -> bool:
        return self.status == 404

    @property
    def is_conflict(self) -> bool:
        """409: the node is locked or in a state that forbids the call."""
        return self.status == 409


class IronicClient:
    """Async Ironic API client. Use as an async context manager or call
    :meth:`close`. ``host`` arguments name the host a call is counted for
    (default: the node identifier in the URL)."""

    def __init__(self, base_url: str, *, timeout: float = 30.0,
                 session: aiohttp.ClientSession | None = None,
                 node_cache_ttl: float = 0.0, node_poll_interval: float = 0.0,
                 node_stale_after: float = 30.0, auth: aiohttp.BasicAuth | None = None,
                 ca_file: Path | None = None, node_poll_idle: float | None = None,
                 node_poll_share: float = 0.2) -> None:
        """``node_cache_ttl`` > 0 serves :meth:`get_node` from node data at
        most that old: one shared listing of all nodes (one call per period
        for all hosts instead of one per host per poll), or a direct read of
        the node made within the period. A node this client wrote to is only
        served from data fetched after that write (else read directly), so a
        caller never acts on a state older than its own last write; repeated
        reads of a node between two writes (one reconcile) cost at most one
        call. A node missing from a listing fetched after our last write to
        it is absent.

        ``node_poll_interval`` > 0 lists the nodes in the background on
        that cadence instead (the listing starts again ``node_poll_interval``
        after the previous one started, or later when listings are slow:
        ``node_poll_share``): reads
        never wait for a listing; a node's listed data serves reads while it
        is newer than our last write to it and at most ``node_stale_after``
        old (a stuck listing falls back to direct reads), else the node is
        read directly. The poller starts with the first call or
        :meth:`node_changes`, and stops with :meth:`close` — or by itself
        once nobody listens to :meth:`node_changes` and no call was made for
        ``node_poll_idle`` seconds (a controllers process that lost its
        leadership stops listing Ironic); the next call starts it again.
        ``node_poll_idle`` defaults to ten polling periods, at least 30 s.

        ``node_poll_share`` bounds the share of the time the background
        listing runs: a listing that took ``t`` seconds is followed by the
        next one no sooner than ``t / node_poll_share`` after it started
        (and never later than half of ``node_stale_after``). A listing of a
        few nodes keeps the ``node_poll_interval`` cadence; at 1,000 nodes
        on a busy Ironic (a listing answered in a second or more, each
        costing Ironic's single worker a quarter of a second of CPU) it
        backs off, leaving Ironic to the provisioning actions instead of
        re-listing unchanged nodes every second (measured: docs/benchmarks.md)."""
        if not 0 < node_poll_share <= 1:
            raise ValueError("node_poll_share must be in (0, 1]")
        self._poll_share = node_poll_share
        self.base_url = base_url.rstrip("/")
        self._cache_ttl = node_cache_ttl
        self._cache: dict[str, tuple[float, JsonObject]] = {}
        """node name or uuid → (when its data was fetched, the node)."""
        self._listed_at = float("-inf")
        """When the last node listing was fetched (loop time)."""
        self._listing_complete = False
        """It had every node (absence from it means absent)."""
        self._written_at: dict[str, float] = {}
        """node → when our last write to it completed (loop time)."""
        self._refresh_lock = asyncio.Lock()
        self._poll_interval = node_poll_interval
        self._stale_after = max(node_stale_after, node_poll_interval)
        if node_poll_interval > 0:
            self._cache_ttl = self._stale_after
        self._poller: asyncio.Task[None] | None = None
        self._poll_idle = node_poll_idle if node_poll_idle is not None \
            else max(30.0, 10 * node_poll_interval)
        self._last_use = float("-inf")
        """When a call was last made (loop time): the poller stops when idle."""
        self._listed: dict[str, JsonObject] = {}
        """node name → its data in the latest listing (what changes are diffed against)."""
        self._subscribers: list[asyncio.Queue[str]] = []
        self.listings = 0
        """Node listings fetched (each one or more paged calls)."""
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._auth = auth
        """http_basic credentials (Ironic's ``auth_strategy = http_basic``, Metal3's)."""
        self._ssl: ssl.SSLContext | None = (
            ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else None)
        """Trust for an Ironic served over TLS by a private CA."""
        self._session = session
        self._own_session = session is None
        self.calls: Counter[str] = Counter()
        """API calls per host (node name or uuid as passed)."""
        self.provision_actions: Counter[tuple[str, str]] = Counter()
        """(host, target) → how many provision-state changes were requested."""
        self.power_actions: Counter[tuple[str, str]] = Counter()
        """(host, target) → how many power-state changes were requested."""
        self.total_calls = 0

    async def __aenter__(self) -> IronicClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    # --- generic ----------------------------------------------------------

    async def request(self, method: str, path: str, *, body: Any = None,
                      params: dict[str, str] | None = None,
                      host: str | None = None) -> Any:
        """One API call; returns the decoded JSON body (None if empty)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, auth=self._auth,
                connector=aiohttp.TCPConnector(ssl=self._ssl) if self._ssl else None)
            self._own_session = True
        self._ensure_poller()
        self.total_calls += 1
        if host is not None:
            self.calls[host] += 1
        headers = {API_VERSION_HEADER: API_VERSION, "Accept": "application/json"}
        try:
            async with self._session.request(
                method, f"{self.base_url}{path}", json=body, params=params,
                headers=headers,
            ) as resp:
                text = await resp.text()
                status = resp.status
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            raise IronicUnavailable(
                f"Ironic at {self.base_url} is unreachable: {type(exc).__name__}") from None
        if status == 503:
            raise IronicUnavailable(f"Ironic at {self.base_url} is unavailable (503)")
        if status >= 400:
            raise IronicAPIError(status, _error_message(text, status))
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    # --- service ----------------------------------------------------------

    async def list_drivers(self) -> list[JsonObject]:
        body = await self.request("GET", "/v1/drivers")
        return list(body.get("drivers", [])) if isinstance(body, dict) else []

    # --- nodes ------------------------------------------------------------

    async def get_node(self, node: str) -> JsonObject | None:
        """The node by name or uuid, None if absent. With a node cache, only
        :data:`NODE_FIELDS` are returned (whether cached or read directly)."""
        if self._cache_ttl > 0:
            self._ensure_poller()
            hit, cached = self._cached(node)
            if not hit and self._poll_interval <= 0:
                await self._refresh_cache()
                hit, cached = self._cached(node)
            if hit:
                return None if cached is None else dict(cached)
        loop = asyncio.get_running_loop()
        started = loop.time()
        params = {"fields": ",".join(NODE_FIELDS)} if self._cache_ttl > 0 else None
        try:
            body = await self.request("GET", f"/v1/nodes/{node}", params=params, host=node)
        except IronicAPIError as exc:
            if exc.is_not_found:
                return None
            raise
        found = _obj(body)
        if self._cache_ttl > 0 and started > self._written_at.get(node, float("-inf")):
            self._remember(self._cache, found, started)
        return dict(found)

    def _cached(self, node: str) -> tuple[bool, JsonObject | None]:
        """(True, the node) from data fetched after our last write to it and
        within the TTL, (True, None) if such a listing lacks it, else (False,
        None): read it."""
        now = asyncio.get_running_loop().time()
        written = self._written_at.get(node, float("-inf"))
        entry = self._cache.get(node)
        if entry is not None:
            fetched, data = entry
            if fetched > written and now - fetched < self._cache_ttl:
                return True, data
            return False, None
        if (self._listing_complete and self._listed_at > written
                and now - self._listed_at < self._cache_ttl):
            return True, None
        return False, None

    @property
    def polls_nodes(self) -> bool:
        """Node reads come from a background listing (``node_poll_interval``)."""
        return self._poll_interval > 0

    def _ensure_poller(self) -> None:
        if self._poll_interval <= 0 or (
                self._poller is not None and asyncio.current_task() is self._poller):
            return  # the listing's own calls are not a use
        loop = asyncio.get_running_loop()
        self._last_use = loop.time()
        if self._poller is None or self._poller.done():
            self._poller = loop.create_task(self._poll_nodes(), name="ironic-node-poller")

    @property
    def polling(self) -> bool:
        """The background listing runs now."""
        return self._poller is not None and not self._poller.done()

    async def _poll_nodes(self) -> None:
        """List every node on the poll cadence until cancelled; a failed
        listing is logged (no request body or credentials in it) and tried
        again on the next tick."""
        loop = asyncio.get_running_loop()
        log = structlog.get_logger("racksmith.ironic")
        failing = False
        while True:
            started = loop.time()
            try:
                await self._refresh_cache(force=True)
            except (IronicUnavailable, IronicAPIError) as exc:
                if not failing:
                    log.warning("listing Ironic nodes failed", error=str(exc))
                failing = True
            except Exception as exc:  # the poller must outlive a bug
                log.error("listing Ironic nodes failed", error=f"{type(exc).__name__}: {exc}")
                failing = True
            else:
                if failing:
                    log.info("listing Ironic nodes again")
                failing = False
            if not self._subscribers and loop.time() - self._last_use > self._poll_idle:
                log.info("no Ironic node reads for a while: the node listing stops until "
                         "the next one")
                return
            took = loop.time() - started
            await asyncio.sleep(max(0.0, self.next_listing_after(took) - took))

    def next_listing_after(self, took: float) -> float:
        """Seconds from a listing's start to the next one's, for a listing that
        took ``took`` seconds (see ``node_poll_share``)."""
        return min(max(self._poll_interval, took / self._poll_share),
                   max(self._poll_interval, self._stale_after / 2))

    async def node_changes(self) -> AsyncIterator[str]:
        """Names of the nodes whose listed data changed from one background
        listing to the next (appeared, changed or gone), as they are seen;
        runs until cancelled. Needs ``node_poll_interval``. The first
        listing is the baseline: its nodes are not reported."""
        if self._poll_interval <= 0:
            raise RuntimeError("node_changes needs node_poll_interval > 0")
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.append(queue)
        self._ensure_poller()
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.remove(queue)

    def _publish(self, nodes: list[JsonObject], complete: bool) -> None:
        """Diff a listing against the previous one and tell the subscribers."""
        listed = {str(n["name"]): n for n in nodes if n.get("name")}
        first = self.listings == 0
        self.listings += 1
        previous, self._listed = self._listed, listed
        if first or not self._subscribers:
            return
        changed = [name for name, node in listed.items() if previous.get(name) != node]
        if complete:
            changed += [name for name in previous if name not in listed]
        for name in changed:
            for queue in self._subscribers:
                queue.put_nowait(name)

    async def _refresh_cache(self, *, force: bool = False) -> None:
        loop = asyncio.get_running_loop()
        if not force and loop.time() - self._listed_at < self._cache_ttl:
            return
        async with self._refresh_lock:
            if not force and loop.time() - self._listed_at < self._cache_ttl:
                return
            started = loop.time()
            nodes, complete = await self._list_all("/v1/nodes", "nodes",
                                                   {"fields": ",".join(NODE_FIELDS)})
            # Keep direct reads made after this listing started (newer data).
            cache = {key: entry for key, entry in self._cache.items() if entry[0] > started}
            for item in nodes:
                self._remember(cache, item, started)
            self._cache = cache
            self._listed_at = started
            self._listing_complete = complete
            self._publish(nodes, complete)

    async def _list_all(self, path: str, key: str,
                        params: dict[str, str]) -> tuple[list[JsonObject], bool]:
        """Every item of a collection, following Ironic's ``next`` links (a
        page holds at most ``[api]max_limit`` items), and whether the pages
        ended as Ironic says (False: a malformed answer or link)."""
        items: list[JsonObject] = []
        query = dict(params)
        for _ in range(10_000):
            body = await self.request("GET", path, params=query)
            if not isinstance(body, dict):
                return items, False
            page = [i for i in body.get(key, []) if isinstance(i, dict)]
            items += page
            nxt = body.get("next")
            if not page or not nxt:
                return items, True
            following = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(str(nxt)).query))
            if not following.get("marker") or following.get("marker") == query.get("marker"):
                return items, False
            query = {**query, **following}
        return items, False

    @staticmethod
    def _remember(cache: dict[str, tuple[float, JsonObject]], node: JsonObject,
                  fetched: float) -> None:
        for key in ("name", "uuid"):
            if node.get(key):
                current = cache.get(str(node[key]))
                if current is None or current[0] <= fetched:
                    cache[str(node[key])] = (fetched, node)

    def _wrote(self, node: str) -> None:
        """Note a write to ``node`` (called before and after it): the cached
        state must be newer than the write to be served."""
        if self._cache_ttl <= 0:
            return
        now = asyncio.get_running_loop().time()
        names = {node}
        entry = self._cache.get(node)
        if entry is not None:
            names |= {str(entry[1][k]) for k in ("name", "uuid") if entry[1].get(k)}
        for name in names:
            self._written_at[name] = now

    async def list_nodes(self, *, fields: list[str] | None = None) -> list[JsonObject]:
        params = {"fields": ",".join(fields)} if fields else None
        body = await self.request("GET", "/v1/nodes", params=params)
        return list(body.get("nodes", [])) if isinstance(body, dict) else []

    async def create_node(self, body: JsonObject, *, host: str) -> JsonObject:
        self._wrote(host)
        try:
            return _obj(await self.request("POST", "/v1/nodes", body=body, host=host))
        finally:
            self._wrote(host)

    async def patch_node(self, node: str, ops: list[JsonObject]) -> JsonObject:
        """Apply a JSON patch (RFC 6902) to the node."""
        self._wrote(node)
        try:
            return _obj(await self.request("PATCH", f"/v1/nodes/{node}", body=ops, host=node))
        finally:
            self._wrote(node)

    async def delete_node(self, node: str) -> bool:
        """Delete the node; False if it was already gone."""
        self._wrote(node)
        try:
            await self.request("DELETE", f"/v1/nodes/{node}", host=node)
        except IronicAPIError as exc:
            if exc.is_not_found:
                return False
            raise
        finally:
            self._wrote(node)
        return True

    async def set_provision_state(self, node: str, target: str, *,
                                  configdrive: Any = None, **extra: Any) -> None:
        """Request a provision-state change (``manage``, ``provide``,
        ``inspect``, ``active``, ``deleted``, ``adopt``…)."""
        body: JsonObject = {"target": target, **extra}
        if configdrive is not None:
            body["configdrive"] = configdrive
        self.provision_actions[(node, target)] += 1
        self._wrote(node)
        try:
            await self.request("PUT", f"/v1/nodes/{node}/states/provision", body=body,
                               host=node)
        finally:
            self._wrote(node)

    async def set_power_state(self, node: str, target: str) -> None:
        """``power on``, ``power off``, ``rebooting``, ``soft power off``."""
        self.power_actions[(node, target)] += 1
        self._wrote(node)
        try:
            await self.request("PUT", f"/v1/nodes/{node}/states/power",
                               body={"target": target}, host=node)
        finally:
            self._wrote(node)

    async def set_maintenance(self, node: str, on: bool, *, reason: str = "") -> None:
        path = f"/v1/nodes/{node}/maintenance"
        self._wrote(node)
        try:
            if on:
                await self.request("PUT", path, body={"reason": reason}, host=node)
            else:
                await self.request("DELETE", path, host=node)
        finally:
            self._wrote(node)

    async def validate_node(self, node: str) -> JsonObject:
        """Per-interface ``{result, reason}`` of the node's configuration."""
        return _obj(await self.request("GET", f"/v1/nodes/{node}/validate", host=node))

    async def get_inventory(self, node: str) -> JsonObject | None:
        """``{inventory, plugin_data}`` from the last inspection, None if none."""
        try:
            body = await self.request("GET", f"/v1/nodes/{node}/inventory", host=node)
        except IronicAPIError as exc:
            if exc.is_not_found:
                return None
            raise
        return _obj(body)

    async def get_bios(self, node: str) -> list[JsonObject]:
        """The node's cached BIOS settings with their registry fields
        (``attribute_type``, ``allowable_values``, bounds...); [] if none."""
        body = await self.request("GET", f"/v1/nodes/{node}/bios", params={"detail": "True"},
                                  host=node)
        return list(body.get("bios", [])) if isinstance(body, dict) else []

    async def get_history(self, node: str) -> list[JsonObject]:
        body = await self.request("GET", f"/v1/nodes/{node}/history", host=node)
        return list(body.get("history", [])) if isinstance(body, dict) else []

    # --- ports ------------------------------------------------------------

    async def list_ports(self, node: str) -> list[JsonObject]:
        body = await self.request("GET", "/v1/ports", params={"node": node}, host=node)
        return list(body.get("ports", [])) if isinstance(body, dict) else []

    async def create_port(self, node_uuid: str, address: str, *, host: str) -> JsonObject:
        body = {"node_uuid": node_uuid, "address": address}
        return _obj(await self.request("POST", "/v1/ports", body=body, host=host))


def _obj(body: Any) -> JsonObject:
    return body if isinstance(body, dict) else {}


def _error_message(text: str, status: int) -> str:
    """Ironic's faultstring from its error body (which nests JSON in a string)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or f"HTTP {status}"
    if isinstance(body, dict):
        inner = body.get("error_message", body)
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                return str(inner)
        if isinstance(inner, dict):
            for key in ("faultstring", "description", "message", "title"):
                if isinstance(inner.get(key), str):
                    return str(inner[key])
    return f"HTTP {status}"
