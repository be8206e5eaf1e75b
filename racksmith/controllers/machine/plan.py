"""The Machine controller's planner: from what is observed, the one next step.

Owns the actions (plain data, one per kind of write), ``Step`` (an action
plus what the Machine's status should say) and ``decide``, which walks the
contracts' checklist ("The Machine controller" in
``docs/design/cluster-contracts.md``) and stops at the first thing that is
not as it should be. Pure: no I/O, no clock. The reconciler gathers
``Observed``, calls ``decide``, and the committer performs the action and
writes the status; the next reconcile decides again from a fresh read, so a
controller killed between any two writes converges and repeats nothing.

Phases: **Pending** until the claimed host carries the image (finding the
Cluster and release, claiming, rendering the network, the LCMMachine and
the user data), **Provisioning** until the host is provisioned,
**Deploying** until the agent reports the current generation Ready and the
Node is Ready, **Ready**; **Deleting** once deletion is requested;
**Failed** when the claimed host vanished.

The release pin (``release_to_render``): the LCMMachine renders from the
Machine's ``lcm.racksmith.io/release`` annotation if set; else, once the
machine has been deployed (``status.release`` set), from the LCMMachine's
current ``spec.release``; else from the Cluster's ``spec.release``. So a
deployed machine never moves by itself when the Cluster's release changes:
the LCM update flow moves it by writing the annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.addresses import control_plane_address, machine_addresses
from racksmith.controllers.machine.observed import NodeView, Observed, PodView
from racksmith.controllers.machine.selection import (
    candidates,
    claimed_host,
    describe_selector,
    state_of,
)
from racksmith.controllers.machine.userdata import AgentAccess, render_user_data
from racksmith.kinds.cluster import (
    CONTROL_PLANE_ENDPOINT_VALID,
    CONTROL_PLANE_QUORUM,
    ENDPOINT_WAITING,
    Cluster,
    Machine,
    MachineAddress,
    MachinePhase,
    Role,
)
from racksmith.kinds.common import (
    Condition,
    ConditionStatus,
    LocalObjectReference,
    ObjectReference,
)
from racksmith.kinds.hostannotations import profile as host_profile
from racksmith.kinds.ipam import IpamHostSpec, IpamHostState, NICMapping
from racksmith.kinds.lcm import LCMMachine, LCMMachinePhase, LCMMachineSpec
from racksmith.kinds.metal import BareMetalHost, Image
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.planners.apivip import VipWait, plan_api_vip
from racksmith.planners.release import plan_state_items
from racksmith.planners.roles import LABEL_PREFIX, NodeRoles, plan_node_roles
from racksmith.runtime.conditions import ConditionSpec, EventSpec, find


def endpoint_refusal(cluster: Cluster) -> Condition | None:
    """The Cluster's ``ControlPlaneEndpointValid`` condition when it refuses
    the endpoint (not while the endpoint is merely unknown yet), else None."""
    cond = find(cluster.status.conditions if cluster.status else [],
                CONTROL_PLANE_ENDPOINT_VALID)
    if cond is None or cond.status is not ConditionStatus.FALSE or \
            cond.reason == ENDPOINT_WAITING:
        return None
    return cond


# --- actions --------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Write nothing but the status; look again after ``seconds`` (None: on events)."""

    seconds: float | None = None


@dataclass(frozen=True)
class AddFinalizer:
    """Add the Machine finalizer (before anything is created for it)."""


@dataclass(frozen=True)
class ClaimHost:
    """Claim the first of ``candidates`` that is still free (replace with resourceVersion)."""

    candidates: tuple[str, ...]


@dataclass(frozen=True)
class EnsureIpamHost:
    """Create IpamHost ``m``, or set its ``machineRef`` and ``nicMACmap``."""

    spec: IpamHostSpec


@dataclass(frozen=True)
class WriteLCMMachine:
    """Create LCMMachine ``m``, or replace its spec (keeping ``paused``)."""

    spec: LCMMachineSpec


@dataclass(frozen=True)
class WriteUserData:
    """Create or replace Secret ``m-user-data``: the agent config with
    ``token``; None: a new token of the host's ServiceAccount, bound to that
    Secret (made first, empty, when missing), requested first.
    ``files``: a control-plane machine's PKI files (path → PEM)."""

    access: AgentAccess
    token: str | None = field(default=None, repr=False)
    files: dict[str, bytes] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ProvisionHost:
    """Set image, userData, profile and online on the claimed host, in one update."""

    host: str
    image: Image
    profile: str | None


