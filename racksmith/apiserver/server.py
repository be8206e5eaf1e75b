"""The embedded API server: store + registry + verbs + HTTP, started and stopped.

Owns: wiring the API server's parts for one data directory: the SQLite
store (``DIR/store.db``), the built-in resources, the lifecycles (GC,
namespaces, CRDs), TLS (a CA made on first start, ``DIR/pki``), the token
file (``DIR/tokens.csv``, re-read when it changes), RBAC (the authorizer,
its admission check and the built-in roles), the audit trail
(``DIR/audit/``) and the kubeconfig (``DIR/kubeconfig``); default
namespaces; bootstrap objects (Racksmith's CRDs, passed in by the
composition root) applied idempotently at start. Callers: ``racksmith.app``
and tests.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from racksmith import filemodes
from racksmith.apiserver import pki
from racksmith.apiserver.audit import AuditLog
from racksmith.apiserver.builtins import builtin_resources
from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.http.app import WATCHES_KEY, HttpConfig, build_app
from racksmith.apiserver.leases import ServiceLeaseStore
from racksmith.apiserver.lifecycle import Lifecycle
from racksmith.apiserver.metrics import RequestMetrics
from racksmith.apiserver.rbac.admission import RbacAdmission
from racksmith.apiserver.rbac.authorizer import Authorizer, Subject
from racksmith.apiserver.rbac.bootstrap import AUTOUPDATE, bootstrap_objects
from racksmith.apiserver.rbac.hostrestriction import HostRestriction
from racksmith.apiserver.rbac.rules import RBAC_GROUP
from racksmith.apiserver.registry import Registry, ResourceInfo
from racksmith.apiserver.satokens import TokenIssuer
from racksmith.apiserver.service import (
    PATCH_APPLY,
    PATCH_MERGE,
    AdmissionCheck,
    ListOptions,
    ResourceService,
    WriteOptions,
)
from racksmith.apiserver.store.base import Key, Store
from racksmith.apiserver.store.etcd import EtcdConfig, EtcdStore
from racksmith.apiserver.store.sqlite import SqliteStore
from racksmith.apiserver.tokenauth import ServiceAccountAuthenticator
from racksmith.apiserver.users import TokenFile
from racksmith.election import LeaderElector

Obj = dict[str, Any]
log = logging.getLogger("racksmith.apiserver")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
LIFECYCLE_LEASE = "racksmith-apiserver-lifecycle"
"""The Lease in kube-system of the replica that runs the server-side lifecycles."""


SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits (sys.setswitchinterval)."""


@dataclass
class ApiServerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 6443
    """0 picks a free port (tests)."""
    insecure_http: bool = False
    """Plain http and anonymous access: only for tests that ask for it."""
    event_log_size: int = 100_000
    watch_queue_size: int = 10_000
    """Live events buffered for one watch that is not keeping up; one more
    and the watch ends with a 410 Expired (the client re-lists)."""
    tls_cert_file: Path | None = None
    """Serve with this certificate (kube-apiserver's ``--tls-cert-file``)
    instead of the one issued from DATA/pki/ca.crt; with ``tls_key_file``."""
    tls_key_file: Path | None = None
    client_ca_file: Path | None = None
    """Accept client certificates this CA issued (kube-apiserver's
    ``--client-ca-file``): CN the user, O its groups. With ``tls_cert_file``
    it is also the CA the server's own kubeconfig trusts (kubeadm's layout:
    one cluster CA issues both)."""
    max_watches: int = 4096
    """Concurrent watch streams served at most; one more is a 429 with
    Retry-After (each costs a queue and a task)."""
    etcd: EtcdConfig | None = None
    """Serve from this etcd cluster instead of ``DATA/store.db``."""
    host_restriction: bool = True
    """Narrow host agents (ServiceAccount ``racksmith-host-<machine>`` with a
    token bound to the machine's user-data Secret) and kubelets (node
    certificates) to their own host's objects before RBAC is asked
    (:mod:`racksmith.apiserver.rbac.hostrestriction`). A second line only:
    each host's rights are plain RBAC (:mod:`racksmith.hostcreds`), so with
    False the server authorizes as a kube-apiserver would with RBAC alone."""
    shared_dir: Path | None = None
    """Where the secrets every replica of one site shares live (the CA, the
    ServiceAccount signing key, the token file): replicas on one etcd each
    have their own data dir (serving certificate, kubeconfig, audit log) and
    one shared dir. None: the data dir itself (one server)."""
    lifecycle_lease_seconds: float = 15.0
    """Replicas on one etcd: how long the Lease of the replica that runs the
    server-side lifecycles (GC, namespace and CRD finalization) lasts
    unrenewed before another takes over (renewed every 2/15 of it, given
    up after 2/3 of it without a renewal, as kube-controller-manager's
    15/10/2 s)."""


