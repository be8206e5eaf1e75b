"""The API side of the tests: servers, clients and the test's view of the API.

Owns:

- :func:`crds`: Racksmith's CRD manifests, built once per test session
  (building them takes a good half second) and handed out as copies;
- :func:`serving`: an in-process :class:`ApiServer` on a data dir and a
  free port, with the CRDs applied, stopped at the end whatever happens;
- :func:`connect`: a ``kubernetes_asyncio`` client made from a server's
  kubeconfig, closed at the end; :func:`session`: a plain HTTP session with
  the server's CA and admin token;
- :class:`Snapshot`: what a server holds, so that a test sharing a server
  can give it back as it found it (every object the test made, in any
  namespace or cluster-scoped, deleted, finalizers and all);
- :class:`World`: the test's own view of the API (not the controllers'):
  typed API objects and the generic reads and writes every test needs
  (``None`` for a 404, read-modify-write retried on conflicts, waiting for
  an object to exist or be gone, events about an object). Test modules
  subclass it with the parts of their domain (and the parts they play:
  agent, kubelet, IPAM...).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio.client import (
    ApiClient,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    PolicyV1Api,
    RbacAuthorizationV1Api,
    StorageV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.apiserver.server import ApiServer, ApiServerConfig
from racksmith.apiserver.store.base import Scope
from racksmith.app.admission import kind_admission
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from tests.harness.http import ssl_context
from tests.harness.wait import eventually

T = TypeVar("T")
Obj = dict[str, Any]

V = "v1alpha1"
MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
"""Keyword arguments that make a ``kubernetes_asyncio`` patch a merge patch."""


# --------------------------------------------------------------------------- CRDs


@functools.cache
def _all_crds() -> tuple[Obj, ...]:
    from racksmith.kinds.crdgen import all_crds

    return tuple(all_crds())


def crds() -> list[Obj]:
    """Racksmith's CRDs (``racksmith.kinds.crdgen.all_crds()``), built once per
    session; each call returns fresh copies the caller may change."""
    return copy.deepcopy(list(_all_crds()))


def kind_roles() -> list[Obj]:
    """The kinds' built-in roles (``racksmith.kinds.crdgen.kind_roles``)."""
    from racksmith.kinds.crdgen import kind_roles as roles

    return roles()


@functools.cache
def _cluster_scoped() -> frozenset[tuple[str, str]]:
    return frozenset((c["spec"]["group"], c["spec"]["names"]["plural"])
                     for c in _all_crds() if c["spec"]["scope"] == "Cluster")


def cluster_scoped(group: str, plural: str) -> bool:
    """Whether ``group``/``plural`` is one of Racksmith's cluster-scoped kinds."""
    return (group, plural) in _cluster_scoped()


# ------------------------------------------------------------------ servers, clients


@contextlib.asynccontextmanager
async def serving(data_dir: Path, *, with_crds: bool = True,
                  extra_routes: list[Any] | None = None,
                  public: Callable[[str], bool] | None = None,
                  **config: Any) -> AsyncIterator[ApiServer]:
    """An in-process API server (TLS, token) on ``data_dir`` and a free port,
    with Racksmith's CRDs unless ``with_crds`` is false; ``config`` goes to
    :class:`ApiServerConfig` (``event_log_size``...), ``extra_routes`` and
    ``public`` to :class:`ApiServer` (the console's routes)."""
    options: dict[str, Any] = {"admission": [kind_admission]} if with_crds else {}
    if extra_routes is not None:
        options["extra_routes"] = extra_routes
    if public is not None:
        options["public"] = public
    server = ApiServer(ApiServerConfig(data_dir=data_dir, port=0, **config), **options)
    try:
        await server.start(bootstrap=[*crds(), *kind_roles()] if with_crds else ())
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def connect(server: ApiServer) -> AsyncIterator[ApiClient]:
    """A ``kubernetes_asyncio`` client made from ``server``'s kubeconfig."""
    client = await api_client_from_kubeconfig(server.kubeconfig_path)
    try:
        yield client
    finally:
        await client.close()


async def optional(call: Awaitable[T]) -> T | None:
    """The answer of ``call``, or ``None`` if it is a 404."""
    try:
        return await call
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


# -------------------------------------------------------- giving a shared server back


@dataclass(frozen=True)
class _Entry:
    path: str
    """The object's URL path on the server."""
    namespace: str
    kind: str
    finalizers: tuple[str, ...]
    deleting: bool


