"""The node maintenance flow's Events: what each of its writes is worth telling.

Owns ``COMPONENT`` (``racksmith-maintenance``, the source of every Event of
the flow, whichever controller drives it), ``node_ref`` (the Node as an
Event's involvedObject: uid = name, as the kubelet does, so ``kubectl
describe node`` shows them) and ``action_events(job, action)``, pure: the
Events an action of the flow is worth once performed. Each action is a
write that moves the flow on, so each is a transition; one the flow repeats
(a reboot asked again after ``reboot_retry``) only bumps the count of its
Event. All are about the Node, all Normal:

- ``Cordoned``: the node was cordoned for the owner's maintenance;
- ``DrainStarted``: its drain began;
- ``RebootRequested``: a reboot was asked of its BareMetalHost;
- ``Uncordoned``: the maintenance is done and the node schedulable again
  (or left cordoned, as it was before).

The drain's own, per pod (``drain.Drainer``): ``Evicted`` (Normal) and
``EvictionRefused`` (Warning, naming the PodDisruptionBudget when known).
"""

from __future__ import annotations

from typing import Any

from racksmith.planners.maintenance import (
    Action,
    Cordon,
    NodeJob,
    RequestReboot,
    StartDrain,
    Uncordon,
)
from racksmith.runtime.conditions import EventSpec
from racksmith.runtime.events import object_ref

COMPONENT = "racksmith-maintenance"
CORDONED = "Cordoned"
DRAIN_STARTED = "DrainStarted"
EVICTED = "Evicted"
EVICTION_REFUSED = "EvictionRefused"
REBOOT_REQUESTED = "RebootRequested"
UNCORDONED = "Uncordoned"


def node_ref(node: str) -> dict[str, Any]:
    """The Node ``node`` to record an Event about."""
    return object_ref("v1", "Node", node, uid=node)


def action_events(job: NodeJob, action: Action) -> list[EventSpec]:
    """The Events ``action``, just performed for ``job``, is worth."""
    match action:
        case Cordon():
            return [EventSpec("Normal", CORDONED, f"cordoned for maintenance by {job.owner}")]
        case StartDrain():
            return [EventSpec("Normal", DRAIN_STARTED, f"draining for {job.owner}")]
        case RequestReboot(bmh=bmh):
            return [EventSpec("Normal", REBOOT_REQUESTED,
                              f"reboot requested through BareMetalHost {job.namespace}/{bmh} "
                              f"for {job.owner}")]
        case Uncordon(keep_cordoned=keep):
            message = (f"maintenance by {job.owner} done; left cordoned, as it was before"
                       if keep else f"maintenance by {job.owner} done; uncordoned")
            return [EventSpec("Normal", UNCORDONED, message)]
    return []
