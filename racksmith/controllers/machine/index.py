"""Which Machines an event about another object concerns: the mappers' memory.

Owns ``MachineIndex``: per Machine key, the cluster and release it was last
reconciled with and whether it waits for a host. The sources map Nodes (by
name), Clusters, ClusterReleases and BareMetalHosts (their consumer, the
Machine whose ``status.hostRef`` names them — a deleted Machine waits for
its released host to be deprovisioned, when the host no longer names it —
and every Machine of the namespace still waiting for a host) to Machine
keys through it. Filled in by the reconciler; mappers never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from racksmith.runtime.keys import ObjectKey, key_of


@dataclass(frozen=True)
class _Entry:
    cluster: str
    release: str | None
    waiting_for_host: bool
    host: str | None = None
    """The BareMetalHost named by the Machine's ``status.hostRef``."""


class MachineIndex:
    """What the mappers know about each Machine (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[ObjectKey, _Entry] = {}

    def record(self, key: ObjectKey, cluster: str, release: str | None,
               waiting_for_host: bool, host: str | None = None) -> None:
        self._entries[key] = _Entry(cluster, release, waiting_for_host, host)

    def forget(self, key: ObjectKey) -> None:
        self._entries.pop(key, None)

    def node_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Node ``m`` concerns every Machine named ``m``."""
        name = key_of(obj).name
        return sorted(k for k in self._entries if k.name == name)

    def cluster_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Cluster concerns the Machines of its namespace that join it."""
        ns, name = key_of(obj)
        return sorted(k for k, e in self._entries.items() if k.namespace == ns
                      and e.cluster == name)

    def release_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A ClusterRelease concerns the Machines whose cluster runs it."""
        name = key_of(obj).name
        return sorted(k for k, e in self._entries.items() if e.release == name)

    def host_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A BareMetalHost concerns its consumer, the Machine whose hostRef
        names it and, in its namespace, every Machine still waiting for a host
        (it may have become available)."""
        ns, name = key_of(obj)
        keys = {k for k, e in self._entries.items() if k.namespace == ns
                and (e.waiting_for_host or e.host == name)}
        ref = (obj.get("spec") or {}).get("consumerRef")
        if isinstance(ref, Mapping) and ref.get("kind") == "Machine" and ref.get("name"):
            keys.add(ObjectKey(str(ref.get("namespace") or ns), str(ref["name"])))
        return sorted(keys)
