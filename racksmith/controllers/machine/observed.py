"""What one Machine reconcile sees: the snapshot the planner decides from.

Owns ``Observed`` (the Machine and everything it depends on, as read at the
start of a reconcile) and the small read-only views of the core objects
(``NodeView``, ``PodView``), built from raw API dicts. Pure: the reconciler
fills it in, ``plan.decide`` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.machine.timings import MachineTimings
from racksmith.controllers.machine.userdata import AgentAccess
from racksmith.controlplane.vrrp import Peer
from racksmith.kinds.cluster import Cluster, ClusterRelease, Machine
from racksmith.kinds.ipam import IpamHost
from racksmith.kinds.lcm import LCMMachine
from racksmith.kinds.metal import BareMetalHost, Image
from racksmith.planners.drain import MIRROR_ANNOTATION, is_evictable, owner_kinds


@dataclass(frozen=True)
class NodeView:
    """The parts of a core v1 Node the controller acts on; ``raw`` is the
    object as read (its resourceVersion makes a write optimistic)."""

    name: str
    ready: bool
    unschedulable: bool
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> NodeView:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        conditions = (raw.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in conditions if isinstance(c, Mapping))
        return cls(
            name=str(meta.get("name") or ""),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable")),
            labels=dict(meta.get("labels") or {}),
            taints=tuple(t for t in spec.get("taints") or [] if isinstance(t, Mapping)),
            raw=raw,
        )


@dataclass(frozen=True)
class PodView:
    """A pod bound to the Node, as the drain sees it."""

    namespace: str
    name: str
    daemonset: bool = False
    mirror: bool = False
    terminating: bool = False

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> PodView:
        meta = raw.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            daemonset="DaemonSet" in owner_kinds(raw),
            mirror=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
            terminating=bool(meta.get("deletionTimestamp")),
        )

    @property
    def evictable(self) -> bool:
        """The drain evicts it (``planners.drain``, the one rule)."""
        return is_evictable(("DaemonSet",) if self.daemonset else (),
                            {MIRROR_ANNOTATION: ""} if self.mirror else {}, self.terminating)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile of a Machine decides from.

    ``hosts``: the BareMetalHosts of the Machine's namespace. ``pods``: the
    pods bound to Node ``m`` (only read while the Machine is being deleted).
    ``user_data``: the current ``userData`` of Secret ``m-user-data`` (None:
    no such Secret). ``agent``: the agent's access, or why it is unknown.
    ``agent_token``: the token in ``user_data`` when it is bound to ``lcm``
    and fresh (``userdata.token_fresh``), else None.
    ``timings``: how long to wait before looking again (the controller's).
    ``pki_files``: for a control-plane (master) machine, the cluster's
    certificate authorities as kubeadm's files (path under
    ``/etc/kubernetes/pki`` → PEM), or why they cannot be had; None for
    any other machine (or while deleting).
    ``init_node``: for a control-plane machine, the node of its cluster's
    first control-plane Machine (:func:`init_machine`), which initialises the
    cluster while the others join.
    ``vip_peers``: for a control-plane machine of a cluster whose API VIP
    Racksmith holds, every control-plane machine of the cluster with a
    control-plane address (``planners.apivip``), by name.
    """

    machine: Machine
    cluster: Cluster | None = None
    release: ClusterRelease | None = None
    hosts: tuple[BareMetalHost, ...] = ()
    ipamhost: IpamHost | None = None
    lcm: LCMMachine | None = None
    node: NodeView | None = None
    pods: tuple[PodView, ...] = ()
    user_data: str | None = field(default=None, repr=False)
    agent: AgentAccess | str = "not read"
    agent_token: str | None = field(default=None, repr=False)
    default_image: Image | None = None
    timings: MachineTimings = field(default_factory=MachineTimings)
    pki_files: dict[str, bytes] | str | None = field(default=None, repr=False)
    init_node: str | None = None
    vip_peers: tuple[Peer, ...] = ()


def init_machine(machines: list[dict[str, Any]], cluster: str) -> str | None:
    """The cluster's init machine, as Cluster API's control plane has one: of
    the Machines (raw, one namespace) joining ``cluster`` with the master
    role and not being deleted, the oldest (then by name). Stable while it
    lives: a Machine made later is younger. When it goes, the next oldest is
    named, whose kubeadm finds its control plane in place and changes
    nothing."""
    best: tuple[str, str] | None = None
    for raw in machines:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        if spec.get("clusterName") != cluster or meta.get("deletionTimestamp"):
            continue
        if "master" not in (spec.get("roles") or []):
            continue
        key = (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
        if best is None or key < best:
            best = key
    return best[1] if best is not None else None