@dataclass(frozen=True)
class SyncNodeRoles:
    """Replace the Node's labels and taints with these (role ones per the planner)."""

    labels: dict[str, str]
    taints: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class CordonNode:
    """Set ``spec.unschedulable`` on the Node."""


@dataclass(frozen=True)
class EvictPods:
    """Evict these pods through the Eviction API (429: a disruption budget refuses)."""

    pods: tuple[PodView, ...]


@dataclass(frozen=True)
class DeleteNode:
    """Delete Node ``m``."""


@dataclass(frozen=True)
class DeleteLCMMachine:
    """Delete LCMMachine ``m``."""


@dataclass(frozen=True)
class ReleaseHost:
    """Clear image, userData, consumerRef (and profile if we set it); online false."""

    host: str
    clear_profile: bool


@dataclass(frozen=True)
class DeleteIpamHost:
    """Delete IpamHost ``m`` (its finalizer releases the addresses)."""


@dataclass(frozen=True)
class DeleteUserData:
    """Delete Secret ``m-user-data``."""


@dataclass(frozen=True)
class RemoveFinalizer:
    """Everything is released: let the Machine go."""


Action = (
    Wait | AddFinalizer | ClaimHost | EnsureIpamHost | WriteLCMMachine | WriteUserData
    | ProvisionHost | SyncNodeRoles | CordonNode | EvictPods | DeleteNode | DeleteLCMMachine
    | ReleaseHost | DeleteIpamHost | DeleteUserData | RemoveFinalizer
)


@dataclass(frozen=True)
class ReadyFields:
    """Status fields set when the machine is Ready."""

    node_ref: ObjectReference
    addresses: tuple[MachineAddress, ...]
    release: str | None


@dataclass
class Step:
    """One decision: the action and what the status should say (None: keep)."""

    action: Action
    phase: MachinePhase
    conditions: list[ConditionSpec] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)
    host_ref: ObjectReference | None = None
    ready: ReadyFields | None = None


# --- the checklist ---------------------------------------------------------------


def release_to_render(machine: Machine, cluster: Cluster | None,
                      lcm: LCMMachine | None) -> str | None:
    """The ClusterRelease ``machine``'s LCMMachine renders from (the release pin).

    The Machine annotation ``lcm.racksmith.io/release`` if set (non-empty);
    else, once the machine has been deployed (``status.release`` set) and
    its LCMMachine exists, the LCMMachine's ``spec.release``; else the
    Cluster's ``spec.release`` (None: no Cluster). Pure.
    """
    pinned = machine.metadata.annotations.get(n.RELEASE_ANNOTATION)
    if pinned:
        return pinned
    deployed = machine.status is not None and machine.status.release is not None
    if deployed and lcm is not None and lcm.spec.release:
        return lcm.spec.release
    return cluster.spec.release if cluster is not None else None


def decide(o: Observed) -> Step:
    """The next step for ``o.machine`` (see the module docstring)."""
    if o.machine.metadata.deletion_timestamp is not None:
        return _deleting(o)
    return _building(o)


class _Stop(Exception):
    """Raised inside the checklist to end it with ``step``."""

    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step


@dataclass
class _Walk:
    """Conditions and phase gathered while walking the checklist."""

    o: Observed
    phase: MachinePhase = MachinePhase.PENDING
    conditions: list[ConditionSpec] = field(default_factory=list)
    host_ref: ObjectReference | None = None

    def ok(self, spec: ConditionSpec) -> None:
        self.conditions.append(spec)

    def stop(self, action: Action, *conds: ConditionSpec, ready: str | None = None,
             phase: MachinePhase | None = None) -> _Stop:
        """End the walk with ``action``; ``ready``: the reason of a Ready False
        condition whose message is that of the last condition given."""
        conditions = [*self.conditions, *conds]
        if ready is not None:
            message = (conds[-1].message or ready) if conds else ready
            conditions.append(ConditionSpec.false(n.READY, ready, message))
        return _Stop(Step(action, phase or self.phase, conditions, host_ref=self.host_ref))


def _building(o: Observed) -> Step:
    try:
        return _build(_Walk(o))
    except _Stop as stop:
        return stop.step


