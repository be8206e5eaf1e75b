"""The HTTP face of the API server (aiohttp).

Owns: routing (discovery, OpenAPI, health, the resource API), the
authentication middleware (bearer tokens from the token file; no token →
401; every authenticated user is also in ``system:authenticated``), the
authorization of every request by the RBAC authorizer (403 in
kube-apiserver's wording), the review APIs (``rbac.reviews``), the audit trail (writes and
refusals, :mod:`racksmith.apiserver.audit`), turning
:class:`ApiError` into ``Status`` responses, response
encoding (JSON, Table, PartialObjectMetadata) and warning headers. The verb
semantics live in :mod:`racksmith.apiserver.service`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import logging
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from racksmith.apiserver import discovery, errors, x509auth
from racksmith.apiserver import options as envelope
from racksmith.apiserver.audit import AuditLog, AuditRecord
from racksmith.apiserver.builtins import REVIEW_GROUPS
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.eviction import evict
from racksmith.apiserver.http.request import (
    OFF_LOOP_BYTES,
    AcceptInfo,
    Target,
    decode_body,
    media_type,
    parse_accept,
    parse_bool,
    parse_int,
    parse_resource_version,
    read_body,
    resolve,
)
from racksmith.apiserver.http.watch import RenderCache, WatchParams, is_websocket, serve_watch
from racksmith.apiserver.metrics import RequestMetrics
from racksmith.apiserver.objects import returns_deleted_object
from racksmith.apiserver.openapi import OpenAPICache
from racksmith.apiserver.pki import User
from racksmith.apiserver.rbac.authorizer import AUTHENTICATED, Authorizer, Subject
from racksmith.apiserver.rbac.hostrestriction import (
    HostRestriction,
    bound_token_check,
    no_relationship,
)
from racksmith.apiserver.rbac.requestinfo import request_attributes
from racksmith.apiserver.rbac.reviews import review
from racksmith.apiserver.rbac.rules import Attributes, describe
from racksmith.apiserver.registry import Registry, ResourceInfo
from racksmith.apiserver.satokens import API_AUDIENCE, BOUND_KINDS, BoundRef, TokenIssuer
from racksmith.apiserver.service import (
    PATCH_APPLY,
    ListOptions,
    ResourceService,
    WriteOptions,
    WriteResult,
)
from racksmith.apiserver.store.base import StoreUnavailableError, TooLargeError
from racksmith.apiserver.tables import partial_metadata, to_table
from racksmith.apiserver.tokenauth import ServiceAccountAuthenticator

Obj = dict[str, Any]
log = logging.getLogger("racksmith.apiserver")

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
USER_KEY = web.RequestKey("user", User)
CREATED_KEY = web.RequestKey("created", str)
"""The name of the object a create made (for its audit line)."""
ATTRS_KEY = web.RequestKey("attrs", Attributes)
"""The request's RBAC attributes, once the authorization made them."""
WATCHES_KEY: web.AppKey[Watches] = web.AppKey("watches")


@dataclass
class HttpConfig:
    tokens: dict[str, User]
    token_source: Callable[[], dict[str, User]] | None = None
    """The current tokens, asked on every request (the server's TokenFile,
    re-read when the file changes); None: ``tokens``, fixed."""
    anonymous: bool = False
    """Accept requests without a token (only with --insecure-http, for tests)."""
    server_address: str = "127.0.0.1:6443"
    ready: Callable[[], bool] = lambda: True
    metrics: Callable[[], bytes] | None = None
    extra_routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] \
        = field(default_factory=list)
    public: Callable[[str], bool] = lambda _path: False
    """Extra paths served without a token (the console's static assets)."""
    max_watches: int = 4096
    """Concurrent watches at most (one more: 429 TooManyRequests)."""
    authorizer: Authorizer | None = None
    """RBAC; None: every authenticated request is allowed (unit tests of the
    HTTP layer only)."""
    audit: AuditLog | None = None
    """Where writes and refusals are recorded (None: nowhere)."""
    request_metrics: RequestMetrics | None = None
    """Counts every request for ``/metrics`` (None: not counted)."""
    sa_tokens: TokenIssuer | None = None
    """Signs and verifies ServiceAccount tokens (None: no TokenRequest API)."""
    sa_auth: ServiceAccountAuthenticator | None = None
    """Who a ServiceAccount token is (None: such tokens are not accepted)."""
    host_restriction: HostRestriction | None = None
    """Narrows host agents to their own machine's objects (None: RBAC alone)."""