class Snapshot:
    """The objects a server holds at one moment, by uid.

    :meth:`restore` deletes, through the API, every object that was not
    there: first the objects of the ordinary resources (their finalizers
    removed, as no controller of the test runs any more), then, once they
    are gone, the CRDs and the namespaces (which the server finishes at
    once when they are empty). Objects that were there stay as the test left
    them (a test works in a namespace of its own, on objects of its own).

    The server's registry and store are only read here, to enumerate what
    exists; every write goes through the HTTP API like any client's.
    """

    def __init__(self, server: ApiServer, uids: frozenset[str]) -> None:
        self.server = server
        self.uids = uids

    @classmethod
    async def take(cls, server: ApiServer) -> Snapshot:
        return cls(server, frozenset(uid for uid, _ in await _objects(server)))

    async def leftovers(self) -> list[_Entry]:
        return [entry for uid, entry in await _objects(self.server) if uid not in self.uids]

    async def restore(self, http: aiohttp.ClientSession | None = None,
                      limit: float = 30.0) -> None:
        """Delete what was made since the snapshot; fail if it will not go.

        ``http`` is a session of :func:`session` for the server (one is made
        if not given)."""
        async with contextlib.AsyncExitStack() as stack:
            if http is None:
                http = await stack.enter_async_context(session(self.server))
            left: list[_Entry] = []

            async def clean() -> bool:
                nonlocal left
                left = await self.leftovers()
                if not left:
                    return True
                # Containers (CRDs, namespaces) go last, once they are empty,
                # so the server never has to wait for their contents.
                plain = [e for e in left if e.kind not in ("CustomResourceDefinition",
                                                           "Namespace")]
                busy = {e.namespace for e in plain}
                batch = plain or [e for e in left if e.kind == "CustomResourceDefinition"] \
                    or [e for e in left if e.path.rsplit("/", 1)[-1] not in busy]
                for entry in batch:
                    await _remove(http, self.server.url, entry)
                return False

            try:
                await eventually(clean, "the objects of the test deleted", limit=limit,
                                 interval=0.01)
            except AssertionError:
                raise AssertionError(
                    "could not give the shared server back as it was; left: "
                    + ", ".join(e.path for e in left)) from None