def _build(w: _Walk) -> Step:
    o, m = w.o, w.o.machine
    meta = m.metadata
    name, ns = meta.name or "", meta.namespace or ""
    if n.FINALIZER not in meta.finalizers:
        raise w.stop(AddFinalizer())
    # 1. Cluster, release, host.
    cluster_name = m.spec.cluster_name
    # A missing Cluster or ClusterRelease keeps the recorded phase: a machine
    # past Pending written back to Pending would lose the guard below that
    # never claims it a second host.
    kept = (m.status.phase if m.status and m.status.phase else None) or MachinePhase.PENDING
    if o.cluster is None:
        raise w.stop(Wait(o.timings.retry_missing), ConditionSpec.false(
            n.CLUSTER_FOUND, n.NOT_FOUND, f"cluster {ns}/{cluster_name} not found"),
            ready="Pending", phase=kept)
    w.ok(ConditionSpec.true(n.CLUSTER_FOUND, n.FOUND, f"cluster {ns}/{cluster_name}"))
    refused = endpoint_refusal(o.cluster)
    if refused is not None and kept is MachinePhase.PENDING:
        # A cluster whose endpoint is refused (a VIP outside its control-plane
        # network, another cluster's VIP) gets nothing deployed; a machine
        # already past Pending finishes what it started.
        raise w.stop(Wait(None), ConditionSpec.false(
            n.CLUSTER_ENDPOINT_VALID, refused.reason or "Invalid",
            f"cluster {ns}/{cluster_name}: {refused.message}; nothing is deployed until "
            "it is fixed"), ready="Pending", phase=kept)
    even = find(o.cluster.status.conditions if o.cluster.status else [], CONTROL_PLANE_QUORUM)
    if even is not None and even.status is ConditionStatus.FALSE and o.lcm is None:
        # An even number of control-plane machines: nothing further is
        # rendered for the cluster until it is odd again.
        raise w.stop(Wait(None), ConditionSpec.false(
            n.CLUSTER_ENDPOINT_VALID, even.reason or "EvenControlPlaneMachines",
            f"cluster {ns}/{cluster_name}: {even.message}; nothing is deployed until the "
            "number of control-plane machines is odd"), ready="Pending", phase=kept)
    release_name = release_to_render(m, o.cluster, o.lcm) or o.cluster.spec.release
    if o.release is None or o.release.metadata.name != release_name:
        raise w.stop(Wait(o.timings.retry_missing), ConditionSpec.false(
            n.RELEASE_FOUND, n.NOT_FOUND, f"ClusterRelease {release_name} not found"),
            ready="Pending", phase=kept)
    w.ok(ConditionSpec.true(n.RELEASE_FOUND, n.FOUND, f"ClusterRelease {release_name}"))
    host = claimed_host(o.hosts, m)
    if host is None:
        recorded = m.status.host_ref if m.status else None
        phase = m.status.phase if m.status else None
        if recorded is not None and phase not in (None, MachinePhase.PENDING):
            # Never claim a second host for a machine that got past Pending.
            # HostProvisioned says so too: what it said of the host before
            # ("host h1 is deleting") would outlive the host.
            gone = f"host {recorded.name} is gone or no longer names this machine"
            raise w.stop(Wait(None),
                         ConditionSpec.false(n.HOST_CLAIMED, n.HOST_GONE, gone),
                         ConditionSpec.false(n.HOST_PROVISIONED, n.HOST_GONE, gone),
                         ready=n.HOST_GONE, phase=MachinePhase.FAILED)
        free = candidates(o.hosts, m)
        if not free:
            message = (f"no available BareMetalHost in {ns} matches the host selector "
                       f"{describe_selector(m.spec.host_selector)!r}")
            raise w.stop(Wait(o.timings.retry_no_host),
                         ConditionSpec.false(n.HOST_CLAIMED, n.NO_MATCHING_HOST, message),
                         ready="Pending", phase=MachinePhase.PENDING)
        raise w.stop(ClaimHost(tuple(free)), phase=MachinePhase.PENDING)
    host_name = host.metadata.name or ""
    w.host_ref = host_reference(host)
    w.ok(ConditionSpec.true(n.HOST_CLAIMED, n.CLAIMED, f"host {host_name}"))
    state = state_of(host)
    started = state in (S.PROVISIONING, S.PROVISIONED)
    if state is S.PROVISIONED:
        w.phase = MachinePhase.DEPLOYING
    elif started or host_carries(host, name, host.spec.image, m.spec.host_profile):
        w.phase = MachinePhase.PROVISIONING
    # 2. Network.
    wanted_ipam = ipamhost_spec(name, host)
    if o.ipamhost is None or not _same_ipam_inputs(o.ipamhost.spec, wanted_ipam):
        raise w.stop(EnsureIpamHost(wanted_ipam))
    ipam_status = o.ipamhost.status
    ipam_state = ipam_status.state if ipam_status else None
    if ipam_state is not IpamHostState.OK or ipam_status is None:
        messages = "; ".join(ipam_status.messages) if ipam_status else ""
        reason = ipam_state.value if ipam_state else "Pending"
        raise w.stop(Wait(None), ConditionSpec.false(
            n.NETWORK_READY, reason, messages or f"IpamHost {name} is not rendered yet"),
            ready=n.NETWORK_READY)
    w.ok(ConditionSpec.true(n.NETWORK_READY, "OK", f"IpamHost {name} rendered"))
    # 3. State items (with the API VIP's keepalived and HAProxy on a
    # control-plane machine of a cluster whose VIP Racksmith holds).
    vip = plan_api_vip(o.cluster, machine=name, roles=m.spec.roles,
                       address=control_plane_address(o.cluster, ipam_status.netconfig),
                       netconfig=ipam_status.netconfig, peers=o.vip_peers)
    if isinstance(vip, VipWait):
        raise w.stop(Wait(None), ConditionSpec.false(n.API_VIP_READY, vip.reason, vip.message),
                     ready=n.API_VIP_READY)
    if vip.items:
        w.ok(ConditionSpec.true(n.API_VIP_READY, "Rendered", f"keepalived and HAProxy with "
                                f"{len(o.vip_peers)} control-plane peers"))
    planned = plan_state_items(o.release, m.spec.roles, o.cluster, ipam_status.netconfig,
                               init_node=o.init_node, extra_items=vip.items,
                               kubeadm_extra=vip.kubeadm)
    if isinstance(planned, list):
        raise w.stop(Wait(None), ConditionSpec.false(
            n.RELEASE_VALID, "Invalid", "; ".join(str(e) for e in planned)),
            ready=n.RELEASE_VALID)
    w.ok(ConditionSpec.true(n.RELEASE_VALID, "Valid",
                            f"{len(planned.items)} state items from {release_name}"))
    wanted_lcm = LCMMachineSpec(machine_ref=LocalObjectReference(name=name),
                                cluster_name=cluster_name, release=planned.release,
                                state_items=planned.state_items(),
                                paused=o.lcm.spec.paused if o.lcm else False)
    if o.lcm is None or o.lcm.spec != wanted_lcm:
        raise w.stop(WriteLCMMachine(wanted_lcm))
    # 4. User data and the host.
    if not started:
        _provision(w, host)
    if state is not S.PROVISIONED:
        message = f"host {host_name} is {state.value if state else 'unknown'}"
        if host.status and host.status.error_message:
            message += f": {host.status.error_message}"
        raise w.stop(Wait(None), ConditionSpec.false(
            n.HOST_PROVISIONED, (state.value if state else "Unknown").title().replace(" ", ""),
            message), ready="Provisioning")
    w.ok(ConditionSpec.true(n.HOST_PROVISIONED, "Provisioned", f"host {host_name}"))
    # 5. Node roles, agent, node.
    roles = plan_node_roles(m.spec.roles)
    if o.node is not None and isinstance(roles, NodeRoles):
        sync = node_roles_change(o.node, roles)
        if sync is not None:
            raise w.stop(sync)
    lcm_status = o.lcm.status
    agent_ready = (lcm_status is not None and lcm_status.phase is LCMMachinePhase.READY
                   and lcm_status.observed_generation == o.lcm.metadata.generation)
    if not agent_ready:
        what = lcm_status.phase.value if lcm_status and lcm_status.phase else "not reported"
        raise w.stop(Wait(None), ConditionSpec.false(
            n.READY, "Deploying", f"LCMMachine {name}: {what} (generation "
            f"{lcm_status.observed_generation if lcm_status else None} of "
            f"{o.lcm.metadata.generation})"))
    if o.node is None or not o.node.ready:
        why = "not registered" if o.node is None else "not Ready"
        raise w.stop(Wait(None), ConditionSpec.false(n.READY, "NodeNotReady",
                                                     f"Node {name} is {why}"))
    # 6. Ready.
    ready = ReadyFields(
        node_ref=ObjectReference(api_version="v1", kind="Node", name=name),
        addresses=tuple(machine_addresses(name, o.cluster, ipam_status.netconfig)),
        release=lcm_status.release if lcm_status else None,
    )
    conditions = [*w.conditions, ConditionSpec.true(
        n.READY, "Ready", f"Node {name} is Ready and runs {ready.release}")]
    return Step(Wait(o.timings.resync), MachinePhase.READY, conditions, host_ref=w.host_ref,
                ready=ready)