WS_BEARER_PREFIX = "base64url.bearer.authorization.k8s.io."


def _peercert(request: web.Request) -> Any:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    return ssl_object.getpeercert() if ssl_object is not None else None


def _websocket_bearer(request: web.Request) -> str:
    """A bearer token offered as a WebSocket subprotocol (browsers cannot set
    headers on a WebSocket; kube-apiserver's convention), as a header value."""
    if not is_websocket(request):
        return ""
    for proto in request.headers.get("Sec-WebSocket-Protocol", "").split(","):
        proto = proto.strip()
        if proto.startswith(WS_BEARER_PREFIX):
            raw = proto[len(WS_BEARER_PREFIX):]
            try:
                token = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
            except (ValueError, UnicodeDecodeError):
                return "Bearer "
            return f"Bearer {token}"
    return ""


def _json(data: Any, status: int = 200, *, content_type: str = "application/json",
          warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(body=orjson.dumps(data), status=status, content_type=None)
    resp.headers["Content-Type"] = content_type
    for w in warnings or []:
        escaped = w.replace("\\", "\\\\").replace('"', '\\"')
        resp.headers.add("Warning", f'299 - "{escaped}"')
    return resp


def _printable(text: str, limit: int = 200) -> str:
    """A request path as it may appear in a log line: bounded, escaped."""
    clipped = text if len(text) <= limit else text[:limit] + "..."
    return clipped.encode("unicode_escape").decode("ascii")


def _origin(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame (no values)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name}"


def _status_response(err: errors.ApiError) -> web.Response:
    resp = _json(err.to_status(), err.code)
    if err.retry_after > 0:
        resp.headers["Retry-After"] = str(err.retry_after)
    return resp


def subject_of(user: User) -> Subject:
    """The authorizer's view of an authenticated user."""
    return Subject(user.name, user.groups, user.host)


def forbidden(attrs: Attributes, user: User, reason: str = "") -> errors.ApiError:
    """kube-apiserver's 403 for a request RBAC (or the host restriction) denied."""
    why = describe(attrs, user.name) + (f": {reason}" if reason else "")
    if not attrs.resource_request:
        return errors.forbidden(f"forbidden: {why}")
    gr = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    head = f'{gr} "{attrs.name}"' if attrs.name else gr
    return errors.forbidden(f"{head} is forbidden: {why}", kind=attrs.resource,
                            name=attrs.name, group=attrs.api_group)


def _authenticated(user: User) -> User:
    if AUTHENTICATED in user.groups:
        return user
    return dataclasses.replace(user, groups=(*user.groups, AUTHENTICATED))


def build_app(registry: Registry, service: ResourceService, config: HttpConfig) -> web.Application:
    openapi = OpenAPICache(registry)
    authorizer = config.authorizer
    known: list[tuple[dict[str, User], dict[str, User]]] = [({}, {})]

    def lookup(token: str) -> User | None:
        raw = config.token_source() if config.token_source is not None else config.tokens
        if raw is not known[0][0]:
            known[0] = (raw, {t: _authenticated(u) for t, u in raw.items()})
        return known[0][1].get(token)
    watches = Watches(config.max_watches)
    watches.renders = RenderCache()

    @web.middleware
    async def audit_middleware(request: web.Request,
                               handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                               ) -> web.StreamResponse:
        audit, counted = config.audit, config.request_metrics
        if audit is None and counted is None:
            return await handler(request)
        received = dt.datetime.now(dt.UTC)
        code = 500
        try:
            resp = await handler(request)
            code = resp.status
            return resp
        except web.HTTPException as exc:
            code = exc.status
            raise
        except asyncio.CancelledError:
            code = 499  # the client went away before the answer (nginx's code)
            raise
        finally:
            attrs = request.get(ATTRS_KEY) or \
                request_attributes(request.method, request.path, request.query)
            if counted is not None:
                counted.observe(attrs, code)
            # Only writes and refusals are recorded: an allowed read costs nothing here.
            if audit is not None and (request.method not in ("GET", "HEAD")
                                      or code in (401, 403)):
                record(audit, request, code, received, attrs)

    def record(audit: AuditLog, request: web.Request, code: int,
               received: dt.datetime, attrs: Attributes) -> None:
        created = request.get(CREATED_KEY)
        if created and not attrs.name:
            attrs = dataclasses.replace(attrs, name=created)
        if audit.wanted(attrs, code):
            user = request.get(USER_KEY)
            peer = request.transport.get_extra_info("peername") if request.transport \
                else None
            audit.write(AuditRecord(
                attrs=attrs, code=code, received=received,
                user=user.name if user is not None else "",
                uid=user.uid if user is not None else "",
                groups=user.groups if user is not None else (),
                extra=user.host.extra() if user is not None and user.host else None,
                source_ip=str(peer[0]) if isinstance(peer, tuple) and peer else "",
                user_agent=request.headers.get("User-Agent", ""),
                query_keys=tuple(dict.fromkeys(request.query.keys()))))

    @web.middleware
    async def error_middleware(request: web.Request,
                               handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                               ) -> web.StreamResponse:
        try:
            return await handler(request)
        except errors.ApiError as err:
            return _status_response(err)
        except web.HTTPException:
            raise
        except TooLargeError as exc:
            return _status_response(errors.too_large(str(exc)))
        except StoreUnavailableError as exc:
            # The store's own words (its endpoints and gRPC code), never the request's.
            log.warning("store unavailable serving %s %s: %s", request.method,
                        _printable(request.path), exc)
            return _status_response(errors.unavailable(f"storage unavailable: {exc}"))
        except Exception as exc:
            # One line, no traceback locals, no request data beyond the verb
            # and the path: the id ties the client's Status to this line.
            request_id = uuid.uuid4().hex[:16]
            log.error("internal error serving %s %s (request id %s): %s at %s",
                      request.method, _printable(request.path), request_id,
                      type(exc).__name__, _origin(exc))
            log.debug("traceback of request %s", request_id, exc_info=True)
            resp = _status_response(errors.internal(
                f"an internal error occurred (request id {request_id}); see the server log"))
            resp.headers["Audit-Id"] = request_id
            return resp

    @web.middleware
    async def auth_middleware(request: web.Request,
                              handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                              ) -> web.StreamResponse:
        public = request.path in PUBLIC_PATHS or config.public(request.path)
        header = request.headers.get("Authorization", "") or _websocket_bearer(request)
        user: User | None = None
        scheme, _, offered = header.strip().partition(" ")
        token = offered.strip()
        if scheme.lower() == "bearer" and token:
            # An invalid credential is a 401 on every path, public ones too
            # (kube-apiserver): only a request with none is anonymous.
            user = lookup(token)
            if user is None and config.sa_auth is not None and \
                    TokenIssuer.looks_like_jwt(token):
                user = await config.sa_auth.user(token)
            if user is None:
                raise errors.unauthorized()
        else:
            # A client certificate the TLS layer verified against the
            # client CA (x509auth): CN the user, O its groups.
            user = x509auth.user_of(_peercert(request))
            if user is None and not public and not config.anonymous:
                raise errors.unauthorized()
        if user is not None:
            request[USER_KEY] = user
            if authorizer is not None and not public:
                subject = subject_of(user)
                if not subject.privileged:
                    attrs = request_attributes(request.method, request.path, request.query)
                    request[ATTRS_KEY] = attrs
                    restriction = config.host_restriction
                    if user.host is not None and restriction is not None and \
                            not await restriction.allows(user.host, attrs,
                                                         request.query.get("fieldSelector", "")):
                        raise forbidden(attrs, user, no_relationship(user.host))
                    if not authorizer.authorize(subject, attrs):
                        raise forbidden(attrs, user)
        return await handler(request)

    app = web.Application(middlewares=[audit_middleware, error_middleware, auth_middleware],
                          client_max_size=4 * 1024 * 1024)
    app[WATCHES_KEY] = watches

    async def health(request: web.Request) -> web.Response:
        if request.path == "/readyz" and not config.ready():
            return web.Response(status=500, text="[-]racksmith not ready\nreadyz check failed")
        return web.Response(text="ok")

    async def version(_request: web.Request) -> web.Response:
        return _json(discovery.version_info())

    async def api_root(request: web.Request) -> web.Response:
        accept = parse_accept(request.headers.get("Accept"))
        if accept.discovery:
            return _json(discovery.aggregated(registry, core=True, version=accept.discovery),
                         content_type=accept.discovery_media)
        return _json(discovery.core_versions(config.server_address))

    async def apis_root(request: web.Request) -> web.Response:
        accept = parse_accept(request.headers.get("Accept"))
        if accept.discovery:
            return _json(discovery.aggregated(registry, core=False, version=accept.discovery),
                         content_type=accept.discovery_media)
        return _json(discovery.group_list(registry))

    async def openapi_v2(_request: web.Request) -> web.Response:
        return web.Response(body=b"", content_type="application/octet-stream")

    async def openapi_v3_index(_request: web.Request) -> web.Response:
        return web.Response(body=openapi.index(), content_type="application/json")

    async def openapi_v3_doc(request: web.Request) -> web.Response:
        doc = openapi.document(request.match_info["path"])
        if doc is None:
            raise errors.no_such_path()
        return web.Response(body=doc, content_type="application/json")

    async def metrics(_request: web.Request) -> web.Response:
        body = config.request_metrics.exposition() if config.request_metrics else b""
        if config.metrics:
            body += config.metrics()
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def resource_api(request: web.Request) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        # discovery documents under /api and /apis
        if segments[0] == "api" and len(segments) == 2:
            doc = discovery.resource_list(registry, "", segments[1])
            if doc is None:
                raise errors.no_such_path()
            return _json(doc)
        if segments[0] == "apis" and len(segments) == 2:
            doc = discovery.group(registry, segments[1])
            if doc is None:
                raise errors.no_such_path()
            return _json(doc)
        if segments[0] == "apis" and len(segments) == 3:
            doc = discovery.resource_list(registry, segments[1], segments[2])
            if doc is None:
                raise errors.no_such_path()
            return _json(doc)
        target = resolve(registry, segments)
        if target.info.group in REVIEW_GROUPS:
            return await _serve_review(request, target, service, authorizer)
        return await _serve_resource(request, target, service, watches, config.sa_tokens,
                                     registry)

    app.router.add_get("/healthz", health)
    app.router.add_get("/livez", health)
    app.router.add_get("/readyz", health)
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)
    app.router.add_get("/api", api_root)
    app.router.add_get("/apis", apis_root)
    app.router.add_get("/openapi/v2", openapi_v2)
    app.router.add_get("/openapi/v3", openapi_v3_index)
    app.router.add_get("/openapi/v3/{path:.+}", openapi_v3_doc)
    app.router.add_get("/metrics", metrics)
    for method, path, handler in config.extra_routes:
        app.router.add_route(method, path, handler)
    app.router.add_route("*", "/api/{tail:.+}", resource_api)
    app.router.add_route("*", "/apis/{tail:.+}", resource_api)
    return app