def session(server: ApiServer) -> aiohttp.ClientSession:
    """An HTTP session that trusts ``server``'s CA and sends its admin token."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ssl_context(server)),
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=aiohttp.ClientTimeout(total=30))


async def _objects(server: ApiServer) -> list[tuple[str, _Entry]]:
    out: list[tuple[str, _Entry]] = []
    for storage_key, info in server.registry.storage_keys().items():
        if "list" not in info.verbs or "delete" not in info.verbs:
            continue
        base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
        for obj in (await server.store.list(Scope(storage_key))).items:
            meta = obj["metadata"]
            ns = meta.get("namespace") or ""
            where = f"/namespaces/{ns}" if info.namespaced else ""
            out.append((meta["uid"], _Entry(
                f"{base}{where}/{info.plural}/{meta['name']}", ns, info.kind,
                tuple(meta.get("finalizers") or ()), bool(meta.get("deletionTimestamp")))))
    return out


async def _remove(http: aiohttp.ClientSession, url: str, entry: _Entry) -> None:
    if entry.finalizers and entry.kind != "CustomResourceDefinition":
        body = json.dumps({"metadata": {"finalizers": None}}).encode()
        async with http.patch(url + entry.path, data=body,
                              headers={"Content-Type": "application/merge-patch+json"}) as r:
            await r.read()
    if not entry.deleting:
        async with http.delete(url + entry.path) as r:
            await r.read()


# ------------------------------------------------------------------------ the World


class World:
    """The test's view of the API, in the test's namespace ``ns``.

    ``group``/``plural`` name a custom resource (version ``v1alpha1``). A
    ``namespace`` argument of ``""`` (the default) means the test's
    namespace for a namespaced kind and the cluster scope for Racksmith's
    cluster-scoped kinds; ``None`` forces the cluster scope; anything else
    is that namespace.
    """

    def __init__(self, client: ApiClient, ns: str = "default") -> None:
        self.client = client
        self.ns = ns
        self.custom = CustomObjectsApi(client)
        self.core = CoreV1Api(client)
        self.storage = StorageV1Api(client)
        self.policy = PolicyV1Api(client)
        self.coordination = CoordinationV1Api(client)
        self.rbac = RbacAuthorizationV1Api(client)

    def plain(self, obj: Any) -> Obj:
        """A typed client object as the JSON the server sent."""
        out: Obj = self.client.sanitize_for_serialization(obj)
        return out

    def _namespace(self, group: str, plural: str, namespace: str | None) -> str | None:
        if namespace == "":
            return None if cluster_scoped(group, plural) else self.ns
        return namespace

    # --- custom objects ---------------------------------------------------------------

    async def get(self, group: str, plural: str, name: str, namespace: str | None = ""
                  ) -> Obj | None:
        ns = self._namespace(group, plural, namespace)
        if ns is None:
            return await optional(self.custom.get_cluster_custom_object(group, V, plural, name))
        return await optional(self.custom.get_namespaced_custom_object(
            group, V, ns, plural, name))

    async def items(self, group: str, plural: str, namespace: str | None = "",
                    **kw: Any) -> list[Obj]:
        ns = self._namespace(group, plural, namespace)
        if ns is None:
            out = await self.custom.list_cluster_custom_object(group, V, plural, **kw)
        else:
            out = await self.custom.list_namespaced_custom_object(group, V, ns, plural, **kw)
        return list(out["items"])

    async def create(self, group: str, plural: str, body: Obj,
                     namespace: str | None = "") -> Obj:
        ns = self._namespace(group, plural, namespace)
        out: Obj
        if ns is None:
            out = await self.custom.create_cluster_custom_object(group, V, plural, body)
        else:
            out = await self.custom.create_namespaced_custom_object(group, V, ns, plural, body)
        return out

    async def patch(self, group: str, plural: str, name: str, body: Obj,
                    namespace: str | None = "") -> None:
        """A merge patch. The embedded server answers 409 to a merge patch
        (without a resourceVersion) that races another writer, where
        kube-apiserver retries internally: retried here."""
        ns = self._namespace(group, plural, namespace)
        for _ in range(20):
            try:
                if ns is None:
                    await self.custom.patch_cluster_custom_object(
                        group, V, plural, name, body, **MERGE)
                else:
                    await self.custom.patch_namespaced_custom_object(
                        group, V, ns, plural, name, body, **MERGE)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
                await asyncio.sleep(0.01)
        raise AssertionError(f"patch of {plural}/{name} kept conflicting")

    async def update(self, group: str, plural: str, name: str,
                     change: Callable[[Obj], None], *, status: bool = False,
                     namespace: str | None = "") -> None:
        """Read-modify-write (of the status subresource with ``status``),
        retried on conflicts."""
        ns = self._namespace(group, plural, namespace)
        for _ in range(50):
            obj = await self.get(group, plural, name, ns)
            assert obj is not None, f"{plural}/{name} missing"
            change(obj)
            call: Any
            try:
                if ns is None:
                    call = (self.custom.replace_cluster_custom_object_status if status
                            else self.custom.replace_cluster_custom_object)
                    await call(group, V, plural, name, obj)
                else:
                    call = (self.custom.replace_namespaced_custom_object_status if status
                            else self.custom.replace_namespaced_custom_object)
                    await call(group, V, ns, plural, name, obj)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise AssertionError(f"{plural}/{name} kept conflicting")

    async def put_status(self, group: str, plural: str, name: str, status: Obj,
                         namespace: str | None = "") -> None:
        """Replace the status (through the status subresource), retried on conflicts."""
        def change(obj: Obj) -> None:
            obj["status"] = status
        await self.update(group, plural, name, change, status=True, namespace=namespace)

    async def delete(self, group: str, plural: str, name: str,
                     namespace: str | None = "") -> None:
        ns = self._namespace(group, plural, namespace)
        if ns is None:
            await self.custom.delete_cluster_custom_object(group, V, plural, name)
        else:
            await self.custom.delete_namespaced_custom_object(group, V, ns, plural, name)

    # --- waiting ----------------------------------------------------------------------

    async def exists(self, what: str, fetch: Callable[[], Awaitable[T | None]]) -> T:
        """Wait until ``fetch`` returns something; return it."""
        async def check() -> T | None:
            return await fetch()
        found: T = await eventually(check, f"{what} exists")
        return found

    async def gone(self, what: str, fetch: Callable[[], Awaitable[Any]]) -> None:
        """Wait until ``fetch`` returns ``None``."""
        async def check() -> bool:
            return await fetch() is None
        await eventually(check, f"{what} gone")

    # --- core objects -----------------------------------------------------------------

    async def node(self, name: str) -> Obj | None:
        """The Node as JSON, or ``None`` (read raw: the typed client insists
        on fields a test's Node may lack)."""
        resp = await self.core.read_node(name, _preload_content=False)
        try:
            body = await resp.read()
        finally:
            resp.release()
        if resp.status == 404:
            return None
        assert 200 <= resp.status < 300, (resp.status, body[:500])
        out: Obj = json.loads(body)
        return out

    async def events(self, name: str, namespace: str | None = None) -> list[Any]:
        """Events about objects named ``name`` in ``namespace`` (the test's)."""
        out = await self.core.list_namespaced_event(namespace or self.ns)
        return [e for e in out.items if e.involved_object.name == name]

    async def has_events(self, name: str, *reasons: str, type: str | None = None,
                         namespace: str | None = None) -> None:
        """Wait for events with every one of ``reasons`` about ``name`` (events
        are recorded after the status they describe)."""
        async def check() -> bool:
            seen = {e.reason for e in await self.events(name, namespace)
                    if type is None or e.type == type}
            return set(reasons) <= seen
        what = f"{type + ' ' if type else ''}events {reasons} about {name}"
        await eventually(check, what)

    async def has_event(self, name: str, reason: str, *, type: str | None = None,
                        namespace: str | None = None) -> None:
        await self.has_events(name, reason, type=type, namespace=namespace)