def _provision(w: _Walk, host: BareMetalHost) -> None:
    """Step 4 while the host has not started provisioning: agent config,
    image, user data, the host's spec. Stops unless all are in place."""
    o, m = w.o, w.o.machine
    name, ns = m.metadata.name or "", m.metadata.namespace or ""
    if isinstance(o.agent, str):
        raise w.stop(Wait(o.timings.retry_missing), ConditionSpec.false(
            n.AGENT_CONFIG_READY, "AgentSecretMissing", o.agent), ready=n.AGENT_CONFIG_READY)
    w.ok(ConditionSpec.true(n.AGENT_CONFIG_READY, "Ready", "agent access known"))
    if isinstance(o.pki_files, str):
        needs = ("the cluster's certificate authorities" if Role.MASTER in m.spec.roles
                 else "the cluster CA and its kubelet's certificate")
        raise w.stop(Wait(o.timings.retry_missing), ConditionSpec.false(
            n.CLUSTER_CERTIFICATES_READY, "CertificatesMissing",
            f"{o.pki_files}: the machine gets {needs} in its user data"),
            ready=n.CLUSTER_CERTIFICATES_READY)
    if o.pki_files is not None:
        w.ok(ConditionSpec.true(n.CLUSTER_CERTIFICATES_READY, "Ready",
                                f"{len(o.pki_files)} PKI files in the user data"))
    assert o.release is not None
    image = o.release.spec.os_image or o.default_image
    if image is None:
        raise w.stop(Wait(None), ConditionSpec.false(
            n.IMAGE_KNOWN, "NoImage", f"ClusterRelease {o.release.metadata.name} has no "
            "spec.osImage and the controller has no default image"), ready=n.IMAGE_KNOWN)
    w.ok(ConditionSpec.true(n.IMAGE_KNOWN, "Known", f"image {image.url}"))
    files = o.pki_files if isinstance(o.pki_files, dict) else None
    if o.agent_token is None:
        raise w.stop(WriteUserData(o.agent, files=files))
    if o.user_data != render_user_data(o.agent, o.agent_token, ns, name, files):
        raise w.stop(WriteUserData(o.agent, o.agent_token, files=files))
    if not host_carries(host, name, image, m.spec.host_profile):
        if state_of(host) is not S.AVAILABLE:
            raise w.stop(Wait(None), ConditionSpec.false(
                n.HOST_PROVISIONED, "HostNotAvailable",
                f"host {host.metadata.name} is {state_of(host)}"), ready="Provisioning")
        w.phase = MachinePhase.PROVISIONING
        raise w.stop(ProvisionHost(host.metadata.name or "", image, m.spec.host_profile))