async def _serve_review(request: web.Request, target: Target, service: ResourceService,
                        authorizer: Authorizer | None) -> web.Response:
    """POST of a review: answered from the authorizer, never stored."""
    info = target.info
    if request.method != "POST" or target.name is not None:
        raise errors.method_not_allowed(f"{info.plural} only supports create (POST)")
    if info.namespaced and target.namespace is None:
        raise errors.method_not_allowed(f"POST is not supported on {info.plural} across all "
                                        f"namespaces; use /namespaces/<namespace>/{info.plural}")
    body = service.check_identity(info, await decode_body(await read_body(request),
                                                          media_type(request)),
                                  target.namespace or "", None)
    user = request.get(USER_KEY)
    subject = subject_of(user) if user is not None else Subject("system:anonymous",
                                                                ("system:unauthenticated",))
    reply = review(authorizer if authorizer is not None else Authorizer(), info.group,
                   info.version, info.kind, target.namespace or "", body, subject,
                   uid=user.uid if user is not None else "")
    return _json(reply, 201)


def _write_opts(request: web.Request) -> WriteOptions:
    q = request.query
    dry = q.getall("dryRun", [])
    for d in dry:
        if d != "All":
            raise errors.bad_request(f'Unsupported value: "{d}": supported values: "All"')
    validation = q.get("fieldValidation", "Warn") or "Warn"
    if validation not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f'Unsupported value: "{validation}": supported values: '
                                 '"Ignore", "Strict", "Warn"')
    manager = q.get("fieldManager", "")
    if len(manager) > 128:
        raise errors.bad_request("fieldManager: Too long: may not be longer than 128")
    if not manager and media_type(request) != PATCH_APPLY:
        # kube derives the manager of a non-apply write from the user agent;
        # apply requests must name theirs.
        agent = request.headers.get("User-Agent", "")
        manager = agent.split("/")[0][:128] if agent else ""
    large = (request.content_length or 0) > OFF_LOOP_BYTES or \
        request.headers.get("Transfer-Encoding", "").lower() == "chunked"
    user = request.get(USER_KEY)
    return WriteOptions(dry_run=bool(dry), field_validation=validation,
                        field_manager=manager, force=parse_bool(q.get("force"), "force"),
                        large=large, user=subject_of(user) if user is not None else None)


