"""Where a managed cluster's node-side objects live, for the controllers
that work inside clusters (MOSK's management/managed split).

Owns the :class:`ClusterPlane` seam and its two topologies:

* :class:`RemotePlane` — each Cluster serves its own API (its control plane
  on its own hosts, ``racksmith.controlplane``); Nodes, Leases, pods,
  PodDisruptionBudgets, PersistentVolumes, Volumes, the node and cluster
  maintenance requests and the workload locks live there. A controller's
  ``client(cluster)`` is its own identity in that cluster (the certificate
  ``<cluster>-racksmith-<controller>``, never the admin kubeconfig), from
  :class:`~racksmith.runtime.clusters.ClusterClients`: one Client per
  cluster and identity, with that cluster's shared informers. ``source``
  watches a resource in every cluster and maps each object, with the key of
  the cluster it came from, to the controller's keys: the plane follows the
  Clusters of the management API, starts a cluster's watches once its
  access can be read and stops them when the Cluster goes.
* :class:`SharedPlane` — one API serves the management objects and every
  cluster's node-side objects (a site whose clusters' endpoints Racksmith
  is not given, and the single-server integration tests); ``client`` is
  the management client, whatever the cluster.

``client(cluster)`` answers None while a cluster cannot be worked in (its
endpoint, CA or identity not readable yet, or its last probe unreachable):
only that cluster's work waits, the caller requeues it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.runtime.client import Client
from racksmith.runtime.clusters import ClusterAccess, ClusterClients
from racksmith.runtime.errors import ApiError
from racksmith.runtime.informer import InformerSource
from racksmith.runtime.keys import Mapper, ObjectKey, key_of
from racksmith.runtime.resource import Resource
from racksmith.runtime.source import Source

ClusterMapper = Callable[[ObjectKey | None, Client], Mapper]
"""The mapper of a cluster's objects to the controller's keys, given the
cluster's key (None in a SharedPlane, where one API serves every cluster)
and the controller's Client there (whose indexes a mapper may read); it may
be an ``OnChange`` filter."""

AccessOf = Callable[[ObjectKey, str], Awaitable[ClusterAccess | None]]
"""Reads how identity ``name`` reaches cluster ``key`` (None: not yet)."""


class ClusterPlane(Protocol):
    """A controller's way into the managed clusters (see the module docstring)."""

    own_apis: bool
    """Whether each cluster serves its own API (its nodes then need an
    identity of their own there)."""

    async def client(self, cluster: ObjectKey) -> Client | None:
        """The controller's Client inside ``cluster``; None: not now."""
        ...

    def source(self, resource: Resource, mapper: ClusterMapper, *,
               namespace: str | None = None) -> Source:
        """Keys from ``resource`` (in ``namespace``; None: all) in every
        cluster, through ``mapper``."""
        ...

    def clusters(self) -> list[ObjectKey]:
        """The clusters whose watches run (SharedPlane: none apart)."""
        ...

    async def clients(self) -> list[tuple[ObjectKey | None, Client]]:
        """A Client per cluster that can be worked in now, for work over all
        of them (a sweep); a SharedPlane's one API has the key None."""
        ...


class ClusterUnavailable(ApiError):
    """A cluster's API cannot be worked in now (not reachable, or its access
    not readable yet): the work of that cluster is retried later."""

    def __init__(self, cluster: ObjectKey) -> None:
        super().__init__(503, "ServiceUnavailable",
                         f"the API of cluster {cluster} cannot be reached now")


class SharedPlane:
    """Every cluster's node-side objects in the management API."""

    own_apis = False

    def __init__(self, client: Client) -> None:
        self.management = client

    async def client(self, cluster: ObjectKey) -> Client | None:
        return self.management

    def source(self, resource: Resource, mapper: ClusterMapper, *,
               namespace: str | None = None) -> Source:
        return self.management.source(resource, namespace=namespace,
                                      mapper=mapper(None, self.management))

    def clusters(self) -> list[ObjectKey]:
        return []

    async def clients(self) -> list[tuple[ObjectKey | None, Client]]:
        return [(None, self.management)]


@dataclass
class _Watch:
    resource: Resource
    mapper: ClusterMapper
    queue: asyncio.Queue[ObjectKey]
    namespace: str | None = None


