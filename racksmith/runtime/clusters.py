"""One client per managed cluster, and whether it can be reached (Cluster
API's ClusterCacheTracker model).

Owns :class:`ClusterClients`. A controller that works inside a managed
cluster asks it for that cluster's :class:`~racksmith.runtime.client.Client`
(``client(key, access)``): one per cluster and identity, with the cluster's
own shared informers (per cluster and resource), rebuilt when the access
changes (a new endpoint, a renewed certificate) and dropped with
``drop(key)`` when the Cluster goes (its informers stop, its connections
close, its key files go).

Reachability is tracked apart from the work: ``track(key, access)`` keeps a
background probe of the cluster's ``/readyz`` (every ``probe_interval``
seconds, each bounded by ``probe_timeout``; every ``probe_retry`` seconds
while it does not answer) and answers the last verdict at
once, never waiting on the network; a change of verdict pushes the key to
``changes`` (a :class:`~racksmith.runtime.source.ChannelSource`), so the
Cluster controller writes ``ControlPlaneReachable`` from it. An unreachable
cluster costs its own probe task only: no other cluster's work waits.

``ClusterAccess`` is plain data: the endpoint, the CA to trust, and the
identity (a client certificate and key) the caller has in that cluster —
never the cluster's admin kubeconfig, which is for people. Key material is
written for the TLS layer only, under ``workdir/<namespace>_<name>/``
(0700, files 0600), and removed on ``drop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from racksmith import filemodes
from racksmith.clock import Clock, SystemClock
from racksmith.runtime.client import Client
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.kubeclient import api_client_with_certificate
from racksmith.runtime.source import ChannelSource

REACHABLE = "Reachable"
UNREACHABLE = "Unreachable"
NOT_READY = "NotReady"
NOT_PROBED = "NotProbed"


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach one cluster: its endpoint URL, the CA it serves with, and
    an identity there (client certificate and key, PEM; empty: anonymous)."""

    server: str
    ca_pem: bytes
    cert_pem: bytes = b""
    key_pem: bytes = b""

    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.server.encode(), self.ca_pem, self.cert_pem, self.key_pem):
            h.update(len(part).to_bytes(8, "big") + part)
        return h.hexdigest()


@dataclass(frozen=True)
class Reachability:
    """A probe's verdict: ``reachable`` None until the first probe answered."""

    reachable: bool | None
    reason: str
    message: str


_UNKNOWN = Reachability(None, NOT_PROBED, "not probed yet")


@dataclass
class _Identity:
    """One identity's Client in one cluster, with the access it was made for."""

    digest: str
    client: Client


@dataclass
class _Tracked:
    access: ClusterAccess
    digest: str
    folder: Path
    verdict: Reachability = _UNKNOWN
    task: asyncio.Task[None] | None = None
    clients: dict[str, _Identity] = field(default_factory=dict)