def _list_opts(request: web.Request) -> ListOptions:
    q = request.query
    parse_resource_version(q.get("resourceVersion"))
    return ListOptions(label_selector=q.get("labelSelector", ""),
                       field_selector=q.get("fieldSelector", ""),
                       limit=max(0, parse_int(q.get("limit"), "limit")),
                       continue_token=q.get("continue", ""))


def _render(info: ResourceInfo, obj: Obj, accept: AcceptInfo, request: web.Request) -> Obj:
    if accept.table:
        return to_table(info, [obj], rv=obj.get("metadata", {}).get("resourceVersion", ""),
                        include_object=request.query.get("includeObject", "Metadata"))
    if accept.partial:
        return partial_metadata(obj)
    return obj


def _result(info: ResourceInfo, res: WriteResult, accept: AcceptInfo, request: web.Request,
            status: int = 200) -> web.Response:
    return _json(_render(info, res.obj, accept, request), status, warnings=res.warnings)


@dataclass
class Watches:
    """The server's watches: how many streams are open (against the limit) and
    the lines rendered once for all of them."""

    limit: int
    open: int = 0
    renders: RenderCache | None = None
    """Watch lines rendered once for every watcher (see RenderCache)."""

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        if self.open >= self.limit:
            # An overload answer, as kube's max-in-flight and APF filters
            # give: 429 with Retry-After 1, which client-go retries itself.
            raise errors.too_many_requests(
                f"too many watches: this server serves at most {self.limit} at once", 1)
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1


