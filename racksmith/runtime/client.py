"""The Client every controller talks to the API through (controller-runtime's
``client.Client`` over its cache).

Owns the process's shared informers (one per resource and namespace scope,
created on first use and running while a source of a controller uses
them), reads from them, and writes to the API with one error model
(:mod:`racksmith.runtime.errors`). Objects travel as plain dicts, exactly
as the server sent them.

Reads
    ``get`` and ``list`` answer from the shared informer of the resource
    when one is running and synced (a copy: callers may modify it; with
    ``copy=False`` the cached objects themselves, for a caller that only
    reads them — controller-runtime's ``UnsafeDisableDeepCopy``, worth it on
    a reconcile that parses a thousand objects); otherwise, and with
    ``live=True``, from the API. Use ``live=True`` where
    a race matters (a host claim, an IPAM claim): the cache may be a moment
    behind. ``list`` takes equality label selectors (a dict or
    ``a=b,c!=d,e``) and field selectors; a field selector is answered from
    the cache only when the informer has the matching ``field_index``.
    ``get`` answers None for an object that does not exist. ``by_index``
    answers from an index added with ``add_index`` (a live list filtered by
    the same function when no cache serves); ``indexed`` is its synchronous,
    cache-only form for mappers.

Writes
    ``create``, ``update`` (PUT with the resourceVersion read: optimistic),
    ``update_status``, ``patch`` (merge, JSON or strategic), ``delete``
    (with optional uid/resourceVersion preconditions) and ``evict``. A
    failed write raises ``NotFound``, ``AlreadyExists``, ``Conflict``,
    ``Invalid`` (with causes), ``Forbidden``, ``TooManyRequests`` or
    ``ServerError``; ``Conflict`` is a temporary error the runtime requeues,
    so reconcilers let it escape. ``delete`` of an absent object answers
    False. Each write's answer is offered to the informer, so the next read
    sees the write even before its watch event arrives.

``as_client`` gives the one Client of an ``ApiClient`` (controllers built on
the same ApiClient share informers); ``with_field_manager`` a view that
writes under another field manager, over the same informers.

Identities
    A Client may read from informers that list and watch under another
    identity than its own (``informers`` of another ApiClient: the process's
    shared informers, as kube-controller-manager's run under its own
    identity while each controller writes with its ServiceAccount's). With
    ``verify_cached_reads`` the Client then answers a read from them only
    if its own identity may list and watch that resource there, asked with
    SelfSubjectAccessReviews (:class:`CacheAccess`: across namespaces first,
    which answers for every namespace, then the one namespace; once per
    question, however many reads wait for the answer); otherwise the read
    raises ``Forbidden``, as a
    read of its own would. A source's check runs when the source starts
    (with those of every resource indexed through the Client so far), so a
    controller whose ClusterRole lacks a rule never becomes ready.

The only other module of the runtime that speaks HTTP is the informer; no
module outside ``racksmith.runtime`` handles ``ApiException``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlencode

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

from racksmith.clock import Clock
from racksmith.jsoncopy import json_copy
from racksmith.redact import register_secret
from racksmith.runtime.errors import ApiError, Forbidden, NotFound, TooManyRequests, error_from
from racksmith.runtime.informer import (
    IndexFunc,
    InformerSource,
    SharedInformer,
    field_index_name,
    newer,
)
from racksmith.runtime.keys import Mapper, ObjectKey, self_keys
from racksmith.runtime.resource import Resource
from racksmith.runtime.resources import PODS, SERVICE_ACCOUNTS

Obj = dict[str, Any]
Objs = list[Obj]
Query = list[tuple[str, str]]
PatchType = Literal["merge", "json", "strategic"]
_PATCH_CONTENT: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10.0, sock_connect=10.0, sock_read=60.0)


class Informers:
    """The shared informers of one ApiClient, by (resource, namespace scope)."""

    def __init__(self, api_client: ApiClient, clock: Clock | None = None) -> None:
        self.api_client = api_client
        self.clock = clock
        self._informers: dict[tuple[Resource, str | None], SharedInformer] = {}

    def get(self, resource: Resource, namespace: str | None = None) -> SharedInformer:
        key = (resource, namespace or None)
        informer = self._informers.get(key)
        if informer is None:
            informer = SharedInformer(self.api_client, resource, namespace=namespace or None,
                                      clock=self.clock)
            self._informers[key] = informer
        return informer

    def serving(self, resource: Resource, namespace: str | None,
                index: str | None = None) -> SharedInformer | None:
        """A running, synced informer whose store covers ``namespace`` (None:
        all); with ``index``, one that has that index is preferred."""
        found: SharedInformer | None = None
        for scope in (None, namespace or None):
            informer = self._informers.get((resource, scope))
            if informer is not None and informer.has_synced and informer.plain:
                if scope is None or namespace:
                    if index is None or informer.has_index(index):
                        return informer
                    found = found or informer
        return found

    def all(self) -> list[SharedInformer]:
        return list(self._informers.values())


class CacheAccess:
    """May a Client's identity list and watch what it reads from informers
    that run under another identity? Asked with SelfSubjectAccessReviews,
    once per (resource, namespace); see the module doc."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._allowed: dict[tuple[Resource, str], bool] = {}
        """Answers that allowed (a refusal is not remembered)."""
        self._asking: dict[tuple[Resource, str], asyncio.Future[bool]] = {}
        """Questions on their way: a read that needs one waits for its answer
        (at a controller's start every worker reads at once)."""
        self._noted: dict[tuple[Resource, str], None] = {}

    def note(self, resource: Resource, namespace: str | None) -> None:
        """Check ``resource`` at the next :meth:`require_noted`."""
        self._noted.setdefault((resource, namespace or ""))

    def known_allowed(self, resource: Resource, namespace: str | None) -> bool:
        return self._allowed.get((resource, ""), False) or \
            self._allowed.get((resource, namespace or ""), False)

    async def require_noted(self) -> None:
        for resource, namespace in list(self._noted):
            await self.require(resource, namespace)

    async def require(self, resource: Resource, namespace: str | None) -> None:
        """Raise ``Forbidden`` unless the identity may list and watch ``resource``
        in ``namespace`` (None: across namespaces)."""
        if self.known_allowed(resource, namespace):
            return
        # Across namespaces first: a ClusterRole's answer covers every namespace.
        allowed = await self._allows(resource, "")
        if not allowed and namespace:
            allowed = await self._allows(resource, namespace)
        if not allowed:
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise Forbidden(403, "Forbidden", f"{resource} is forbidden: this identity cannot "
                            f'list and watch resource "{resource.plural}" in API group '
                            f'"{resource.group}" {where} (a read from the shared cache; '
                            "its ClusterRole needs the rule)")

    async def _allows(self, resource: Resource, namespace: str) -> bool:
        """May the identity list and watch ``resource`` in ``namespace`` ("":
        across namespaces)? One question at a time per key, asked by a task of
        its own that every read needing the answer waits for (a read that is
        cancelled leaves it to the others); an allowing answer is kept, a
        refusal asked again next time (a role may be fixed meanwhile)."""
        key = (resource, namespace)
        if self._allowed.get(key, False):
            return True
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.ensure_future(self._ask(key))
            self._asking[key] = asking
            asking.add_done_callback(lambda t: self._asked(key, t))
        return await asyncio.shield(asking)

    async def _ask(self, key: tuple[Resource, str]) -> bool:
        resource, namespace = key
        for verb in ("list", "watch"):
            if not await self._review(resource, namespace, verb):
                return False
        return True

    def _asked(self, key: tuple[Resource, str], task: asyncio.Future[bool]) -> None:
        self._asking.pop(key, None)
        if not task.cancelled() and task.exception() is None and task.result():
            self._allowed[key] = True

    async def _review(self, resource: Resource, namespace: str, verb: str) -> bool:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"group": resource.group,
                                                "resource": resource.plural,
                                                "verb": verb, "namespace": namespace}}}
        out = await self._client._call(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body)
        return bool((out.get("status") or {}).get("allowed"))


