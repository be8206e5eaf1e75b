"""Sources of keys: the ``Source`` protocol and ``KubeSource``, a source over
a private :class:`~racksmith.runtime.informer.SharedInformer` (list+watch of
one resource over the Kubernetes REST protocol).

Controllers get their sources from the shared informers of a
:class:`~racksmith.runtime.client.Client` (``client.source(...)``), so each
resource is listed and watched once per process; ``KubeSource`` is the same
thing with an informer of its own (a selector the shared one does not have,
or a test of the protocol). Keys come from a ``Mapper`` (default: the
object's own key), so the same class serves "secondary" watches that enqueue
owners.

Events are hints, never state: the reconciler reads what it needs (from the
cache the same informers keep).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from kubernetes_asyncio.client import ApiClient

from racksmith.clock import Clock
from racksmith.runtime.informer import InformerSource, SharedInformer
from racksmith.runtime.keys import Mapper, ObjectKey, self_keys
from racksmith.runtime.queue import Backoff
from racksmith.runtime.resource import Resource


class Source(Protocol):
    """Something that yields the keys a controller must reconcile.

    ``keys()`` runs until cancelled (a finite fake may end; the controller
    then simply stops reading it). It may yield a key many times; the work
    queue de-duplicates. ``has_synced`` turns True once the initial state has
    been emitted (the first complete list) and stays True for the rest of that
    ``keys()`` iteration; a new iteration (the controller run again, e.g. when
    leadership comes back) starts unsynced, so readiness waits for its list.
    """

    @property
    def has_synced(self) -> bool: ...

    def keys(self) -> AsyncIterator[ObjectKey]: ...


class KubeSource(InformerSource):
    """List+watch of one resource with an informer of its own; see the module doc."""

    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        mapper: Mapper = self_keys,
        clock: Clock | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 60.0,
        backoff: Backoff[str] | None = None,
        logger: Any = None,
    ) -> None:
        informer = SharedInformer(
            api_client, resource, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector, clock=clock, page_size=page_size,
            watch_timeout_seconds=watch_timeout_seconds,
            request_timeout_seconds=request_timeout_seconds, backoff=backoff, logger=logger)
        super().__init__(informer, mapper)


class StaticSource:
    """A source of fixed keys: yields each once and is synced (a controller's
    singleton work, e.g. a schedule that requeues itself)."""

    def __init__(self, *keys: ObjectKey) -> None:
        self._keys = keys
        self._synced = False

    @property
    def has_synced(self) -> bool:
        return self._synced

    def keys(self) -> AsyncIterator[ObjectKey]:
        self._synced = False
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ObjectKey]:
        for key in self._keys:
            yield key
        self._synced = True


class ChannelSource:
    """Keys pushed by code (controller-runtime's ``source.Channel``): e.g. a
    cluster whose reachability changed. Synced from the start; keys pushed
    while no controller reads are kept (once each) until one does."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[ObjectKey] = asyncio.Queue()

    @property
    def has_synced(self) -> bool:
        return True

    def push(self, key: ObjectKey) -> None:
        self._queue.put_nowait(key)

    def keys(self) -> AsyncIterator[ObjectKey]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ObjectKey]:
        while True:
            yield await self._queue.get()


__all__ = ["ChannelSource", "KubeSource", "Resource", "Source", "StaticSource"]