class RemotePlane:
    """Each cluster's node-side objects in that cluster's own API."""

    own_apis = True

    def __init__(self, management: Client, clusters: ClusterClients, identity: str,
                 access_of: AccessOf, clusters_resource: Resource, *,
                 clock: Clock | None = None, retry: float = 5.0, recheck: float = 60.0,
                 logger: Any = None) -> None:
        self.management = management
        self.tracker = clusters
        self.identity = identity
        self._access_of = access_of
        self._clusters_resource = clusters_resource
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.retry = retry
        self.recheck = recheck
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.runtime.planes").bind(identity=identity)
        self._watches: list[_Watch] = []
        self._running: dict[ObjectKey, list[asyncio.Task[None]]] = {}
        self._on: dict[ObjectKey, Client] = {}
        self._follower: asyncio.Task[None] | None = None
        self._users = 0

    # --- clients ----------------------------------------------------------------

    async def client(self, cluster: ObjectKey) -> Client | None:
        verdict = self.tracker.reachability(cluster)
        if verdict.reachable is False:
            return None
        access = await self._access_of(cluster, self.identity)
        if access is None:
            return None
        return self.tracker.client(cluster, access, field_manager=self.identity)

    def clusters(self) -> list[ObjectKey]:
        return sorted(self._running)

    async def clients(self) -> list[tuple[ObjectKey | None, Client]]:
        out: list[tuple[ObjectKey | None, Client]] = []
        for key in self.clusters():
            client = await self.client(key)
            if client is not None:
                out.append((key, client))
        return out

    # --- sources ----------------------------------------------------------------

    def source(self, resource: Resource, mapper: ClusterMapper, *,
               namespace: str | None = None) -> Source:
        watch = _Watch(resource, mapper, asyncio.Queue(), namespace)
        self._watches.append(watch)
        return _PlaneSource(self, watch)

    async def _follow(self) -> None:
        """Start and stop each cluster's watches as Clusters come and go,
        retry those whose access could not be read yet (every ``retry``
        seconds) and, every ``recheck`` seconds or on a Cluster's change,
        move a cluster's watches to its new Client when its access changed
        (a renewed identity, a moved endpoint)."""
        informer = self.management.informer(self._clusters_resource)
        wake = asyncio.Event()

        def handler(_old: Any, _new: Any) -> None:
            wake.set()

        informer.subscribe(handler, wake.set)
        informer.acquire()
        try:
            while True:
                wake.clear()
                present = {key_of(obj) for obj in informer.list(None)} \
                    if informer.has_synced else set(self._running)
                for key in sorted(set(self._running) - present):
                    await self._stop(key)
                for key in sorted(set(self._running) & present):
                    if await self._moved(key):
                        await self._stop(key)
                pending = False
                for key in sorted(present - set(self._running)):
                    if not await self._start(key):
                        pending = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(),
                                           self.retry if pending else self.recheck)
        finally:
            informer.unsubscribe(handler, wake.set)
            await informer.release()
            for key in list(self._running):
                await self._stop(key)

    async def _start(self, key: ObjectKey) -> bool:
        try:
            client = await self.client(key)
        except Exception:  # a cluster's access unreadable now: retried
            self.log.warning("cluster access not readable", cluster=str(key))
            return False
        if client is None:
            return False
        tasks = [asyncio.get_running_loop().create_task(
            _pump(InformerSource(client.informer(w.resource, w.namespace),
                                 w.mapper(key, client)), w.queue),
            name=f"plane-{self.identity}-{key.namespace}/{key.name}-{w.resource.plural}")
            for w in self._watches]
        self._running[key] = tasks
        self._on[key] = client
        self.log.info("watching cluster", cluster=str(key), resources=len(tasks))
        return True

    async def _moved(self, key: ObjectKey) -> bool:
        """Is there a new Client for ``key`` (its watches run on an old one)?"""
        try:
            client = await self.client(key)
        except Exception:  # unreadable now: keep what runs
            return False
        return client is not None and client is not self._on.get(key)

    async def _stop(self, key: ObjectKey) -> None:
        self._on.pop(key, None)
        for task in self._running.pop(key, []):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _acquire(self) -> None:
        self._users += 1
        if self._follower is None or self._follower.done():
            self._follower = asyncio.get_running_loop().create_task(
                self._follow(), name=f"plane-{self.identity}")

    async def _release(self) -> None:
        self._users -= 1
        if self._users == 0 and self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
            self._follower = None


def the_cluster(cluster: ObjectKey) -> Mapper:
    """A mapper naming ``cluster`` for every object (a controller keyed by
    Cluster, or by a namesake of it)."""
    def mapper(_obj: Mapping[str, Any]) -> Iterable[ObjectKey]:
        return (cluster,)
    return mapper


async def _pump(source: InformerSource, queue: asyncio.Queue[ObjectKey]) -> None:
    async for key in source.keys():
        queue.put_nowait(key)


class _PlaneSource:
    """One resource's keys from every cluster of a RemotePlane. Synced from
    the start: a cluster that joins later is a stream of events, as a
    ChannelSource's."""

    def __init__(self, plane: RemotePlane, watch: _Watch) -> None:
        self._plane = plane
        self._watch = watch

    @property
    def has_synced(self) -> bool:
        return True

    def keys(self) -> AsyncIterator[ObjectKey]:
        return self._keys()

    async def _keys(self) -> AsyncIterator[ObjectKey]:
        self._plane._acquire()
        try:
            while True:
                yield await self._watch.queue.get()
        finally:
            await self._plane._release()


def in_cluster_key(cluster: ObjectKey | None, name: str) -> ObjectKey:
    """The key of cluster-scoped object ``name`` inside ``cluster``, for a
    controller whose objects live in every cluster (Volumes, PersistentVolumes):
    the cluster's ``namespace/name`` as the key's namespace. None (a
    SharedPlane's one API): the object's plain key."""
    return ObjectKey(f"{cluster.namespace}/{cluster.name}" if cluster is not None else "", name)


def split_key(key: ObjectKey) -> tuple[ObjectKey | None, str]:
    """The cluster and name of an :func:`in_cluster_key` key."""
    if "/" not in key.namespace:
        return None, key.name
    namespace, _, cluster = key.namespace.partition("/")
    return ObjectKey(namespace, cluster), key.name


def qualified(mapper: Mapper) -> ClusterMapper:
    """``mapper``'s keys of cluster-scoped objects, as :func:`in_cluster_key` keys."""
    def factory(cluster: ObjectKey | None, _client: Client) -> Mapper:
        if cluster is None:
            return mapper

        def mapped(obj: Mapping[str, Any]) -> Iterable[ObjectKey]:
            return [in_cluster_key(cluster, key.name) for key in mapper(obj)]
        return mapped
    return factory


__all__ = ["AccessOf", "ClusterMapper", "ClusterPlane", "ClusterUnavailable", "RemotePlane",
           "SharedPlane", "in_cluster_key", "qualified", "split_key", "the_cluster"]
