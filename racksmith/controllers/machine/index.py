"""Which Machines an event about another object concerns: the mappers.

Owns ``MachineKeys``: mappers over indexes of the shared Machine informer
(no memory of their own, so a restarted process maps as the old one did).
Nodes map to the Machines of their name; Clusters to the Machines of their
namespace that join them (``spec.clusterName``); ClusterReleases to the
Machines that may render them (pinned by the release annotation, of a
Cluster that runs it, or whose LCMMachine names it); BareMetalHosts to
their consumer, the Machine whose ``status.hostRef`` names them (a deleted
Machine waits for its released host to be deprovisioned, when the host no
longer names it) and every Machine of the namespace still waiting for a
host (no ``status.hostRef``, not being deleted). Mappers never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from racksmith.controllers.machine.names import RELEASE_ANNOTATION
from racksmith.controllers.machine.selection import may_be_candidate
from racksmith.runtime.client import Client
from racksmith.runtime.informer import field_index, field_index_name
from racksmith.runtime.keys import Mapper, ObjectKey, key_of
from racksmith.runtime.resources import CLUSTERS, LCMMACHINES, MACHINES

NAME_INDEX = "metadata.name"
CLUSTER_INDEX = field_index_name("spec.clusterName")
HOST_INDEX = field_index_name("status.hostRef.name")
PINNED_INDEX = "pinned-release"
WAITING_INDEX = "waiting-for-host"
LCM_RELEASE_INDEX = field_index_name("spec.release")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> list[str]:
    name = _map(obj.get("metadata")).get("name")
    return [str(name)] if name else []


def _pinned(obj: Mapping[str, Any]) -> list[str]:
    pinned = _map(_map(obj.get("metadata")).get("annotations")).get(RELEASE_ANNOTATION)
    return [str(pinned)] if pinned else []


def _waiting(obj: Mapping[str, Any]) -> list[str]:
    meta = _map(obj.get("metadata"))
    if meta.get("deletionTimestamp") or _map(_map(obj.get("status")).get("hostRef")).get(
            "name"):
        return []
    return ["yes"]


class MachineKeys:
    """The Machine controller's mappers (see the module docstring)."""

    def __init__(self, client: Client, namespace: str | None = None) -> None:
        self.client = client
        self.namespace = namespace
        for name, func in ((NAME_INDEX, _name), (CLUSTER_INDEX, field_index("spec.clusterName")),
                           (HOST_INDEX, field_index("status.hostRef.name")),
                           (PINNED_INDEX, _pinned), (WAITING_INDEX, _waiting)):
            client.add_index(MACHINES, name, func, namespace)
        client.add_index(LCMMACHINES, LCM_RELEASE_INDEX, field_index("spec.release"), namespace)

    def _machines(self, index: str, value: str, namespace: str | None = None) -> set[ObjectKey]:
        return {key_of(m) for m in self.client.indexed(MACHINES, index, value,
                                                         namespace or self.namespace)
                if namespace is None or key_of(m).namespace == namespace}

    def node_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Node ``m`` concerns every Machine named ``m``."""
        return sorted(self._machines(NAME_INDEX, key_of(obj).name))

    def node_mapper(self, cluster: ObjectKey | None, _client: Client) -> Mapper:
        """Nodes of ``cluster`` → its Machine of the Node's name (None: one
        API holds every cluster's Nodes, every Machine of that name)."""
        if cluster is None:
            return self.node_keys

        def mapper(obj: Mapping[str, Any]) -> list[ObjectKey]:
            name = key_of(obj).name
            return [key for key in self._machines(CLUSTER_INDEX, cluster.name,
                                                  cluster.namespace) if key.name == name]
        return mapper

    def _peers(self, machine: Mapping[str, Any]) -> set[ObjectKey]:
        """The masters of ``machine``'s cluster when it is a master, else none."""
        spec = _map(machine.get("spec"))
        if "master" not in (spec.get("roles") or []) or not spec.get("clusterName"):
            return set()
        ns = key_of(machine).namespace
        return {key_of(m) for m in self.client.indexed(
            MACHINES, CLUSTER_INDEX, str(spec["clusterName"]), ns or self.namespace)
            if key_of(m).namespace == ns and "master" in (_map(m.get("spec")).get("roles")
                                                         or [])}

    def machine_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Machine concerns itself and, while a master is being deleted,
        every master of its cluster."""
        keys = {key_of(obj)}
        if _map(obj.get("metadata")).get("deletionTimestamp"):
            keys |= self._peers(obj)
        return sorted(keys)

    def ipam_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """An IpamHost concerns its Machine (same namespace and name) and,
        when that is a master, every master of its cluster."""
        ns, name = key_of(obj)
        keys = {ObjectKey(ns, name)}
        for machine in self.client.indexed(MACHINES, NAME_INDEX, name, ns or self.namespace):
            if key_of(machine).namespace == ns:
                keys |= self._peers(machine)
        return sorted(keys)

    def cluster_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Cluster concerns the Machines of its namespace that join it."""
        ns, name = key_of(obj)
        return sorted(self._machines(CLUSTER_INDEX, name, ns))

    def release_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A ClusterRelease concerns the Machines that may render it."""
        name = key_of(obj).name
        keys = self._machines(PINNED_INDEX, name)
        for cluster in self.client.informer(CLUSTERS, self.namespace).list(None):
            if _map(cluster.get("spec")).get("release") == name:
                ns, cluster_name = key_of(cluster)
                keys |= self._machines(CLUSTER_INDEX, cluster_name, ns)
        for lcm in self.client.indexed(LCMMACHINES, LCM_RELEASE_INDEX, name, self.namespace):
            keys |= {k for k in self._machines(NAME_INDEX, key_of(lcm).name)
                     if k.namespace == key_of(lcm).namespace}
        return sorted(keys)

    def host_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A BareMetalHost concerns its consumer, the Machine whose hostRef
        names it and, when it is unclaimed and ``available`` (it may have just
        become a candidate), every Machine of its namespace still waiting for
        a host. A host registering, inspecting or held by another Machine
        wakes no waiting Machine: it cannot be claimed (a fleet's
        registration would otherwise reconcile every waiting Machine on every
        host status write)."""
        ns, name = key_of(obj)
        keys = self._machines(HOST_INDEX, name, ns)
        ref = _map(obj.get("spec")).get("consumerRef")
        if isinstance(ref, Mapping) and ref.get("kind") == "Machine" and ref.get("name"):
            keys.add(ObjectKey(str(ref.get("namespace") or ns), str(ref["name"])))
        elif may_be_candidate(obj):
            keys |= self._machines(WAITING_INDEX, "yes", ns)
        return sorted(keys)
