"""Which IpamHosts care about which objects, for the secondary watches.

Owns :class:`DependencyIndex`, filled by the IpamHost reconciler and read by
the mappers of the L2Template, Subnet, Machine and Cluster sources. Each
reconcile records what it read: an object and the ``metadata.generation``
it saw (the host needs waking only when the spec changes), an object it
waits on (``None``: wake on every event, e.g. a Subnet that was exhausted
or not yet validated, an L2Template whose confirmation annotation matters),
or every object of a kind in a namespace (template selection by labels or
default flag, subnets picked by label selector).

Races: while a host is being reconciled it is *in flight* and every event
of a kind it may read enqueues it, so an event that lands between a read
and :meth:`DependencyIndex.record` is never lost. A host not yet reconciled
is absent, but the IpamHosts' own initial list reconciles it anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from racksmith.runtime.keys import ObjectKey, key_of

Ref = tuple[str, str, str]
"""(kind, namespace, name) of an object a host depends on."""


@dataclass
class Dependencies:
    """What one reconcile of one host read."""

    objects: dict[Ref, int | None] = field(default_factory=dict)
    """Object → generation seen; None means wake on every event of it."""
    namespaces: set[tuple[str, str]] = field(default_factory=set)
    """(kind, namespace): wake on every event of that kind there."""

    def seen(self, kind: str, namespace: str, name: str, generation: int | None) -> None:
        ref = (kind, namespace, name)
        if ref in self.objects and self.objects[ref] is None:
            return
        self.objects[ref] = generation

    def waits_on(self, kind: str, namespace: str, name: str) -> None:
        self.objects[(kind, namespace, name)] = None

    def any_of(self, kind: str, namespace: str) -> None:
        self.namespaces.add((kind, namespace))


class DependencyIndex:
    """IpamHost → what it depends on, and the mappers built on it."""

    def __init__(self) -> None:
        self._hosts: dict[ObjectKey, Dependencies] = {}
        self._in_flight: set[ObjectKey] = set()

    def begin(self, key: ObjectKey) -> None:
        """``key`` is being reconciled: every dependency event wakes it."""
        self._in_flight.add(key)

    def record(self, key: ObjectKey, deps: Dependencies) -> None:
        """The reconcile of ``key`` is over and read ``deps``."""
        self._hosts[key] = deps
        self._in_flight.discard(key)

    def forget(self, key: ObjectKey) -> None:
        self._hosts.pop(key, None)
        self._in_flight.discard(key)

    def host_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for IpamHost events: the host itself."""
        key = key_of(obj)
        return [key] if key.name else []

    def mapper(self, kind: str) -> Callable[[Mapping[str, Any]], list[ObjectKey]]:
        """Mapper for events of ``kind``: the hosts that must look again."""

        def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
            return self.affected(kind, obj)

        return keys

    def affected(self, kind: str, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """The hosts an event about ``obj`` (of ``kind``) concerns."""
        namespace, name = key_of(obj)
        generation = (obj.get("metadata") or {}).get("generation")
        out = set(self._in_flight)
        for host, deps in self._hosts.items():
            if (kind, namespace) in deps.namespaces:
                out.add(host)
                continue
            ref = (kind, namespace, name)
            if ref in deps.objects:
                seen = deps.objects[ref]
                if seen is None or seen != generation:
                    out.add(host)
        return sorted(out)