class ClusterClients:
    """The managed clusters' clients and reachability (see the module docstring)."""

    def __init__(self, workdir: Path, *, clock: Clock | None = None,
                 probe_interval: float = 30.0, probe_timeout: float = 5.0,
                 probe_retry: float = 2.0,
                 on_change: Callable[[ObjectKey], None] | None = None) -> None:
        self.workdir = workdir
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.probe_interval = probe_interval
        self.probe_retry = min(probe_retry, probe_interval)
        self.probe_timeout = probe_timeout
        self.changes = ChannelSource()
        self._on_change = on_change
        self._tracked: dict[ObjectKey, _Tracked] = {}

    # --- clients ----------------------------------------------------------------

    def client(self, key: ObjectKey, access: ClusterAccess, *,
               field_manager: str = "racksmith") -> Client:
        """The Client of cluster ``key`` for ``access``, one per
        ``field_manager`` (an identity: each controller's own certificate);
        made on first use, remade when that identity's access changed."""
        tracked = self._tracked.get(key)
        if tracked is None:
            tracked = self._entry(key, ClusterAccess(access.server, access.ca_pem))
        digest = access.digest()
        current = tracked.clients.get(field_manager)
        if current is not None and current.digest == digest:
            return current.client
        if current is not None:
            asyncio.get_running_loop().create_task(_close(current.client))
        folder = tracked.folder / _safe(field_manager)
        filemodes.private_dir(folder)
        filemodes.write_private(folder / "ca.crt", access.ca_pem)
        if access.cert_pem and access.key_pem:
            filemodes.write_private(folder / "client.crt", access.cert_pem)
            filemodes.write_private(folder / "client.key", access.key_pem)
        api = api_client_with_certificate(
            access.server, folder / "ca.crt",
            folder / "client.crt" if access.cert_pem else None,
            folder / "client.key" if access.key_pem else None)
        client = Client(api, field_manager=field_manager, clock=self.clock)
        tracked.clients[field_manager] = _Identity(digest, client)
        return client

    def _entry(self, key: ObjectKey, access: ClusterAccess) -> _Tracked:
        """The tracked entry of ``key`` for the probe's ``access`` (endpoint and
        CA); a new endpoint or CA retires the old probe and clients."""
        digest = access.digest()
        tracked = self._tracked.get(key)
        if tracked is not None and tracked.digest == digest:
            return tracked
        if tracked is not None:
            self._retire(tracked)
        folder = self.workdir / f"{key.namespace}_{key.name}"
        filemodes.private_dir(self.workdir)
        filemodes.private_dir(folder)
        filemodes.write_private(folder / "ca.crt", access.ca_pem)
        fresh = _Tracked(access, digest, folder)
        if tracked is not None:
            fresh.verdict = tracked.verdict
        self._tracked[key] = fresh
        return fresh

    def _retire(self, tracked: _Tracked) -> None:
        if tracked.task is not None:
            tracked.task.cancel()
        for identity in tracked.clients.values():
            asyncio.get_running_loop().create_task(_close(identity.client))
        tracked.clients.clear()

    # --- reachability -----------------------------------------------------------

    def track(self, key: ObjectKey, access: ClusterAccess) -> Reachability:
        """Keep probing cluster ``key`` with ``access``; the last verdict, at once."""
        tracked = self._entry(key, ClusterAccess(access.server, access.ca_pem))
        if tracked.task is None or tracked.task.done():
            tracked.task = asyncio.get_running_loop().create_task(
                self._probe_loop(key, tracked), name=f"probe-{key.namespace}/{key.name}")
        return tracked.verdict

    def reachability(self, key: ObjectKey) -> Reachability:
        tracked = self._tracked.get(key)
        return tracked.verdict if tracked is not None else _UNKNOWN

    async def probe(self, access: ClusterAccess, folder: Path) -> Reachability:
        """One GET of ``/readyz`` (bounded by ``probe_timeout``)."""
        api = api_client_with_certificate(access.server, folder / "ca.crt", None, None)
        try:
            session = api.rest_client.pool_manager
            timeout = aiohttp.ClientTimeout(total=self.probe_timeout)
            async with session.get(access.server.rstrip("/") + "/readyz",
                                   timeout=timeout) as resp:
                text = (await resp.text())[:200]
                if resp.status == 200:
                    return Reachability(True, REACHABLE, f"{access.server}/readyz answers ok")
                return Reachability(False, NOT_READY, f"{access.server}/readyz answers "
                                    f"{resp.status}: {text.strip()}")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Reachability(False, UNREACHABLE, f"{access.server}: no answer "
                                f"({type(exc).__name__})")
        finally:
            await api.close()

    async def _probe_loop(self, key: ObjectKey, tracked: _Tracked) -> None:
        while True:
            verdict = await self.probe(tracked.access, tracked.folder)
            if verdict != tracked.verdict:
                tracked.verdict = verdict
                self.changes.push(key)
                if self._on_change is not None:
                    self._on_change(key)
            # a cluster that does not answer (yet) is asked again sooner: its
            # work (held while it is unreachable) resumes soon after it serves
            await self.clock.sleep(self.probe_interval if verdict.reachable
                                   else self.probe_retry)

    # --- the end of a cluster ---------------------------------------------------

    async def drop(self, key: ObjectKey) -> None:
        """Forget cluster ``key``: stop its probe and informers, close its
        connections, remove its key files."""
        tracked = self._tracked.pop(key, None)
        if tracked is None:
            return
        if tracked.task is not None:
            tracked.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tracked.task
        for identity in tracked.clients.values():
            await _close(identity.client)
        shutil.rmtree(tracked.folder, ignore_errors=True)

    def known(self) -> list[ObjectKey]:
        return sorted(self._tracked)

    async def close(self) -> None:
        for key in list(self._tracked):
            await self.drop(key)


def _safe(name: str) -> str:
    """A folder name for an identity (field manager)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"


async def _close(client: Client) -> None:
    for informer in client.informers.all():
        with contextlib.suppress(Exception):
            await informer.stop()
    with contextlib.suppress(Exception):
        await client.api_client.close()
