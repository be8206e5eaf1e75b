"""The node maintenance flow as a pure state table: observed world → next action.

Owns the per-node flow of ``docs/design/maintenance-contracts.md`` ("The
node flow"): the names of its labels and annotations (other modules import
them from here), ``NodeJob`` (what the caller asks for one node),
``NodeObserved`` (a snapshot of the node, its NodeMaintenanceRequest, locks,
pods, Machine, LCMMachine and BareMetalHost), and ``decide``, which returns
the first state whose condition is not satisfied, with the action that
moves it on (or ``Wait``) and the ``NodeProgress`` to report.

Pure: no I/O, no clock (``now`` is part of the snapshot). Called by
``racksmith.controllers.maintenance.flow.NodeMaintenance`` after each read
of the world; because every decision is taken from what is written on the
objects (the request's annotations are the flow's memory), a flow stopped at
any point resumes where the world is and never repeats a step, except the
reboot, requested again only after ``MaintenanceTimings.reboot_retry``
with the BMH annotation gone and the boot ID unchanged.

How long the flow waits is an input too: ``MaintenanceTimings``, carried by
the snapshot (``NodeObserved.timings``); the controllers that run the flow
get it from the composition root.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from racksmith.kinds.maintenance import MaintenanceScope

# --- names of the contract -------------------------------------------------------

PREFIX = "lcm.racksmith.io/"
OWNER_LABEL = f"{PREFIX}owner"
"""On NodeMaintenanceRequests and ClusterMaintenanceRequests: who asked."""
CLUSTER_LABEL = "cluster.racksmith.io/cluster"
MACHINE_LABEL = "cluster.racksmith.io/machine"
NAMESPACE_ANNOTATION = f"{PREFIX}namespace"
"""On a NodeMaintenanceRequest: the Machine's namespace."""
WAS_UNSCHEDULABLE = f"{PREFIX}was-unschedulable"
DRAIN_STARTED = f"{PREFIX}drain-started"
REBOOT_BOOT_ID = f"{PREFIX}reboot-boot-id"
REBOOT_REQUESTED = f"{PREFIX}reboot-requested"
CORDONED_BY = f"{PREFIX}cordoned-by"
"""On a Node: the owner that cordoned it (set with the cordon, removed with the uncordon)."""
RELEASE_ANNOTATION = f"{PREFIX}release"
"""On a Machine: the ClusterRelease its LCMMachine must render."""
UPDATE_GROUP_LABEL = f"{PREFIX}update-group"
BMH_REBOOT_ANNOTATION = "reboot.metal3.io/racksmith-lcm"
"""On a BareMetalHost: Metal3's keyed reboot. The BareMetalHost controller
powers the host off and keeps it off while the annotation is there; the
flow removes it once the host reads off, and the host powers on again."""

PLAN_OWNER_PREFIX = "plan"
REBOOT_OWNER_PREFIX = "reboot"


@dataclass(frozen=True)
class MaintenanceTimings:
    """How long the node flow waits (seconds of the caller's clock).

    An input of the planner (``NodeObserved.timings``) and of the eviction
    back-off; the composition root may override the defaults, tests shrink
    them.
    """

    poll: float = 5.0
    """Look again this often while waiting on the node, its LCMMachine, its
    BareMetalHost or a pod's eviction."""
    lock_retry: float = 10.0
    """Look again this often while NodeWorkloadLocks are active or failed,
    or another owner holds the node."""
    reboot_retry: float = 600.0
    """A reboot whose BMH annotation is gone while the boot ID is unchanged
    for this long is requested again."""
    eviction_backoff_base: float = 2.0
    """Wait before evicting a pod again after its first refusal; doubles
    with each further refusal."""
    eviction_backoff_cap: float = 30.0
    """Longest wait between evictions of a refused pod."""

    def __post_init__(self) -> None:
        if min(self.poll, self.lock_retry, self.reboot_retry,
               self.eviction_backoff_base) <= 0:
            raise ValueError("maintenance timings must be > 0")
        if self.eviction_backoff_cap < self.eviction_backoff_base:
            raise ValueError("eviction_backoff_cap must be >= eviction_backoff_base")


LABEL_VALUE_MAX = 63
"""A label value's length limit: the owner is a label."""
HASHED_SUFFIX = "-h"
"""Marks an owner too long for a label, written as its digest
(``plan-h.<sha256 hex>``): it names no namespace and name to parse back."""


