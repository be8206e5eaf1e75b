"""Racksmith's own identities: one ServiceAccount and ClusterRole per controller.

Owns what ``racksmith up`` runs its controllers as, the way
kube-controller-manager does with ``--use-service-account-credentials``:

* :func:`identity_objects`: for every controller, a ServiceAccount
  ``racksmith-system/<name>-controller``, a ClusterRole
  ``racksmith:controller:<name>`` with exactly the rules the controller
  declares (its ``ACCESS``, next to it) and the ClusterRoleBinding between
  them; and the process's own identity, ``racksmith-system/controller-manager``
  with ``racksmith:controller-manager``: list and watch of everything a
  controller watches (the shared informers run under it) but Secrets (a
  controller that watches Secrets does so under its own identity:
  :data:`PRIVATE`), its leader-election Lease, and TokenRequests for the
  controllers' ServiceAccounts — nothing else, no writes. ``racksmith rbac``
  prints the same objects, which is what a deployment onto another cluster
  applies.
* :class:`Identities`: the clients. The process's identity gets a token
  from ``issue`` (in ``racksmith up``, signed by the embedded API server,
  as a controller manager's credentials are provisioned at start); each
  controller's token is asked for through the TokenRequest API with that
  identity, and each controller talks through a ``Client`` of its own
  (its writes and live reads under its ServiceAccount) over the shared
  informers, checking that it may read what it reads from them
  (``verify_cached_reads``). Tokens last ``token_seconds`` and are renewed
  once a fifth of their life is left (``racksmith.runtime.tokens``), by a
  task that looks every ``check_every`` seconds.

Nothing of the controllers uses the administrator's credentials: a rule
missing from a controller's ``ACCESS`` is a 403 in its log and in the audit
trail, and the end-to-end tests, which run ``racksmith up``, fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient

from racksmith.runtime.access import Access, Rule
from racksmith.runtime.client import Client, Informers
from racksmith.runtime.kubeclient import api_client_with_token
from racksmith.runtime.resources import SECRETS
from racksmith.runtime.tokens import token_claims

log = structlog.get_logger("racksmith.identities")

NAMESPACE = "racksmith-system"
MANAGER = "controller-manager"
RBAC = "rbac.authorization.k8s.io"
LABELS = {"app.kubernetes.io/part-of": "racksmith", "app.kubernetes.io/component": "controller"}
LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "racksmith-controllers"

Obj = dict[str, Any]
Issue = Callable[[str, str, int], Awaitable[tuple[str, int]]]
"""Signs a token for ServiceAccount (namespace, name) lasting that many seconds."""


def service_account(controller: str) -> str:
    return f"{controller}-controller"


def cluster_role(controller: str) -> str:
    return f"racksmith:controller:{controller}"


PRIVATE = frozenset({SECRETS})
"""What the process's identity never reads: a controller that watches it (the
BareMetalHost controller's BMC credentials) lists and watches it under its
own identity, with informers of its own."""


def manager_access(accesses: Mapping[str, Access]) -> Access:
    """The process's own rules: what its shared informers need (never
    :data:`PRIVATE`), its Lease, and tokens for the controllers' ServiceAccounts."""
    watched = Access()
    for access in accesses.values():
        watched = watched + access.watch_rules()
    private = {(r.group, r.plural) for r in PRIVATE}
    watched = Access(frozenset(r for r in watched.rules
                               if (r.group, r.resource) not in private))
    return watched + Access(frozenset({
        Rule("coordination.k8s.io", "leases", ("create",)),
        Rule("coordination.k8s.io", "leases", ("get", "update"), (LEASE_NAME,)),
        Rule("", "serviceaccounts/token", ("create",),
             tuple(sorted(service_account(n) for n in accesses))),
    }))


def _meta(name: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _identity(sa: str, role: str, access: Access) -> list[Obj]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(sa, NAMESPACE)},
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(role),
         "rules": access.policy_rules()},
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": _meta(role),
         "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]},
    ]


def identity_objects(accesses: Mapping[str, Access]) -> list[Obj]:
    """The Namespace, then every ServiceAccount, ClusterRole and binding (see
    the module docstring), in apply order; the same input, the same objects."""
    objects: list[Obj] = [{"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": NAMESPACE,
                                        "labels": {"app.kubernetes.io/part-of": "racksmith"}}}]
    objects += _identity(MANAGER, f"racksmith:{MANAGER}", manager_access(accesses))
    for name in sorted(accesses):
        objects += _identity(service_account(name), cluster_role(name), accesses[name])
    return objects