def host_reference(host: BareMetalHost) -> ObjectReference:
    """``status.hostRef`` for ``host``."""
    meta = host.metadata
    return ObjectReference(api_version=host.api_version, kind=host.kind, name=meta.name or "",
                           namespace=meta.namespace, uid=meta.uid)


def host_carries(host: BareMetalHost, machine: str, image: Image | None,
                 profile: str | None) -> bool:
    """The host's spec already asks for what the machine wants provisioned."""
    spec = host.spec
    return (
        image is not None
        and spec.image == image
        and spec.user_data is not None
        and spec.user_data.name == n.user_data_secret(machine)
        and spec.online
        and (profile is None or host_profile(host.metadata.annotations) == profile)
    )


def ipamhost_spec(machine: str, host: BareMetalHost) -> IpamHostSpec:
    """The IpamHost spec for ``machine`` on ``host``: its inspected NICs in order."""
    boot = (host.spec.boot_mac_address or "").lower()
    nics = host.status.hardware.nics if host.status and host.status.hardware else []
    mapping = [NICMapping(name=nic.name or "", mac=nic.mac or "", ip=nic.ip,
                          primary=bool(boot) and (nic.mac or "").lower() == boot)
               for nic in nics if nic.mac]
    return IpamHostSpec.model_validate({"machineRef": LocalObjectReference(name=machine),
                                        "nicMACmap": mapping})