def _owner(prefix: str, namespace: str, name: str) -> str:
    full = f"{prefix}.{namespace}.{name}"
    if len(full) <= LABEL_VALUE_MAX:
        return full
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:40]
    return f"{prefix}{HASHED_SUFFIX}.{digest}"


def plan_owner(namespace: str, plan: str) -> str:
    """The owner value of a ClusterUpdatePlan: ``plan.<ns>.<name>``, or its
    digest form when that would pass a label value's 63 characters."""
    return _owner(PLAN_OWNER_PREFIX, namespace, plan)


def reboot_owner(namespace: str, request: str) -> str:
    """The owner value of a GracefulRebootRequest (as :func:`plan_owner`)."""
    return _owner(REBOOT_OWNER_PREFIX, namespace, request)


def hashed_owner_prefix(owner: str) -> str | None:
    """The kind prefix of an owner in digest form (``plan``, ``reboot``), else None."""
    head, sep, _ = owner.partition(".")
    if sep and head.endswith(HASHED_SUFFIX):
        return head[:-len(HASHED_SUFFIX)]
    return None


def parse_owner(owner: str) -> tuple[str, str, str] | None:
    """``(kind prefix, namespace, name)`` of an owner value, None if malformed
    or in digest form (:func:`hashed_owner_prefix`: match it by recomputing
    :func:`plan_owner` or :func:`reboot_owner` of the candidates instead).

    Namespaces hold no dots, so the name is everything after the second dot.
    """
    if hashed_owner_prefix(owner) is not None:
        return None
    parts = owner.split(".", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def rfc3339(value: datetime) -> str:
    """A timestamp as written in the flow's annotations."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    """An annotation timestamp; None when absent or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- the job and the snapshot ------------------------------------------------------


class RebootPolicy(StrEnum):
    """When the flow reboots the node."""

    NEVER = "never"
    IF_REQUIRED = "if-required"
    ALWAYS = "always"


class NodeState(StrEnum):
    """Where one node is in the maintenance flow (the contract's names)."""

    REQUESTED = "Requested"
    WAITING_FOR_OTHER = "WaitingForOther"
    WAITING_FOR_LOCKS = "WaitingForLocks"
    LOCK_FAILED = "LockFailed"
    DRAINING = "Draining"
    BLOCKED = "Blocked"
    APPLYING = "Applying"
    REBOOTING = "Rebooting"
    WAITING_FOR_NODE = "WaitingForNode"
    UNCORDONING = "Uncordoning"
    READY_TO_FINISH = "ReadyToFinish"


@dataclass(frozen=True)
class NodeJob:
    """Maintenance of one node (name == machine name) for one owner."""

    namespace: str
    machine: str
    owner: str
    cluster: str
    scope: MaintenanceScope = MaintenanceScope.OS
    release: str | None = None
    reboot: RebootPolicy = RebootPolicy.NEVER
    drain_timeout: float = 600.0

    @property
    def node(self) -> str:
        return self.machine


@dataclass(frozen=True)
class NodeProgress:
    """What the flow reports: state, message, percent done, when to look again."""

    state: NodeState
    message: str
    progress: int
    requeue: float


@dataclass(frozen=True)
class NodeView:
    """The parts of a Node the flow reads."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = False
    boot_id: str | None = None


@dataclass(frozen=True)
class RequestView:
    """The NodeMaintenanceRequest of the node (any owner)."""

    owner: str | None
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LockView:
    """One NodeWorkloadLock of the node."""

    name: str
    controller: str
    state: str = "active"
    error_message: str | None = None
    progress: int | None = None
    description: str | None = None


@dataclass(frozen=True)
class Refusal:
    """Why the last eviction of a pod was refused."""

    reason: str
    pdb: str | None = None
    """The PodDisruptionBudget's name (same namespace as the pod), if known."""


@dataclass(frozen=True)
class PodView:
    """An evictable pod still on the node (not DaemonSet-owned, mirror or terminating)."""

    namespace: str
    name: str
    refusal: Refusal | None = None
    retry_at: datetime | None = None
    """Not before this instant (eviction back-off after a refusal)."""


@dataclass(frozen=True)
class LcmView:
    """The LCMMachine of the machine."""

    spec_release: str
    generation: int | None
    phase: str | None = None
    observed_generation: int | None = None
    release: str | None = None
    reboot_required: bool = False
    error: str | None = None


@dataclass(frozen=True)
class NodeObserved:
    """Everything ``decide`` looks at, read in one pass."""

    job: NodeJob
    now: datetime
    node: NodeView | None
    request: RequestView | None = None
    locks: tuple[LockView, ...] = ()
    pods: tuple[PodView, ...] = ()
    machine_release: str | None = None
    lcm: LcmView | None = None
    bmh: str | None = None
    bmh_reboot_pending: bool = False
    """The BareMetalHost carries ``BMH_REBOOT_ANNOTATION``."""
    bmh_powered_on: bool | None = None
    """The BareMetalHost's ``status.poweredOn`` (None: not known)."""
    timings: MaintenanceTimings = field(default_factory=MaintenanceTimings)
    """How long to wait in each state (the defaults unless the caller says)."""


# --- actions -------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateRequest:
    """Create the NodeMaintenanceRequest (labels, annotations of the contract)."""

    was_unschedulable: bool


@dataclass(frozen=True)
class Cordon:
    """Patch ``spec.unschedulable: true``; with ``mark``, also cordoned-by = owner."""

    mark: bool = True


@dataclass(frozen=True)
class StartDrain:
    """Write drain-started (``at``) on the request."""

    at: datetime


@dataclass(frozen=True)
class Evict:
    """Evict these pods through the Eviction API (each once, now)."""

    pods: tuple[PodView, ...]


@dataclass(frozen=True)
class SetRelease:
    """Set the Machine's release annotation."""

    release: str


@dataclass(frozen=True)
class RecordReboot:
    """Write reboot-boot-id on the request (before anything asks for the reboot)."""

    boot_id: str


@dataclass(frozen=True)
class RequestReboot:
    """Write reboot-requested (``at``) on the request, then annotate BMH ``bmh``."""

    bmh: str
    at: datetime


@dataclass(frozen=True)
class ReleaseReboot:
    """Remove ``BMH_REBOOT_ANNOTATION`` from BMH ``bmh`` (it reads powered off)."""

    bmh: str


@dataclass(frozen=True)
class Uncordon:
    """Remove cordoned-by; unless ``keep_cordoned``, patch ``spec.unschedulable: false``."""

    keep_cordoned: bool = False


@dataclass(frozen=True)
class Wait:
    """Nothing to write now; look again after ``NodeProgress.requeue``."""


Action = (CreateRequest | Cordon | StartDrain | Evict | SetRelease | RecordReboot
          | RequestReboot | ReleaseReboot | Uncordon | Wait)


@dataclass(frozen=True)
class Decision:
    """The next action and the progress to report."""

    action: Action
    progress: NodeProgress

    @property
    def waits(self) -> bool:
        return isinstance(self.action, Wait)


def _at(state: NodeState, message: str, progress: int, requeue: float,
        action: Action | None = None) -> Decision:
    return Decision(action if action is not None else Wait(),
                    NodeProgress(state, message, max(0, min(100, progress)), requeue))


# --- the table -----------------------------------------------------------------------


def decide(obs: NodeObserved) -> Decision:
    """The first state of the flow that is not satisfied, and what moves it on."""
    job = obs.job
    req = obs.request
    if req is not None and req.owner != job.owner:
        return _at(NodeState.WAITING_FOR_OTHER,
                   f"node in maintenance by {req.owner or 'an unknown owner'}", 0,
                   obs.timings.lock_retry)
    node = obs.node
    if req is None:
        if node is None:
            return _at(NodeState.WAITING_FOR_NODE, f"Node {job.node} not found", 0,
                       obs.timings.poll)
        was = node.unschedulable and CORDONED_BY not in node.annotations
        return _at(NodeState.REQUESTED, "creating the NodeMaintenanceRequest", 0, 0.0,
                   CreateRequest(was_unschedulable=was))
    for step in (_locks, _drain, _apply, _reboot, _node, _uncordon):
        decision = step(obs, req)
        if decision is not None:
            return decision
    return _at(NodeState.READY_TO_FINISH, "maintenance done", 100, 0.0)


def _locks(obs: NodeObserved, req: RequestView) -> Decision | None:
    failed = [lk for lk in obs.locks if lk.state == "failed"]
    if failed:
        lk = failed[0]
        return _at(NodeState.LOCK_FAILED,
                   f"NodeWorkloadLock {lk.name} ({lk.controller}) failed: "
                   f"{lk.error_message or 'no error message'}",
                   5, obs.timings.lock_retry)
    active = [lk for lk in obs.locks if lk.state not in ("inactive", "failed")]
    if not active:
        return None
    names = ", ".join(f"{lk.name} ({lk.controller})" for lk in active)
    done = sum(lk.progress or 0 for lk in active) / len(active)
    details = "; ".join(lk.description for lk in active if lk.description)
    message = f"waiting for NodeWorkloadLock {names} to become inactive"
    if details:
        message += f": {details}"
    return _at(NodeState.WAITING_FOR_LOCKS, message, 5 + int(15 * done / 100),
               obs.timings.lock_retry)


def _drain(obs: NodeObserved, req: RequestView) -> Decision | None:
    node = obs.node
    if node is None:
        return _at(NodeState.WAITING_FOR_NODE, f"Node {obs.job.node} not found", 20,
                   obs.timings.poll)
    was = req.annotations.get(WAS_UNSCHEDULABLE) == "true"
    ours = node.annotations.get(CORDONED_BY) == obs.job.owner
    started = parse_time(req.annotations.get(DRAIN_STARTED))
    if started is None and not req.annotations.get(DRAIN_STARTED):
        if not node.unschedulable or (not was and not ours):
            return _at(NodeState.DRAINING, "cordoning the node", 20, 0.0, Cordon(mark=not was))
        return _at(NodeState.DRAINING, "draining the node", 25, 0.0, StartDrain(obs.now))
    if not node.unschedulable:
        if ours:  # uncordoned by someone else in the middle of the flow
            return _at(NodeState.DRAINING, "cordoning the node again", 25, 0.0, Cordon())
        return None  # the flow uncordoned it: the drain is behind us
    if not obs.pods:
        return None
    due = tuple(p for p in obs.pods if p.retry_at is None or p.retry_at <= obs.now)
    next_try = min(((p.retry_at - obs.now).total_seconds() for p in obs.pods
                    if p.retry_at is not None and p.retry_at > obs.now),
                   default=obs.timings.poll)
    action: Action = Evict(due) if due else Wait()
    requeue = 0.0 if due else max(0.1, next_try)
    refused = [p for p in obs.pods if p.refusal is not None]
    elapsed = (obs.now - started).total_seconds() if started is not None else 0.0
    if elapsed >= obs.job.drain_timeout:
        return _at(NodeState.BLOCKED, blocked_message(refused[0] if refused else obs.pods[0]),
                   30, requeue, action)
    names = ", ".join(f"{p.namespace}/{p.name}" for p in obs.pods[:5])
    more = f" and {len(obs.pods) - 5} more" if len(obs.pods) > 5 else ""
    message = f"evicting {len(obs.pods)} pod(s): {names}{more}"
    if refused and refused[0].refusal is not None:
        message += f" (refused: {refused[0].refusal.reason})"
    return _at(NodeState.DRAINING, message, 30, requeue, action)


def blocked_message(pod: PodView) -> str:
    """The contract's Blocked message for ``pod``."""
    ref = f"{pod.namespace}/{pod.name}"
    if pod.refusal is None:
        return f"drain blocked: pod {ref} is still on the node"
    if pod.refusal.pdb:
        return (f"drain blocked: pod {ref} is protected by PodDisruptionBudget "
                f"{pod.namespace}/{pod.refusal.pdb} ({pod.refusal.reason})")
    return f"drain blocked: pod {ref} cannot be evicted ({pod.refusal.reason})"


def _apply(obs: NodeObserved, req: RequestView) -> Decision | None:
    release = obs.job.release
    if release is None:
        return None
    if obs.machine_release != release:
        return _at(NodeState.APPLYING, f"setting release {release}", 50, 0.0,
                   SetRelease(release))
    lcm = obs.lcm
    if lcm is None:
        return _at(NodeState.APPLYING, f"LCMMachine {obs.job.machine} not found", 50,
                   obs.timings.poll)
    if (lcm.spec_release == release and lcm.phase == "Ready"
            and lcm.observed_generation == lcm.generation and lcm.release == release):
        return None
    if lcm.spec_release != release:
        message = f"waiting for the LCMMachine to render release {release}"
    else:
        message = f"applying release {release}: LCMMachine {lcm.phase or 'Pending'}"
        if lcm.error:
            message += f": {lcm.error}"
    return _at(NodeState.APPLYING, message, 55, obs.timings.poll)


def needs_reboot(obs: NodeObserved) -> bool:
    """The job's reboot policy asks for a reboot now."""
    policy = obs.job.reboot
    if policy == RebootPolicy.ALWAYS:
        return True
    return (policy == RebootPolicy.IF_REQUIRED and obs.job.scope == MaintenanceScope.OS
            and obs.lcm is not None and obs.lcm.reboot_required)


def _reboot(obs: NodeObserved, req: RequestView) -> Decision | None:
    node = obs.node
    assert node is not None  # _drain answered otherwise
    recorded = req.annotations.get(REBOOT_BOOT_ID)
    if recorded is None:
        if not needs_reboot(obs):
            return None
        if not node.boot_id:
            return _at(NodeState.REBOOTING, f"Node {node.name} reports no boot ID yet", 70,
                       obs.timings.poll)
        return _at(NodeState.REBOOTING, "recording the boot ID", 70, 0.0,
                   RecordReboot(node.boot_id))
    if node.boot_id and node.boot_id != recorded:
        if obs.bmh_reboot_pending and obs.bmh is not None:
            # Booted again with the key still on the host (released late, or
            # the host was cycled by someone else): the key is never left behind.
            return _at(NodeState.REBOOTING, f"releasing BareMetalHost {obs.bmh}", 80, 0.0,
                       ReleaseReboot(obs.bmh))
        return None  # booted again since the reboot was recorded
    if obs.bmh is None:
        return _at(NodeState.REBOOTING, f"Machine {obs.job.machine} has no BareMetalHost",
                   70, obs.timings.poll)
    requested = parse_time(req.annotations.get(REBOOT_REQUESTED))
    if requested is None:
        return _at(NodeState.REBOOTING, f"requesting a reboot of BareMetalHost {obs.bmh}", 70,
                   0.0, RequestReboot(obs.bmh, obs.now))
    if obs.bmh_reboot_pending:
        if obs.bmh_powered_on is False:
            return _at(NodeState.REBOOTING, f"BareMetalHost {obs.bmh} is off, powering it on",
                       75, 0.0, ReleaseReboot(obs.bmh))
        return _at(NodeState.REBOOTING, f"waiting for BareMetalHost {obs.bmh} to power off",
                   75, obs.timings.poll)
    waited = (obs.now - requested).total_seconds()
    retry = obs.timings.reboot_retry
    if waited >= retry:
        return _at(NodeState.REBOOTING,
                   f"node did not boot again within {retry:g} s, "
                   f"requesting the reboot of BareMetalHost {obs.bmh} again", 75, 0.0,
                   RequestReboot(obs.bmh, obs.now))
    return _at(NodeState.REBOOTING, "waiting for the node to boot again", 80,
               min(obs.timings.poll, max(0.1, retry - waited)))


def _node(obs: NodeObserved, req: RequestView) -> Decision | None:
    node = obs.node
    assert node is not None
    if node.ready:
        return None
    return _at(NodeState.WAITING_FOR_NODE, f"waiting for Node {node.name} to be Ready", 90,
               obs.timings.poll)


def _uncordon(obs: NodeObserved, req: RequestView) -> Decision | None:
    node = obs.node
    assert node is not None
    if node.annotations.get(CORDONED_BY) != obs.job.owner:
        return None
    was = req.annotations.get(WAS_UNSCHEDULABLE) == "true"
    return _at(NodeState.UNCORDONING, "uncordoning the node", 95, 0.0,
               Uncordon(keep_cordoned=was))


# --- pods ------------------------------------------------------------------------------


def eviction_backoff(attempts: int, timings: MaintenanceTimings) -> float:
    """Seconds before the next eviction of a pod refused ``attempts`` times
    (``timings.eviction_backoff_base`` doubling to ``eviction_backoff_cap``:
    2 s doubling to 30 s by default)."""
    if attempts <= 0:
        return 0.0
    return float(min(timings.eviction_backoff_cap,
                     timings.eviction_backoff_base * 2 ** (attempts - 1)))