@dataclass
class ApiServer:
    config: ApiServerConfig
    ready: Callable[[], bool] = lambda: True
    metrics: Callable[[], bytes] | None = None
    extra_routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] \
        = field(default_factory=list)
    public: Callable[[str], bool] = lambda _path: False
    """Paths of ``extra_routes`` served without a token."""
    admission: list[AdmissionCheck] = field(default_factory=list)
    """The kinds' own admission checks (the composition root's), after RBAC's."""

    def __post_init__(self) -> None:
        self.data_dir = Path(self.config.data_dir)
        self.registry = Registry()
        for info in builtin_resources():
            self.registry.add(info)
        self.shared_dir = Path(self.config.shared_dir or self.data_dir)
        self.store: Store
        if self.config.etcd is not None:
            etcd_store = EtcdStore(self.config.etcd, event_log_size=self.config.event_log_size,
                                   watch_queue_size=self.config.watch_queue_size)
            etcd_store.on_foreign = self._foreign_write
            etcd_store.on_reset = self._reload_caches
            self.store = etcd_store
        else:
            self.store = SqliteStore(self.data_dir / "store.db",
                                     event_log_size=self.config.event_log_size,
                                     watch_queue_size=self.config.watch_queue_size)
        self.service = ResourceService(self.store)
        self.lifecycle = Lifecycle(self.service, self.registry,
                                   elector=self._lifecycle_elector())
        self.request_metrics = RequestMetrics()
        self.authorizer = Authorizer()
        self._rbac_admission = RbacAdmission(self.authorizer)
        self.service.hooks.append(self._observe_rbac)
        self.service.admission.append(self._admit_rbac)
        self.service.admission.append(self._admit_host)
        self.service.admission.extend(self.admission)
        self.host_restriction = HostRestriction(self._lookup)
        self.sa_tokens: TokenIssuer | None = None
        self.sa_auth: ServiceAccountAuthenticator | None = None
        self.token = ""
        self.audit: AuditLog | None = None
        self.ca_pem: bytes | None = None
        self.port = self.config.port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        scheme = "http" if self.config.insecure_http else "https"
        return f"{scheme}://{self.config.host}:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.data_dir / "kubeconfig"

    def watch_renders(self) -> tuple[int, int]:
        """(lines rendered, lines reused) by the watch render cache so far."""
        if self._runner is None:
            return 0, 0
        cache = self._runner.app[WATCHES_KEY].renders
        return (cache.renders, cache.hits) if cache is not None else (0, 0)

    async def start(self, bootstrap: Iterable[Obj] = ()) -> None:
        # Large requests do their pure CPU work in worker threads; a short GIL
        # switch interval keeps the event loop's latency low meanwhile (the
        # default 5 ms, paid at every I/O wake-up, adds up to hundreds).
        sys.setswitchinterval(SWITCH_INTERVAL)
        # 0700, whatever the umask (see racksmith.filemodes); the files below
        # are written 0600 by pki and the store.
        filemodes.private_dir(self.data_dir)
        shared = self.shared_dir
        if shared != self.data_dir:
            filemodes.private_dir(shared)
        self.token = pki.ensure_admin_token(shared)
        # The one agent token every host shared in earlier releases: host
        # agents now carry tokens of their own (racksmith.hostcreds).
        pki.drop_user(shared, pki.AGENT_USER)
        self.token_file = TokenFile(shared / pki.TOKENS_FILE)
        self.sa_tokens = TokenIssuer(shared / pki.PKI_DIR)
        self.sa_auth = ServiceAccountAuthenticator(
            self.sa_tokens, self.service, self.registry,
            host_identities=self.config.host_restriction)
        self.service.hooks.append(self.sa_auth.observe)
        self.audit = AuditLog(self.data_dir)
        tokens = self.token_file.current()
        ssl_context = None
        if not self.config.insecure_http:
            hosts = ["127.0.0.1", "localhost"]
            if self.config.host not in hosts:
                hosts.append(self.config.host)
            bundle = pki.ensure_pki(self.data_dir, hosts, ca_dir=shared)
            self.ca_pem = bundle.ca_cert_pem
            cfg = self.config
            if cfg.tls_cert_file is not None and cfg.tls_key_file is not None:
                ssl_context = pki.server_ssl_context(cfg.tls_cert_file, cfg.tls_key_file,
                                                  cfg.client_ca_file)
                if cfg.client_ca_file is not None:
                    self.ca_pem = cfg.client_ca_file.read_bytes()
            else:
                ssl_context = pki.server_ssl_context(bundle.cert_path, bundle.key_path,
                                                  cfg.client_ca_file)
        await self.store.open()
        await self._ensure_namespaces()
        await self.service.load_namespaces()
        await self.lifecycle.load()
        self.lifecycle.start()
        await self._load_rbac()
        for obj in bootstrap:
            await self.apply(obj)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.port))
        self.port = sock.getsockname()[1]
        app = build_app(self.registry, self.service, HttpConfig(
            tokens=tokens, token_source=self.token_file.current,
            anonymous=self.config.insecure_http,
            server_address=f"{self.config.host}:{self.port}", ready=self.ready,
            metrics=self.metrics, extra_routes=self.extra_routes, public=self.public,
            max_watches=self.config.max_watches, authorizer=self.authorizer,
            audit=self.audit, sa_tokens=self.sa_tokens, sa_auth=self.sa_auth,
            host_restriction=self.host_restriction if self.config.host_restriction else None,
            request_metrics=self.request_metrics))
        # auto_decompress=False: request bodies are decoded by the HTTP layer
        # (http/request.py), bounded, so a wrong or unknown Content-Encoding
        # is the client's 4xx, never a parser traceback.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True,
                                     shutdown_timeout=2.0, auto_decompress=False)
        await self._runner.setup()
        site = web.SockSite(self._runner, sock, ssl_context=ssl_context)
        await site.start()
        pki.write_kubeconfig(self.kubeconfig_path, server=self.url, token=self.token,
                             ca_pem=self.ca_pem)
        log.info("API server listening on %s", self.url)

    def _lifecycle_elector(self) -> LeaderElector | None:
        """Replicas on one etcd elect the one that runs the lifecycles; a
        server on its own SQLite store is alone. The identity is stable
        across restarts (host name and data dir), so a restarted replica
        takes its own Lease back at once instead of waiting for it to
        expire."""
        if self.config.etcd is None:
            return None
        lease = self.config.lifecycle_lease_seconds
        return LeaderElector(
            ServiceLeaseStore(self.service, self.registry, "kube-system", LIFECYCLE_LEASE),
            f"{socket.gethostname()}:{self.data_dir.resolve()}",
            lease_duration=lease, renew_deadline=lease * 2 / 3, retry_period=lease * 2 / 15)

    async def _reload_caches(self) -> None:
        """The store lost the history of writes this replica had not followed
        yet: reload what is kept in memory from the store as at start."""
        await self.service.load_namespaces()
        await self.lifecycle.load()
        for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
            info = self.registry.get(RBAC_GROUP, "v1", plural)
            assert info is not None
            page = await self.service.list(info, None, ListOptions())
            self.authorizer.replace(plural, page.items)
        if self.sa_auth is not None:
            self.sa_auth.forget()

    async def _foreign_write(self, key: Key, old: Obj | None, new: Obj | None) -> None:
        """A write another replica made (seen in etcd's watch): the write
        hooks run here too, so this replica's caches (RBAC, tokens,
        namespaces, CRDs served, garbage collection) follow it."""
        group, _, plural = key.resource.partition("/")
        info = self.registry.resource("" if group == "core" else group, plural)
        if info is not None:
            await self.service.observe(info, key, old, new)

    async def _observe_rbac(self, info: ResourceInfo, key: Key, _old: Obj | None,
                            new: Obj | None) -> None:
        if info.group == RBAC_GROUP:
            self.authorizer.observe(info.plural, key.namespace, key.name, new)

    def _admit_rbac(self, info: ResourceInfo, namespace: str, obj: Obj, old: Obj | None,
                    user: object) -> None:
        if info.group == RBAC_GROUP:
            self._rbac_admission.check(info.plural, info.kind, namespace, obj, old,
                                       user if isinstance(user, Subject) else None)

    def _admit_host(self, info: ResourceInfo, namespace: str, obj: Obj, old: Obj | None,
                    user: object) -> None:
        if isinstance(user, Subject) and user.host is not None and self.config.host_restriction:
            refused = HostRestriction.admit(user.host, info.group, info.plural, namespace,
                                            obj, old)
            if refused is not None:
                meta = obj.get("metadata") or {}
                raise ApiError(403, "Forbidden", f'{info.group_resource} "{meta.get("name", "")}" '
                               f'is forbidden: User "{user.name}" may not write it: {refused}',
                               kind=info.plural, name=str(meta.get("name") or ""),
                               group=info.group)

    async def _lookup(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        """One object, for the host restriction (None: it does not exist)."""
        info = self.registry.resource(group, plural)
        if info is None:
            return None
        try:
            return await self.service.get(info, namespace, name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            return None

    async def annotate(self, api_version: str, kind: str, namespace: str, name: str,
                       annotations: dict[str, str]) -> bool:
        """Merge ``annotations`` into one object (as the server itself); False
        when it does not exist."""
        info = self.registry.find_kind(api_version, kind)
        if info is None:
            raise ValueError(f"unknown kind {api_version}/{kind}")
        try:
            await self.service.patch(info, namespace, name, PATCH_MERGE,
                                     {"metadata": {"annotations": annotations}},
                                     WriteOptions(field_manager="racksmith"))
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    async def issue_token(self, namespace: str, name: str, seconds: int) -> tuple[str, int]:
        """A token for ServiceAccount ``namespace/name``, signed here (for the
        composition root's own identities, as kube-controller-manager's are
        provisioned at start): (token, expiry as Unix seconds). The
        ServiceAccount must exist."""
        assert self.sa_tokens is not None
        info = self.registry.get("", "v1", "serviceaccounts")
        assert info is not None
        sa = await self.service.get(info, namespace, name)
        token, expiry, _ = self.sa_tokens.issue(
            namespace, name, str(sa["metadata"].get("uid") or ""),
            {"expirationSeconds": seconds})
        return token, expiry

    async def _load_rbac(self) -> None:
        """Index the stored RBAC objects, then put the built-in roles and
        bindings back as declared (unless annotated autoupdate=false)."""
        for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
            info = self.registry.get(RBAC_GROUP, "v1", plural)
            assert info is not None
            page = await self.service.list(info, None, ListOptions())
            self.authorizer.load(plural, page.items)
        for obj in bootstrap_objects():
            info = self.registry.find_kind(obj["apiVersion"], obj["kind"])
            assert info is not None
            try:
                current = await self.service.get(info, "", obj["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise
                current = None
            annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
            if annotations.get(AUTOUPDATE) == "false":
                continue
            if current is not None and "roleRef" in obj:
                if current.get("roleRef") != obj["roleRef"]:
                    continue  # immutable: an operator's binding of that name stays
                subjects = list(current.get("subjects") or [])
                obj = {**obj, "subjects": subjects + [
                    s for s in obj["subjects"] if s not in subjects]}
            await self.apply(obj, manager="racksmith-apiserver")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.audit is not None:
            self.audit.close()
        await self.lifecycle.stop()
        with contextlib.suppress(Exception):
            await self.store.close()

    async def _ensure_namespaces(self) -> None:
        info = self.registry.get("", "v1", "namespaces")
        assert info is not None
        opts = WriteOptions(field_manager="racksmith-apiserver")
        for name in DEFAULT_NAMESPACES:
            try:
                await self.service.create(info, "", {"metadata": {"name": name}}, opts)
            except ApiError as exc:
                if exc.code != 409:
                    raise

    async def apply(self, obj: Obj, manager: str = "racksmith", *,
                    server_side: bool = False) -> Obj:
        """Create or update ``obj`` idempotently.

        ``server_side=False`` (objects Racksmith owns whole: its CRDs,
        namespaces, the agent config): the object is replaced, status kept.
        ``server_side=True`` (an operator's ``--apply`` manifests): a
        server-side apply by ``manager`` (not forced: a field another manager
        changed is a 409 conflict), so fields other managers set since (a
        controller's ``spec.consumerRef``, ``spec.image``...) survive a
        restart that applies the same manifests again.
        """
        api_version = obj.get("apiVersion", "")
        info = self.registry.find_kind(api_version, obj.get("kind", ""))
        if info is None:
            raise ValueError(f"unknown kind {api_version}/{obj.get('kind')}")
        meta = obj.get("metadata", {})
        ns = meta.get("namespace", "default") if info.namespaced else ""
        if server_side:
            body = copy.deepcopy(obj)
            if info.namespaced:
                body.setdefault("metadata", {})["namespace"] = ns
            res = await self.service.patch(info, ns, meta["name"], PATCH_APPLY, body,
                                           WriteOptions(field_manager=manager))
            return res.obj
        opts = WriteOptions(field_manager=manager)
        try:
            current = await self.service.get(info, ns, meta["name"])
        except ApiError as exc:
            if exc.code != 404:
                raise
            return (await self.service.create(info, ns, copy.deepcopy(obj), opts)).obj
        desired = copy.deepcopy(obj)
        desired["metadata"] = {**current["metadata"], **meta}
        if "status" in current:
            desired["status"] = current["status"]
        return (await self.service.update(info, ns, meta["name"], desired, opts)).obj