def _same_ipam_inputs(current: IpamHostSpec, wanted: IpamHostSpec) -> bool:
    return current.machine_ref == wanted.machine_ref and current.nic_mac_map == wanted.nic_mac_map


def _taint_key(taint: Any) -> tuple[str, str, str]:
    return (str(taint.get("key") or ""), str(taint.get("value") or ""),
            str(taint.get("effect") or ""))


def node_roles_change(node: NodeView, roles: NodeRoles) -> SyncNodeRoles | None:
    """The labels and taints ``node`` must carry for ``roles`` (role keys exactly
    as planned, other keys untouched), or None when it already does."""
    labels = {k: v for k, v in node.labels.items() if not k.startswith(LABEL_PREFIX)}
    labels.update(roles.labels)
    others = [dict(t) for t in node.taints if not str(t.get("key") or "").startswith(LABEL_PREFIX)]
    current_roles = sorted(_taint_key(t) for t in node.taints
                           if str(t.get("key") or "").startswith(LABEL_PREFIX))
    wanted_roles = [t.to_k8s() for t in roles.taints]
    if labels == dict(node.labels) and current_roles == sorted(map(_taint_key, wanted_roles)):
        return None
    return SyncNodeRoles(labels, tuple([*others, *wanted_roles]))


# --- deletion ---------------------------------------------------------------------


def _deleting(o: Observed) -> Step:
    m = o.machine
    name = m.metadata.name or ""
    phase = MachinePhase.DELETING
    if n.FINALIZER not in m.metadata.finalizers:
        return Step(Wait(None), phase)
    host = claimed_host(o.hosts, m)
    host_ref = m.status.host_ref if m.status else None
    drained_cond = find(m.status.conditions if m.status else [], n.DRAINED)
    drained = drained_cond is not None and drained_cond.status is ConditionStatus.TRUE
    conds: list[ConditionSpec] = []
    node = o.node
    if node is not None and not drained:
        if not node.unschedulable:
            return Step(CordonNode(), phase)
        evictable = tuple(p for p in o.pods if p.evictable)
        if evictable:
            return Step(EvictPods(evictable), phase, [ConditionSpec.false(
                n.DRAINED, "Draining", f"evicting {len(evictable)} pods from Node {name}")])
        going = [p for p in o.pods if p.terminating]
        if going:
            return Step(Wait(o.timings.retry_terminating), phase, [ConditionSpec.false(
                n.DRAINED, "Draining",
                f"waiting for {len(going)} pods to terminate on Node {name}")])
        return Step(DeleteNode(), phase, [ConditionSpec.true(
            n.DRAINED, "Drained", f"Node {name} drained and deleted")])
    if not drained:
        conds.append(ConditionSpec.true(n.DRAINED, "NoNode", f"Node {name} does not exist"))
    if o.lcm is not None and o.lcm.metadata.deletion_timestamp is None:
        return Step(DeleteLCMMachine(), phase, conds)
    if host is not None:
        clear_profile = host.metadata.annotations.get(n.PROFILE_SET_ANNOTATION) == name
        return Step(ReleaseHost(host.metadata.name or "", clear_profile), phase, conds,
                    host_ref=host_reference(host))
    if o.ipamhost is not None and o.ipamhost.metadata.deletion_timestamp is None:
        return Step(DeleteIpamHost(), phase, conds)
    if o.user_data is not None:
        return Step(DeleteUserData(), phase, conds)
    if host_ref is not None:
        released = next((h for h in o.hosts if h.metadata.name == host_ref.name), None)
        if released is not None and not _let_go(released, m):
            return Step(Wait(None), phase, [*conds, ConditionSpec.false(
                n.HOST_CLAIMED, "Releasing",
                f"waiting for host {host_ref.name} to be deprovisioned "
                f"({state_of(released)})")])
    if node is not None:
        # The host's agent may have registered the Node again before it stopped.
        return Step(DeleteNode(), phase, conds)
    if o.ipamhost is not None:
        return Step(Wait(None), phase, conds)
    return Step(RemoveFinalizer(), phase, conds)


def _let_go(host: BareMetalHost, machine: Machine) -> bool:
    """A released host is done with: available again, or claimed by someone else."""
    ref = host.spec.consumer_ref
    if ref is not None and ref.uid != machine.metadata.uid:
        return True
    return ref is None and state_of(host) is S.AVAILABLE