@dataclass
class _Credential:
    api_client: ApiClient
    token: str


class Identities:
    """The clients of the process and of each controller (see the module docstring).

    ``issue`` signs the process's own token (``racksmith up``); with
    ``manager`` instead, the process already has its credentials (``racksmith
    controllers``: a kubeconfig or the pod's ServiceAccount, renewed by
    whoever gave them) and ``server``/``ca_file`` are read from it."""

    def __init__(self, server: str, ca_file: Path | None, issue: Issue | None,
                 controllers: list[str], *, token_seconds: int = 6 * 3600,
                 check_every: float = 60.0, manager: ApiClient | None = None) -> None:
        if (issue is None) == (manager is None):
            raise ValueError("Identities: give exactly one of issue and manager")
        self.server = server
        self.ca_file = ca_file
        self.issue = issue
        self.names = list(controllers)
        self.token_seconds = token_seconds
        self.check_every = check_every
        self._given = manager
        self._manager: _Credential | None = None
        self._controllers: dict[str, _Credential] = {}
        self._clients: dict[str, Client] = {}
        self.informers: Informers | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def manager(self) -> ApiClient:
        """The process's own ApiClient (shared informers, leader election)."""
        assert self._manager is not None, "Identities.start() first"
        return self._manager.api_client

    @classmethod
    def of_client(cls, manager: ApiClient, controllers: list[str], **kw: Any) -> Identities:
        """Identities of a process that has its own credentials (``manager``)."""
        conf = manager.configuration
        ca = getattr(conf, "ssl_ca_cert", None)
        return cls(str(conf.host), Path(ca) if ca else None, None, controllers,
                   manager=manager, **kw)

    async def start(self) -> None:
        """Get every token and build every client; then renew them in the background."""
        if self._given is not None:
            self._manager = _Credential(self._given, "")
        else:
            assert self.issue is not None
            token, _ = await self.issue(NAMESPACE, MANAGER, self.token_seconds)
            self._manager = _Credential(
                api_client_with_token(self.server, token, self.ca_file), token)
        self.informers = Informers(self._manager.api_client)
        for name in self.names:
            token = await self._controller_token(name)
            self._controllers[name] = _Credential(
                api_client_with_token(self.server, token, self.ca_file), token)
        self._task = asyncio.create_task(self._renew_forever(), name="identities-renewal")

    def client_for(self, name: str) -> Client:
        """The Client of controller ``name`` (its identity, the shared informers)."""
        client = self._clients.get(name)
        if client is None:
            assert self.informers is not None, "Identities.start() first"
            client = Client(self._controllers[name].api_client, informers=self.informers,
                            verify_cached_reads=True).with_private(PRIVATE)
            self._clients[name] = client
        return client

    async def _controller_token(self, name: str) -> str:
        manager = Client(self.manager)
        return await manager.request_token(NAMESPACE, service_account(name),
                                           seconds=self.token_seconds)

    async def renew_due(self, now: float | None = None) -> list[str]:
        """Renew the tokens due at ``now``; returns whose were renewed."""
        t = time.time() if now is None else now
        renewed: list[str] = []
        assert self._manager is not None
        claims = token_claims(self._manager.token)
        if self.issue is not None and (claims is None or claims.due(t)):
            token, _ = await self.issue(NAMESPACE, MANAGER, self.token_seconds)
            self._set(self._manager, token)
            renewed.append(MANAGER)
        for name, credential in self._controllers.items():
            claims = token_claims(credential.token)
            if claims is None or claims.due(t):
                self._set(credential, await self._controller_token(name))
                renewed.append(name)
        return renewed

    @staticmethod
    def _set(credential: _Credential, token: str) -> None:
        credential.token = token
        credential.api_client.configuration.api_key["BearerToken"] = token

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.check_every)
            try:
                renewed = await self.renew_due()
            except Exception as exc:  # the current tokens stay in use; next check retries
                log.warning("token renewal failed", error=f"{type(exc).__name__}: {exc}")
                continue
            if renewed:
                log.info("tokens renewed", identities=renewed)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        own = [self._manager] if self._manager is not None and self._given is None else []
        for credential in [*self._controllers.values(), *own]:
            await credential.api_client.close()
