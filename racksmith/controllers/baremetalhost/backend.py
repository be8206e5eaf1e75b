"""The provisioner as a source of BareMetalHost keys.

Owns :class:`BackendSource`: when the provisioner can say which hosts
changed on its side (:class:`~racksmith.provisioner.base.HostChanges`: the
Ironic provisioner's shared node listing), those hosts are queued at once,
the way an informer queues a changed object. Without it a host waiting on
the backend is looked at again only when its own requeue comes round —
behind every other host in the queue (at 1,000 hosts, Ironic ran minutes
ahead of the BareMetalHosts). The timed requeues stay as the safety net:
this source only makes the wake-ups earlier, never fewer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from racksmith.provisioner.base import HostChanges
from racksmith.runtime.keys import ObjectKey


class BackendSource:
    """Keys of the hosts ``feed`` reports changed (in ``namespace``, or all).

    A hint source: it has no initial list, so it counts as synced at once
    (the host informer's list queues every host at start)."""

    def __init__(self, feed: HostChanges, namespace: str | None = None) -> None:
        self.feed = feed
        self.namespace = namespace

    @property
    def has_synced(self) -> bool:
        return True

    async def keys(self) -> AsyncIterator[ObjectKey]:
        async for namespace, name in self.feed.host_changes():
            if self.namespace is None or namespace == self.namespace:
                yield ObjectKey(namespace, name)
