"""The agent's reads and writes, through the runtime ``Client``.

Owns every API call of the agent, over two APIs:

- **the management API** (the client built in ``main`` from the agent's
  config, its host's own bearer token, bound to its user-data Secret): the
  LCMMachine (read, watched; status subresource by merge patch) and the
  token's renewal (``agent.token``). Nothing else.
- **the node side** (the cluster's API when the kubelet has credentials,
  else the management API): the Node of the host (read, create,
  ``spec.unschedulable`` by merge patch — the built-in cordon/uncordon —,
  status subresource by merge patch), the pods bound to the node (list and
  watch with ``spec.nodeName=<node>``; status subresource by merge patch),
  the node Lease in ``kube-node-lease`` and, for the storage tasks, the
  node's Volumes (watch with ``spec.nodeName=<node>``, read, metadata
  annotations by merge patch) and StorageClasses (read).

The node side's client is made lazily from ``/etc/kubernetes/kubelet.conf``
on the host (``kubeadm.parse_kubelet_conf``) once that file carries
credentials — the cluster CA (a file, or embedded as the real kubeadm
writes it) and the kubelet's client certificate file (``system:node:<node>``,
``system:nodes``) — which the kubeadm item writes
after the agent started: the server (the cluster's endpoint) is reached at
its loopback image when the host is emulated (``racksmith.loopback``, as
``clusterplane`` reaches it), the files through the Host seam's root. The
file (and the certificate files' stamps) are looked at again before each
node-side call and by the node-side watches every few seconds: a change
builds a new client and restarts those watches on it. While the host has
the kubelet's credentials (the cluster CA and client certificate its user
data wrote) but no kubelet.conf with them yet, there is no node side:
node-side calls raise :class:`ClusterUnavailable` until kubeadm writes it
(never the management API, where a host's own Role grants no Node, pod or
Volume). Without credentials at all (older user data, the integration
tests) the node side is the management client, as before. Credentials
that cannot be loaded make node-side calls raise :class:`ClusterUnavailable`
(the callers retry on their next tick); an endpoint that does not answer
yet raises the HTTP client's errors, retried the same way. No credential
is ever logged: the files are named by path only. :meth:`AgentKube.close`
closes the cluster's clients (the management one is ``main``'s).

Nothing else in the package talks to the API. The Client's error model
(``NotFound``, ``AlreadyExists``...) is the only one it sees.

Reads are live except four, answered from a cache as controllers' are:
the pods of the node from the emulated kubelet's watch of them (the
informer of ``pod_source``; the kubelet's tick listed them live),
the LCMMachine from the agent's watch of it (the informer of
``lcm_source``, field selector ``metadata.name``: the agent's loop polls
it every few seconds, which was a live GET each time — 200 a second for
1,000 idle hosts — and now wakes on its events), a Volume from the node's
own Volume watch (the informer of ``volume_source``, field selector
``spec.nodeName``), each once it has listed — the object the event told of
or newer, with the agent's own patches offered to it so the next read sees
them —, and a StorageClass from a StorageClass informer while
``storage_class_cache`` runs. Before a cache has listed, the read is live.
(Measured: the live re-read of every Volume on every one of its events was
~5 GETs per volume, a third of the API server's requests in
``bench/volumes.py``.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import ipaddress
import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog
from kubernetes_asyncio.client import ApiClient, Configuration

from racksmith.agent import kubeadm
from racksmith.agent.host import Host, HostError
from racksmith.clock import Clock, wait_event
from racksmith.election import micro_time
from racksmith.loopback import LoopbackMap
from racksmith.redact import register_secret
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.informer import SharedInformer
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.kubeclient import resolve_proxy_once
from racksmith.runtime.resources import (
    LCMMACHINES,
    NODES,
    PODS,
    STORAGE_CLASSES,
    VOLUMES,
)
from racksmith.runtime.source import KubeSource, Resource

__all__ = ["LEASE_NAMESPACE", "AgentKube", "ClusterUnavailable", "NodeSource", "api_client",
           "rfc3339"]

LEASE_NAMESPACE = "kube-node-lease"
LEASES = Resource("coordination.k8s.io", "v1", "leases")
FIELD_MANAGER = "racksmith-agent"
RECHECK_SECONDS = 5.0
"""How often a node-side watch looks at kubelet.conf again."""
AWAITING_KUBELET_CONF = "the kubelet's credentials are here, kubelet.conf not yet"
"""Why node-side calls wait (ClusterUnavailable) before kubeadm wrote kubelet.conf."""

log = structlog.get_logger("racksmith.agent.kube")


def rfc3339(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def api_client(server: str, token: str, ca_data: str | None, scratch: Path) -> ApiClient:
    """An ``ApiClient`` for ``server`` with a bearer ``token`` and CA (base64 PEM).

    The client reads the CA from a file while it is built; that file lives
    in the existing directory ``scratch`` only for that moment. Close with
    ``await c.close()``.
    """
    register_secret(token)  # never in a log line (racksmith.redact)
    configuration = Configuration(host=server.rstrip("/"))
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    if not ca_data:
        client = ApiClient(configuration=configuration)
        resolve_proxy_once(client)
        return client
    fd, ca_file = tempfile.mkstemp(dir=scratch, prefix=".racksmith-agent-ca.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(ca_data))
        configuration.ssl_ca_cert = ca_file
        client = ApiClient(configuration=configuration)
        resolve_proxy_once(client)
        return client
    finally:
        os.unlink(ca_file)


def _offer(informer: SharedInformer | None, written: dict[str, Any]) -> None:
    """Hand our own write's answer to the watch's cache: the next read sees it
    before its watch event does."""
    if informer is not None:
        informer.offer(written)


class ClusterUnavailable(Exception):
    """kubelet.conf names the cluster's API with credentials, but no client can
    be made from them (yet); the node-side call is retried later."""


@dataclass(frozen=True)
class _ClusterApi:
    """The node side's own client to the cluster's API, and what it was made from."""

    api_client: ApiClient
    client: Client
    key: tuple[Any, ...]


class NodeSource:
    """List+watch of a node-side resource (pods or Volumes of the node) on
    whichever API the node side uses now: restarted on the new one when it
    changes (module docstring). A :class:`~racksmith.runtime.source.Source`."""

    def __init__(self, kube: AgentKube, resource: Resource, field_selector: str,
                 clock: Clock, slot: str, recheck: float = RECHECK_SECONDS) -> None:
        self._kube = kube
        self.resource = resource
        self._field_selector = field_selector
        self._clock = clock
        self._slot = slot
        self._recheck = recheck
        self._inner: KubeSource | None = None
        self.unreachable = 0
        """How many times it found no API to watch on and waited for a change."""

    @property
    def informer(self) -> SharedInformer | None:
        """The informer of the current watch (None before the first)."""
        return self._inner.informer if self._inner is not None else None

    @property
    def has_synced(self) -> bool:
        inner = self._inner
        return inner is not None and inner.has_synced

    def keys(self) -> AsyncIterator[ObjectKey]:
        return self._keys()

    async def _keys(self) -> AsyncIterator[ObjectKey]:
        kube = self._kube
        while True:
            generation = kube.generation
            try:
                api = await kube.node_api_client()
            except (ClusterUnavailable, OSError, HostError):
                self.unreachable += 1
                await kube.wait_for_change(generation, self._clock, self._recheck)
                continue
            inner = KubeSource(api, self.resource, field_selector=self._field_selector,
                               clock=self._clock)
            self._inner = inner
            kube.set_informer(self._slot, inner.informer)
            keys = inner.keys()
            merged = _until_change(keys, kube.wait_for_change(generation, self._clock,
                                                              self._recheck))
            try:
                async for key in merged:
                    yield key
            finally:
                await merged.aclose()  # stops the change watch first
                closing = getattr(keys, "aclose", None)
                if closing is not None:
                    await closing()


async def _until_change(keys: AsyncIterator[ObjectKey],
                        change: Awaitable[None]) -> AsyncGenerator[ObjectKey, None]:
    """``keys`` until ``change`` completes (or ``keys`` ends)."""
    changed = asyncio.ensure_future(change)
    pending: asyncio.Future[ObjectKey] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(keys))
            await asyncio.wait({pending, changed}, return_when=asyncio.FIRST_COMPLETED)
            if not pending.done():
                return
            try:
                key = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield key
            if changed.done():
                return
    finally:
        for future in (pending, changed):
            if future is None:
                continue
            if not future.done():
                future.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await future  # its outcome is taken, never left unretrieved


class AgentKube:
    """The agent's API access (see the module docstring). Every method may be
    repeated. Patches are RFC 7386 merge patches.

    ``api_client``: the management API. ``host``: where kubelet.conf and the
    kubelet's credentials are (None: the node side is the management API);
    ``network``: an emulated host's loopback images, through which the
    cluster's endpoint is reached."""

    def __init__(self, api_client: Any, *, host: Host | None = None,
                 network: LoopbackMap | None = None) -> None:
        self.api_client = api_client
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self._host = host
        self._network = network
        self._cluster: _ClusterApi | None = None
        self._unavailable: str | None = None
        """Why the cluster's client cannot be made (node-side calls raise)."""
        self._retired: list[_ClusterApi] = []
        self.generation = 0
        """Bumped whenever the node side moves to another API."""
        self._informers: dict[str, SharedInformer | None] = {}
        self._lcm: SharedInformer | None = None
        self._storage_classes_open = 0
        self._storage_classes: tuple[Client, SharedInformer] | None = None
        self._refreshing = asyncio.Lock()
        self._changed = asyncio.Event()
        """Set (and replaced) when the node side moves."""

    # --- which API the node side uses -----------------------------------------------

    async def node_client(self) -> Client:
        """The node side's Client (module docstring); raises ClusterUnavailable."""
        await self.refresh()
        if self._unavailable is not None:
            raise ClusterUnavailable(self._unavailable)
        return self._cluster.client if self._cluster is not None else self.client

    async def node_api_client(self) -> Any:
        """The node side's ApiClient (for its watches); raises ClusterUnavailable."""
        await self.refresh()
        if self._unavailable is not None:
            raise ClusterUnavailable(self._unavailable)
        return self._cluster.api_client if self._cluster is not None else self.api_client

    @property
    def uses_cluster(self) -> bool:
        """The node side talks to the cluster's own API."""
        return self._cluster is not None

    async def refresh(self) -> None:
        """Look at kubelet.conf (and its credential files) again; a change moves
        the node side to the API it now names."""
        if self._host is None:
            return
        async with self._refreshing:
            found = self._kubelet_conf()
            key = found[1] if found is not None else None
            current = self._cluster.key if self._cluster is not None else None
            # the user data gave the kubelet its cluster credentials: the node
            # side is the cluster's API once kubeadm wrote kubelet.conf, and
            # none until then (never the management API, where the host's
            # own Role grants no Node, pod or Volume)
            waiting = AWAITING_KUBELET_CONF if found is None and \
                kubeadm.has_kubelet_credentials(self._host) else None
            if key == current and self._unavailable == waiting:
                return
            made: _ClusterApi | None = None
            error: str | None = waiting
            if found is not None:
                try:
                    made = self._build(*found)
                except (OSError, ValueError, HostError) as exc:  # ssl.SSLError is an OSError
                    error = f"{type(exc).__name__}: {exc}"
            if made is None and error is not None and error == self._unavailable:
                return  # the same failure as before: already said
            await self._switch(made, error)

    def _kubelet_conf(self) -> tuple[kubeadm.KubeletConf, tuple[Any, ...]] | None:
        """kubelet.conf when it carries credentials, with what identifies its
        content and its files' (None: the node side is the management API)."""
        assert self._host is not None
        try:
            raw = self._host.read_file(kubeadm.KUBELET_CONF)
        except (OSError, HostError):
            return None
        conf = kubeadm.parse_kubelet_conf(raw)
        if conf is None or not conf.has_credentials:
            return None
        stamps = tuple(self._stamp(path) for path in (
            conf.certificate_authority, conf.client_certificate, conf.client_key))
        return conf, (raw, *stamps)

    def _stamp(self, path: str | None) -> tuple[int, int, int] | None:
        assert self._host is not None
        if not path:
            return None
        try:
            st = self._host.resolve(path).stat()
        except (OSError, HostError):
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _build(self, conf: kubeadm.KubeletConf, key: tuple[Any, ...]) -> _ClusterApi:
        """A client for the cluster's API from kubelet.conf's files (read once,
        when the client's TLS context is made). An embedded CA
        (``certificate-authority-data``, as the real kubeadm writes it) lives
        in a file beside kubelet.conf only while the client is made."""
        host = self._host
        assert host is not None and conf.client_certificate
        configuration = Configuration(host=self._reach(conf.server).rstrip("/"))
        configuration.cert_file = str(host.resolve(conf.client_certificate))
        configuration.key_file = str(host.resolve(conf.client_key or conf.client_certificate))
        if conf.certificate_authority:
            configuration.ssl_ca_cert = str(host.resolve(conf.certificate_authority))
            api = ApiClient(configuration=configuration)
        else:
            scratch = host.resolve(kubeadm.KUBELET_CONF).parent
            fd, ca_file = tempfile.mkstemp(dir=scratch, prefix=".racksmith-agent-ca.")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(base64.b64decode(conf.certificate_authority_data or ""))
                configuration.ssl_ca_cert = ca_file
                api = ApiClient(configuration=configuration)
            finally:
                os.unlink(ca_file)
        resolve_proxy_once(api)
        return _ClusterApi(api, as_client(api).with_field_manager(FIELD_MANAGER), key)

    def _reach(self, server: str) -> str:
        """``server`` as this host reaches it: an emulated datacenter's address
        at its loopback image."""
        url = urlsplit(server)
        if self._network is None or not url.hostname:
            return server
        try:
            ipaddress.ip_address(url.hostname)
        except ValueError:
            return server  # a name: reached as it is
        image = self._network.image(url.hostname)
        netloc = f"{image}:{url.port}" if url.port else image
        return urlunsplit(url._replace(netloc=netloc))

    async def _switch(self, made: _ClusterApi | None, error: str | None) -> None:
        """Move the node side to ``made`` (None: the management API, or — with
        ``error`` — nothing until kubelet.conf's files change)."""
        old, retired = self._cluster, self._retired
        self._retired = [old] if old is not None else []
        self._cluster, self._unavailable = made, error
        self.generation += 1
        self._informers = {}
        self._changed.set()  # wakes the node-side watches
        self._changed = asyncio.Event()
        for done in retired:  # retired a change ago: wound down by now
            await _close(done)
        if made is not None:
            log.info("node-side calls go to the cluster's API",
                     server=made.api_client.configuration.host)
        elif error == AWAITING_KUBELET_CONF:
            log.info("node-side calls wait for kubelet.conf (kubeadm writes it)",
                     path=kubeadm.KUBELET_CONF)
        elif error is not None:
            log.warning("the cluster's API named by kubelet.conf cannot be used",
                        path=kubeadm.KUBELET_CONF, error=error)
        else:
            log.info("node-side calls go to the management API")
        await self._hold_storage_classes()

    async def wait_for_change(self, generation: int, clock: Clock, every: float) -> None:
        """Return once the node side moved past ``generation``: at once when
        another call's look at kubelet.conf moved it, else kubelet.conf is
        looked at every ``every`` seconds."""
        while True:
            with contextlib.suppress(OSError, HostError):
                await self.refresh()
            if self.generation != generation:
                return
            await wait_event(clock, self._changed, every)

    def set_informer(self, slot: str, informer: SharedInformer) -> None:
        """The informer of the node-side watch ``slot`` (``pods``, ``volumes``)."""
        self._informers[slot] = informer

    async def close(self) -> None:
        """Stop the node side's caches and close the cluster's clients (not the
        management client, which the caller made)."""
        if self._storage_classes is not None:
            await self._storage_classes[1].release()
            self._storage_classes = None
        for api in [*self._retired, *([self._cluster] if self._cluster else [])]:
            await _close(api)
        self._retired, self._cluster = [], None

    async def _read(self, informer: SharedInformer | None, client: Client, resource: Resource,
                    namespace: str | None, name: str) -> dict[str, Any] | None:
        """Object ``namespace/name`` (a copy) from ``informer`` once it has listed
        (None: gone, or outside its selector); a live GET before."""
        if informer is not None and informer.has_synced:
            found = informer.get(ObjectKey(namespace or "", name))
            return copy.deepcopy(found) if found is not None else None
        return await client.get(resource, namespace, name, live=True)

    # --- LCMMachine (the management API) ------------------------------------------------

    def lcm_source(self, namespace: str, name: str, clock: Clock) -> KubeSource:
        """List+watch of LCMMachine ``namespace/name`` alone (field selector
        ``metadata.name``, all a host identity may watch); its informer
        answers ``get_lcm_machine`` once it has listed."""
        source = KubeSource(self.api_client, LCMMACHINES, namespace=namespace,
                            field_selector=f"metadata.name={name}", clock=clock)
        self._lcm = source.informer
        return source

    async def get_lcm_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The LCMMachine (a copy) from the agent's watch of it once it has
        listed (None: gone); live before."""
        return await self._read(self._lcm, self.client, LCMMACHINES, namespace, name)

    async def patch_lcm_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch ``status`` into the LCMMachine's status subresource."""
        _offer(self._lcm, await self.client.patch(LCMMACHINES, namespace, name,
                                                  {"status": status}, status=True))

    # --- Node (the node side) -----------------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        return await (await self.node_client()).get(NODES, None, name, live=True)

    async def create_node(self, body: Any) -> dict[str, Any] | None:
        """Create the Node; None when it exists already (409)."""
        client = await self.node_client()
        try:
            return await client.create(NODES, body)
        except AlreadyExists:
            return None

    async def patch_node_status(self, name: str, status: dict[str, Any]) -> None:
        await (await self.node_client()).patch(NODES, None, name, {"status": status},
                                               status=True)

    async def is_unschedulable(self, node: str) -> bool | None:
        obj = await self.get_node(node)
        if obj is None:
            return None
        return bool((obj.get("spec") or {}).get("unschedulable"))

    async def set_unschedulable(self, node: str, value: bool) -> None:
        await (await self.node_client()).patch(NODES, None, node,
                                               {"spec": {"unschedulable": value}})

    # --- Pods (the node side) -----------------------------------------------------------

    async def node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to ``node`` (field selector ``spec.nodeName``), all
        namespaces: copies from the node's pod watch once it has listed, live
        before."""
        client = await self.node_client()
        informer = self._informers.get("pods")
        if informer is not None and informer.has_synced:
            return [copy.deepcopy(p) for p in informer.list()]
        return await client.list(PODS, fields={"spec.nodeName": node}, live=True)

    def pod_source(self, node: str, clock: Clock) -> KubeSource | NodeSource:
        """List+watch of the pods bound to ``node`` (field selector
        ``spec.nodeName``) on the node side's API; its informer answers
        ``node_pods`` once it has listed."""
        return self._node_source(PODS, f"spec.nodeName={node}", clock, "pods")

    def _node_source(self, resource: Resource, selector: str, clock: Clock,
                     slot: str) -> KubeSource | NodeSource:
        if self._host is None:  # always the management API: a plain watch
            source = KubeSource(self.api_client, resource, field_selector=selector, clock=clock)
            self._informers[slot] = source.informer
            return source
        return NodeSource(self, resource, selector, clock, slot)

    async def patch_pod_status(self, namespace: str, name: str,
                               status: dict[str, Any]) -> bool:
        """Merge-patch ``status`` into the pod's status subresource; False when
        the pod is gone (404)."""
        client = await self.node_client()
        try:
            out = await client.patch(PODS, namespace, name, {"status": status}, status=True)
        except NotFound:
            return False
        _offer(self._informers.get("pods"), out)
        return True

    # --- Lease (the node side) ----------------------------------------------------------

    async def renew_lease(
        self, node: str, node_uid: str | None, duration: int, now: datetime
    ) -> bool:
        """Create or renew Lease ``kube-node-lease/<node>`` held by the node;
        False when it did not exist (made now)."""
        client = await self.node_client()
        stamp = micro_time(now)
        try:
            await client.patch(
                LEASES, LEASE_NAMESPACE, node,
                {"spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                          "renewTime": stamp}})
            return True
        except NotFound:
            pass
        metadata: dict[str, Any] = {"name": node, "namespace": LEASE_NAMESPACE}
        if node_uid:
            metadata["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ]
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {"holderIdentity": node, "leaseDurationSeconds": duration,
                     "acquireTime": stamp, "renewTime": stamp},
        }
        try:
            await client.create(LEASES, body)
        except AlreadyExists:
            pass  # created meanwhile: the next renewal patches it
        return False

    # --- Volumes and StorageClasses (the node side) -------------------------------------

    def volume_source(self, node: str, clock: Clock) -> KubeSource | NodeSource:
        """List+watch of the Volumes of ``node`` (field selector ``spec.nodeName``)
        on the node side's API; its informer answers ``get_volume`` once it has
        listed."""
        return self._node_source(VOLUMES, f"spec.nodeName={node}", clock, "volumes")

    async def get_volume(self, name: str) -> dict[str, Any] | None:
        """Volume ``name`` (a copy) from the node's Volume watch once it has
        listed (None: not a Volume of this node, or gone); live before."""
        client = await self.node_client()
        return await self._read(self._informers.get("volumes"), client, VOLUMES, None, name)

    async def annotate_volume(self, name: str, annotations: dict[str, str]) -> None:
        """Merge-patch ``annotations`` into the Volume's metadata."""
        client = await self.node_client()
        _offer(self._informers.get("volumes"), await client.patch(
            VOLUMES, None, name, {"metadata": {"annotations": annotations}}))

    @contextlib.asynccontextmanager
    async def storage_class_cache(self) -> AsyncIterator[None]:
        """While open, ``get_storage_class`` answers from a StorageClass informer
        of the node side's API (once it has listed; moved with the node side)."""
        self._storage_classes_open += 1
        try:
            with contextlib.suppress(ClusterUnavailable, OSError, HostError):
                await self.refresh()
            await self._hold_storage_classes()
            yield
        finally:
            self._storage_classes_open -= 1
            if not self._storage_classes_open and self._storage_classes is not None:
                held, self._storage_classes = self._storage_classes, None
                await held[1].release()

    async def _hold_storage_classes(self) -> None:
        """While the cache is open, hold the StorageClass informer of the node
        side's current Client (releasing one of another)."""
        client = None
        if self._storage_classes_open and self._unavailable is None:
            client = self._cluster.client if self._cluster is not None else self.client
        held = self._storage_classes
        if held is not None and held[0] is client:
            return
        self._storage_classes = None
        if held is not None:
            await held[1].release()
        if client is not None:
            informer = client.informer(STORAGE_CLASSES)
            informer.acquire()
            self._storage_classes = (client, informer)

    async def get_storage_class(self, name: str) -> dict[str, Any] | None:
        return await (await self.node_client()).get(STORAGE_CLASSES, None, name)


async def _close(api: _ClusterApi) -> None:
    """Stop a retired cluster client's informers and close its session."""
    for informer in api.client.informers.all():
        with contextlib.suppress(Exception):
            await informer.stop()
    await api.api_client.close()