class Client:
    """Reads from the shared informers, writes to the API; see the module doc."""

    def __init__(self, api_client: ApiClient, *, field_manager: str = "racksmith",
                 informers: Informers | None = None, clock: Clock | None = None,
                 verify_cached_reads: bool = False, access: CacheAccess | None = None,
                 own_informers: tuple[frozenset[Resource], Informers] | None = None
                 ) -> None:
        self.api_client = api_client
        self.field_manager = field_manager
        self.informers = informers if informers is not None else Informers(api_client, clock)
        self.access = access if access is not None else (
            CacheAccess(self) if verify_cached_reads else None)
        self._own = own_informers

    def with_private(self, resources: frozenset[Resource]) -> Client:
        """This Client, with ``resources`` read through informers of its own
        (listing and watching under its own identity, never the shared ones):
        what the process's identity must not read, Secrets above all."""
        return Client(self.api_client, field_manager=self.field_manager,
                      informers=self.informers, access=self.access,
                      own_informers=(resources, Informers(self.api_client,
                                                          self.informers.clock)))

    def with_field_manager(self, field_manager: str) -> Client:
        """The same informers (and identity), writing as ``field_manager``."""
        return Client(self.api_client, field_manager=field_manager, informers=self.informers,
                      access=self.access, own_informers=self._own)

    def _inf(self, resource: Resource) -> Informers:
        """The informers that serve ``resource`` to this Client."""
        own = self._own
        return own[1] if own is not None and resource in own[0] else self.informers

    # --- informers and sources ---------------------------------------------------

    def informer(self, resource: Resource, namespace: str | None = None) -> SharedInformer:
        """The shared informer of ``resource`` in ``namespace`` (None: all); the
        caller reads it directly, so with ``verify_cached_reads`` the resource
        is checked with the Client's sources."""
        if self.access is not None:
            self.access.note(resource, namespace)
        return self._inf(resource).get(resource, namespace)

    def source(self, resource: Resource, *, namespace: str | None = None,
               mapper: Mapper = self_keys) -> InformerSource:
        """A controller source over the shared informer of ``resource``."""
        access = self.access
        if access is None:
            return InformerSource(self._inf(resource).get(resource, namespace), mapper)
        access.note(resource, namespace)
        return InformerSource(self._inf(resource).get(resource, namespace), mapper,
                              check=access.require_noted)

    def add_index(self, resource: Resource, name: str, func: IndexFunc,
                  namespace: str | None = None) -> None:
        """Index the shared informer of ``resource`` (idempotent per name)."""
        if self.access is not None:
            self.access.note(resource, namespace)
        self._inf(resource).get(resource, namespace).add_index(name, func)

    def cached(self, resource: Resource, namespace: str | None = None) -> bool:
        """Reads of ``resource`` in ``namespace`` are answered from a cache."""
        return self._inf(resource).serving(resource, namespace) is not None

    def in_cache(self, resource: Resource, namespace: str | None, name: str) -> bool | None:
        """Whether the shared cache holds the object now, without waiting or
        copying: a hint for a caller about to race for the name (an IPAM
        claim skips an address the cache shows taken). None when no synced
        cache serves it, or its read is not yet known to be allowed."""
        informer = self._inf(resource).serving(resource, namespace)
        if informer is None or (self.access is not None
                                and not self.access.known_allowed(resource, namespace)):
            return None
        return informer.get(ObjectKey(namespace or "", name)) is not None

    # --- reads -------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str | None, name: str, *,
                  live: bool = False) -> Obj | None:
        """The object, or None when it does not exist; see the module doc."""
        informer = None if live else self._inf(resource).serving(resource, namespace)
        if informer is not None:
            if self.access is not None:
                await self.access.require(resource, namespace)
            found = informer.get(ObjectKey(namespace or "", name))
            return json_copy(found) if found is not None else None
        try:
            return await self._call("GET", _object_path(resource, namespace, name))
        except NotFound:
            return None

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   labels: Mapping[str, str] | str | None = None,
                   fields: Mapping[str, str] | None = None,
                   live: bool = False, copy: bool = True) -> Objs:
        """Objects of ``namespace`` (None: all) matching the selectors
        (``copy=False``: the cached objects, not to be modified)."""
        selector = _parse_labels(labels)
        informer = None if live else self._inf(resource).serving(resource, namespace)
        if informer is not None and selector is not None and all(
                informer.has_index(field_index_name(f)) for f in fields or {}):
            if self.access is not None:
                await self.access.require(resource, namespace)
            if fields:
                (path, value), *rest = fields.items()
                found = informer.by_index(field_index_name(path), value, namespace)
                for path, value in rest:
                    found = [o for o in found if _field(o, path) == value]
            else:
                found = informer.list(namespace)
            return [json_copy(o) if copy else o for o in found if _labels_match(o, selector)]
        return await self._list_live(resource, namespace, labels, fields)

    async def by_index(self, resource: Resource, index: str, value: str,
                       namespace: str | None = None, *, live: bool = False) -> Objs:
        """Objects whose index ``index`` (added with ``add_index``) holds
        ``value``: from the cache when it serves, else a live list filtered
        by the same index function."""
        informer = None if live else self._inf(resource).serving(resource, namespace, index)
        if informer is not None and informer.has_index(index):
            if self.access is not None:
                await self.access.require(resource, namespace)
            return [json_copy(o) for o in informer.by_index(index, value, namespace)]
        func = self._index_func(resource, namespace, index)
        return [o for o in await self._list_live(resource, namespace, None, None)
                if value in _index_values(func, o)]

    def indexed(self, resource: Resource, index: str, value: str,
                namespace: str | None = None) -> Objs:
        """``by_index`` from the cache only, synchronously, for mappers: the
        stored objects themselves (do not modify them); [] when no cache serves."""
        informer = self._inf(resource).serving(resource, namespace, index)
        if informer is None or not informer.has_index(index):
            return []
        if self.access is not None and not self.access.known_allowed(resource, namespace):
            return []  # not (yet) known to be allowed: the source's check says why
        return informer.by_index(index, value, namespace)

    def _index_func(self, resource: Resource, namespace: str | None, index: str) -> IndexFunc:
        for scope in (namespace or None, None):
            informer = self._inf(resource).get(resource, scope)
            func = informer.index_func(index)
            if func is not None:
                return func
        raise KeyError(f"no index {index!r} on {resource}")

    async def _list_live(self, resource: Resource, namespace: str | None,
                         labels: Mapping[str, str] | str | None,
                         fields: Mapping[str, str] | None) -> Objs:
        query: Query = [("limit", "500")]
        if labels:
            query.append(("labelSelector", labels if isinstance(labels, str) else
                          ",".join(f"{k}={v}" for k, v in labels.items())))
        if fields:
            query.append(("fieldSelector", ",".join(f"{k}={v}" for k, v in fields.items())))
        items: Objs = []
        cont = ""
        while True:
            page = await self._call("GET", resource.path(namespace),
                                    query=[*query, *([("continue", cont)] if cont else [])])
            items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return items

    async def get_path(self, path: str) -> Obj:
        """A GET of any API path (discovery documents, a collection), decoded JSON."""
        return await self._call("GET", path)

    async def get_text(self, path: str) -> str:
        """A GET of a non-JSON path (``/metrics``), as text."""
        _, data = await self._exchange("GET", path, headers={"Accept": "text/plain"})
        return data.decode("utf-8", "replace")

    # --- writes ------------------------------------------------------------------

    async def create(self, resource: Resource, body: Mapping[str, Any], *,
                     namespace: str | None = None) -> Obj:
        """POST ``body``; raises ``AlreadyExists`` when the name is taken."""
        ns = namespace if namespace is not None else _meta(body).get("namespace")
        return await self._write("POST", resource.path(ns or None), body, resource)

    async def update(self, resource: Resource, obj: Mapping[str, Any]) -> Obj:
        """PUT ``obj`` (its resourceVersion makes it optimistic: ``Conflict``)."""
        return await self._write("PUT", _path_of(resource, obj), obj, resource)

    async def update_status(self, resource: Resource, obj: Mapping[str, Any]) -> Obj:
        """PUT ``obj`` to its status subresource (optimistic, as ``update``)."""
        return await self._write("PUT", _path_of(resource, obj) + "/status", obj, resource)

    async def patch(self, resource: Resource, namespace: str | None, name: str,
                    body: Any, *, patch_type: PatchType = "merge",
                    status: bool = False) -> Obj:
        """PATCH the object (``status``: its status subresource)."""
        path = _object_path(resource, namespace, name) + ("/status" if status else "")
        return await self._write("PATCH", path, body, resource,
                                 content_type=_PATCH_CONTENT[patch_type])

    async def delete(self, resource: Resource, namespace: str | None, name: str, *,
                     uid: str | None = None, resource_version: str | None = None,
                     propagation: str | None = None) -> bool:
        """DELETE the object; False when it was already gone. ``uid`` and
        ``resource_version`` are preconditions (``Conflict`` when they fail)."""
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        if preconditions:
            body["preconditions"] = preconditions
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            await self._call("DELETE", _object_path(resource, namespace, name), body=body)
        except NotFound:
            return False
        return True

    async def request_token(self, namespace: str, service_account: str, *,
                            seconds: int | None = None, audiences: Sequence[str] | None = None,
                            bound: Mapping[str, str] | None = None) -> str:
        """A token for ServiceAccount ``namespace/service_account`` from the
        TokenRequest API (``bound``: the ``boundObjectRef``); raises
        ``NotFound`` when the ServiceAccount (or the bound object) is missing.
        The token is registered with the log redaction before it is returned."""
        spec: Obj = {}
        if seconds is not None:
            spec["expirationSeconds"] = seconds
        if audiences:
            spec["audiences"] = list(audiences)
        if bound is not None:
            spec["boundObjectRef"] = dict(bound)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        out = await self._call("POST", _object_path(SERVICE_ACCOUNTS, namespace,
                                                    service_account) + "/token", body=body)
        token = str((out.get("status") or {}).get("token") or "")
        if not token:
            raise ApiError(200, "", "the TokenRequest answer holds no token")
        register_secret(token)
        return token

    async def evict(self, namespace: str, name: str) -> TooManyRequests | None:
        """Evict a pod: None when evicted (or already gone); the refusal (429,
        a disruption budget says no) otherwise."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        try:
            await self._call("POST", _object_path(PODS, namespace, name) + "/eviction",
                             body=body)
        except NotFound:
            return None
        except TooManyRequests as refused:
            return refused
        return None

    # --- HTTP --------------------------------------------------------------------

    async def _write(self, method: str, path: str, body: Any, resource: Resource, *,
                     content_type: str = "application/json") -> Obj:
        out = await self._call(method, path, body=body, content_type=content_type,
                               query=[("fieldManager", self.field_manager)])
        self._offer(resource, out)
        return out

    def _offer(self, resource: Resource, obj: Obj) -> None:
        if not isinstance(obj.get("metadata"), dict):
            return
        informers = self._inf(resource)
        for informer in {informers.serving(resource, _meta(obj).get("namespace") or None),
                         informers.serving(resource, None)}:
            if informer is not None and newer(obj, informer.get(_key(obj))):
                informer.offer(obj)

    async def _call(self, method: str, path: str, *, body: Any = None,
                    query: Query | None = None,
                    content_type: str = "application/json") -> Obj:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        status, data = await self._exchange(method, path, headers=headers, body=body,
                                            query=query)
        if not data:
            return {}
        try:
            out = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ApiError(status, "", "the API server answered with no JSON") from None
        return out if isinstance(out, dict) else {}

    async def _exchange(self, method: str, path: str, *, headers: dict[str, str],
                        body: Any = None, query: Query | None = None) -> tuple[int, bytes]:
        """One request: (status, body) of a 2xx answer; the error model otherwise.

        Straight onto the ApiClient's HTTP session, with what its ``call_api``
        would add (default headers, the bearer token — through the refresh
        hook, so a renewed token is used —, the proxy and TLS server name it
        was built with), without its per-request model serialisation: the
        body is JSON (orjson) as given. Client certificates live in the
        session's TLS context."""
        api = self.api_client
        if not isinstance(api, ApiClient):  # a test's stand-in: its own call_api
            return await self._exchange_via_call_api(method, path, headers=headers,
                                                     body=body, query=query)
        conf = api.configuration
        rest = api.rest_client
        all_headers = {**api.default_headers, **headers}
        for auth in (await conf.auth_settings()).values():
            if auth.get("in") == "header" and auth.get("value"):
                all_headers[auth["key"]] = auth["value"]
        url = str(conf.host) + path
        if query:
            url += "?" + urlencode(query)
        kwargs: dict[str, Any] = {"headers": all_headers, "timeout": _TIMEOUT}
        if body is not None:
            kwargs["data"] = orjson.dumps(body, default=api.sanitize_for_serialization)
        if rest.proxy:
            kwargs["proxy"] = rest.proxy
            if rest.proxy_headers:
                kwargs["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            kwargs["server_hostname"] = rest.server_hostname
        try:
            async with rest.pool_manager.request(method, url, **kwargs) as resp:
                data = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise error_from(0, f"no answer from the API server: {type(exc).__name__}") from None
        if not 200 <= status <= 299:
            raise error_from(status, data[:4000])
        return status, data

    async def _exchange_via_call_api(self, method: str, path: str, *,
                                     headers: dict[str, str], body: Any = None,
                                     query: Query | None = None) -> tuple[int, bytes]:
        try:
            resp: aiohttp.ClientResponse = await self.api_client.call_api(
                path, method, query_params=query or [], header_params=headers,
                body=body, auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=_TIMEOUT)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise error_from(0, f"no answer from the API server: {type(exc).__name__}") from None
        try:
            data = await resp.read()
        finally:
            resp.release()
        if not 200 <= resp.status <= 299:
            raise error_from(resp.status, data[:4000])
        return resp.status, data


_CLIENTS: weakref.WeakKeyDictionary[ApiClient, Client] = weakref.WeakKeyDictionary()


def as_client(api: ApiClient | Client) -> Client:
    """``api`` itself when it is a Client, else the one Client of that
    ApiClient (an object that cannot be weakly referenced, e.g. a test's
    stand-in, gets a Client of its own each time)."""
    if isinstance(api, Client):
        return api
    try:
        client = _CLIENTS.get(api)
    except TypeError:
        return Client(api)
    if client is None:
        client = Client(api)
        _CLIENTS[api] = client
    return client


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = _meta(obj)
    return ObjectKey(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _object_path(resource: Resource, namespace: str | None, name: str) -> str:
    if not name:
        raise ValueError("an object path needs a name")
    return f"{resource.path(namespace or None)}/{name}"


def _path_of(resource: Resource, obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return _object_path(resource, meta.get("namespace") or None, str(meta.get("name") or ""))


def _index_values(func: IndexFunc, obj: Mapping[str, Any]) -> list[str]:
    try:
        return list(func(obj))
    except Exception:  # an index function never breaks a read
        return []


def _field(obj: Mapping[str, Any], path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return None if cur is None else str(cur)


Selector = list[tuple[str, str, str | None]]  # (key, op, value): op "=", "!=", "exists"


def _parse_labels(labels: Mapping[str, str] | str | None) -> Selector | None:
    """An equality selector as (key, op, value) terms; None when the cache
    cannot answer it (set-based terms go to the API)."""
    if labels is None:
        return []
    if isinstance(labels, Mapping):
        return [(k, "=", str(v)) for k, v in labels.items()]
    terms: Selector = []
    for raw in labels.split(","):
        term = raw.strip()
        if not term:
            continue
        if " in " in term or " notin " in term or "(" in term:
            return None
        if "!=" in term:
            k, _, v = term.partition("!=")
            terms.append((k.strip(), "!=", v.strip()))
        elif "==" in term or "=" in term:
            k, _, v = term.replace("==", "=").partition("=")
            terms.append((k.strip(), "=", v.strip()))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "absent", None))
        else:
            terms.append((term, "exists", None))
    return terms


def _labels_match(obj: Mapping[str, Any], selector: Selector) -> bool:
    labels = _meta(obj).get("labels") or {}
    for key, op, value in selector:
        have = labels.get(key)
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "exists" and have is None:
            return False
        if op == "absent" and have is not None:
            return False
    return True


__all__ = ["PODS", "CacheAccess", "Client", "Informers", "PatchType", "as_client"]