async def _bound_object(service: ResourceService, registry: Registry | None, namespace: str,
                        ref: Any) -> BoundRef | None:
    """The object ``spec.boundObjectRef`` names (in the ServiceAccount's
    namespace), checked as kube-apiserver checks it; None when none is named."""
    if ref is None:
        return None
    if not isinstance(ref, dict):
        raise errors.invalid("TokenRequest", "", [Cause("spec.boundObjectRef",
                                                        "Invalid value: must be an object")],
                             group="authentication.k8s.io")
    kind = BOUND_KINDS.get(str(ref.get("kind") or ""))
    if kind is None:
        raise errors.invalid("TokenRequest", "", [Cause(
            "spec.boundObjectRef.kind", f"Unsupported value: {ref.get('kind')!r}: supported "
            f"values: {', '.join(repr(k) for k in BOUND_KINDS)}")],
            group="authentication.k8s.io")
    if ref.get("apiVersion") not in (None, "", kind.api_version):
        raise errors.invalid("TokenRequest", "", [Cause(
            "spec.boundObjectRef.apiVersion", f"Unsupported value: {ref.get('apiVersion')!r}: "
            f"supported values: {kind.api_version!r}")], group="authentication.k8s.io")
    name = str(ref.get("name") or "")
    info = registry.get(kind.group, kind.version, kind.plural) if registry is not None else None
    if not name or info is None:
        raise errors.invalid("TokenRequest", "", [Cause("spec.boundObjectRef.name",
                                                        "Required value")],
                             group="authentication.k8s.io")
    # 404 when it does not exist
    obj = await service.get(info, namespace if kind.namespaced else "", name)
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    wanted = ref.get("uid")
    if wanted and wanted != uid:
        raise errors.conflict(kind.plural, name, f"the UID in the bound object reference "
                              f"({wanted}) does not match the UID in record ({uid}). The "
                              "object might have been deleted and then recreated",
                              group=kind.group)
    return BoundRef(kind, name, uid)


async def _token_request(request: web.Request, service: ResourceService,
                         registry: Registry | None, info: ResourceInfo,
                         namespace: str, name: str, issuer: TokenIssuer | None
                         ) -> web.Response:
    """``POST .../serviceaccounts/NAME/token``: a signed token for that ServiceAccount."""
    if request.method != "POST":
        raise errors.method_not_allowed("token only supports POST")
    if issuer is None:
        raise errors.no_such_path()
    body = await decode_body(await read_body(request), media_type(request))
    if not isinstance(body, dict):
        raise errors.bad_request("the body of a TokenRequest must be an object")
    if body.get("kind") not in (None, "", "TokenRequest"):
        raise errors.bad_request(f"the kind in the data ({body.get('kind')}) does not match "
                                 "the expected kind (TokenRequest)")
    user = request.get(USER_KEY)
    if user is not None and user.host is not None:
        refused = bound_token_check(user.host, body)
        if refused is not None:
            raise errors.forbidden(f'serviceaccounts "{name}" is forbidden: User '
                                   f'"{user.name}" cannot create resource '
                                   f'"serviceaccounts/token": {refused}',
                                   kind="serviceaccounts", name=name)
    sa = await service.get(info, namespace, name)  # 404 for a missing ServiceAccount
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    uid = str((sa.get("metadata") or {}).get("uid") or "")
    bound = await _bound_object(service, registry, namespace, spec.get("boundObjectRef"))
    token, expiry, seconds = issuer.issue(namespace, name, uid, spec, bound=bound)
    stamp = dt.datetime.fromtimestamp(expiry, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _json({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "metadata": {"name": name, "namespace": namespace,
                               "creationTimestamp": None},
                  "spec": {"audiences": spec.get("audiences") or [API_AUDIENCE],
                           "expirationSeconds": seconds,
                           "boundObjectRef": None if bound is None else {
                               "kind": bound.kind.kind, "apiVersion": bound.kind.api_version,
                               "name": bound.name, "uid": bound.uid}},
                  "status": {"token": token, "expirationTimestamp": stamp}}, 201)


async def _serve_resource(request: web.Request, target: Target, service: ResourceService,
                          watches: Watches, sa_tokens: TokenIssuer | None = None,
                          registry: Registry | None = None) -> web.StreamResponse:
    info = target.info
    method = request.method
    accept = parse_accept(request.headers.get("Accept"))
    ns = target.namespace or ""
    if target.name is None:
        if method == "GET":
            if parse_bool(request.query.get("watch"), "watch"):
                params = WatchParams(
                    resource_version=parse_resource_version(
                        request.query.get("resourceVersion")),
                    timeout_seconds=max(0, parse_int(request.query.get("timeoutSeconds"),
                                                     "timeoutSeconds")),
                    bookmarks=parse_bool(request.query.get("allowWatchBookmarks"),
                                         "allowWatchBookmarks"),
                    send_initial_events=parse_bool(request.query.get("sendInitialEvents"),
                                                   "sendInitialEvents"),
                    list_opts=_list_opts(request), table=accept.table, partial=accept.partial)
                with watches.slot():
                    return await serve_watch(request, service, info, target.namespace,
                                             params, watches.renders)
            page = await service.list(info, target.namespace, _list_opts(request))
            if accept.table:
                return _json(to_table(info, page.items, rv=str(page.rv),
                                      continue_token=page.continue_token,
                                      include_object=request.query.get("includeObject",
                                                                       "Metadata")))
            meta: Obj = {"resourceVersion": str(page.rv)}
            if page.continue_token:
                meta["continue"] = page.continue_token
                if page.remaining is not None:
                    meta["remainingItemCount"] = page.remaining
            items = [partial_metadata(o) for o in page.items] if accept.partial else page.items
            kind = "PartialObjectMetadataList" if accept.partial else info.list_kind_name
            api_version = "meta.k8s.io/v1" if accept.partial else info.api_version
            return _json({"kind": kind, "apiVersion": api_version, "metadata": meta,
                          "items": items})
        if method == "POST":
            if info.namespaced and target.namespace is None:
                raise errors.method_not_allowed(
                    f"POST is not supported on {info.plural} across all namespaces; use "
                    f"/namespaces/<namespace>/{info.plural}")
            body = await decode_body(await read_body(request), media_type(request))
            res = await service.create(info, ns, body, _write_opts(request))
            request[CREATED_KEY] = str(res.obj.get("metadata", {}).get("name") or "")
            return _result(info, res, accept, request, 201)
        if method == "DELETE":
            options = await _delete_options(request)
            deleted = await service.delete_collection(
                info, target.namespace, _list_opts(request), options,
                dry_run=bool(request.query.getall("dryRun", [])))
            return _json({"kind": info.list_kind_name, "apiVersion": info.api_version,
                          "metadata": {"resourceVersion": str(service.store.current_rv())},
                          "items": deleted})
        raise errors.method_not_allowed(f"{method} is not supported on a collection")

    name = target.name
    sub = target.subresource
    if sub == "token" and info.group == "" and info.plural == "serviceaccounts":
        return await _token_request(request, service, registry, info, ns, name, sa_tokens)
    if sub == "eviction":
        if method != "POST":
            raise errors.method_not_allowed("eviction only supports POST")
        body = await decode_body(await read_body(request), media_type(request))
        status = await evict(service, ns, name, body,
                             dry_run=bool(request.query.getall("dryRun", [])))
        return _json(status, 201)
    if sub == "finalize":
        if method != "PUT":
            raise errors.method_not_allowed("finalize only supports PUT")
        body = await decode_body(await read_body(request), media_type(request))
        fins = envelope.finalize_finalizers(body)
        current = await service.get(info, ns, name)
        if not isinstance(current.get("spec"), dict):
            current["spec"] = {}
        current["spec"]["finalizers"] = fins
        if not fins:
            current["spec"].pop("finalizers")
        res = await service.update(info, ns, name, current, _write_opts(request))
        return _result(info, res, accept, request)
    if method == "GET":
        parse_resource_version(request.query.get("resourceVersion"))
        obj = await service.get(info, ns, name)
        return _json(_render(info, obj, accept, request))
    if method == "PUT":
        body = await decode_body(await read_body(request), media_type(request))
        res = await service.update(info, ns, name, body, _write_opts(request), subresource=sub)
        return _result(info, res, accept, request)
    if method == "PATCH":
        ctype = media_type(request)
        raw = await read_body(request)
        if ctype == PATCH_APPLY or ctype.startswith("application/apply-patch"):
            if ctype != PATCH_APPLY:
                raise errors.unsupported_media_type(ctype)
        elif ctype not in ("application/merge-patch+json", "application/json-patch+json",
                           "application/strategic-merge-patch+json"):
            raise errors.unsupported_media_type(ctype)
        if ctype == "application/strategic-merge-patch+json" and not info.builtin:
            raise errors.unsupported_media_type(ctype)
        body = await decode_body(raw, ctype)
        res = await service.patch(info, ns, name, ctype, body, _write_opts(request),
                                  subresource=sub)
        return _result(info, res, accept, request, 201 if res.created else 200)
    if method == "DELETE":
        if sub:
            raise errors.method_not_allowed("DELETE is not supported on a subresource")
        options = await _delete_options(request)
        res = await service.delete(info, ns, name, options,
                                   dry_run=bool(request.query.getall("dryRun", [])))
        if res.deleted and not returns_deleted_object(info):
            meta = res.obj.get("metadata", {})
            details: Obj = {"name": name, "kind": info.plural, "uid": meta.get("uid", "")}
            if info.group:
                details["group"] = info.group
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "details": details})
        return _result(info, res, accept, request)
    raise errors.method_not_allowed(f"{method} is not supported")


async def _delete_options(request: web.Request) -> Obj:
    raw = await read_body(request)
    parsed: Obj = {}
    if raw.strip():
        parsed = envelope.delete_options(await decode_body(raw, media_type(request)))
    q = request.query
    if q.get("propagationPolicy"):
        parsed["propagationPolicy"] = q["propagationPolicy"]
    if q.get("orphanDependents"):
        parsed["orphanDependents"] = parse_bool(q["orphanDependents"], "orphanDependents")
    if q.get("gracePeriodSeconds"):
        parsed["gracePeriodSeconds"] = parse_int(q["gracePeriodSeconds"], "gracePeriodSeconds")
    return parsed
