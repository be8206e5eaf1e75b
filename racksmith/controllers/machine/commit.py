"""The one place a Machine step is carried out.

Owns, in order: refusing a step whose phase change the state table
(``states.PHASES``) does not list (``IllegalTransition``, before any
write), performing the step's action (each write optimistic, with
the resourceVersion read at the start of the reconcile, so a concurrent
change makes it fail with ``Conflict``, which the runtime requeues, rather
than overwrite; the host claim alone reads live and moves on to the next
candidate when it loses a host to another claimer), the Machine
status through the status subresource (only when it changed), the Events
(phase changes, conditions turning False, the action's own; through the
``EventRecorder``, which folds repeats into one Event's count), the log line,
and the runtime result: after a write, decide again at once; after a wait,
what the planner asked for.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from racksmith.clock import Clock
from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.plan import (
    Action,
    AddFinalizer,
    ClaimHost,
    CordonNode,
    DeleteIpamHost,
    DeleteLCMMachine,
    DeleteNode,
    DeleteUserData,
    EnsureIpamHost,
    EvictPods,
    ProvisionHost,
    ReleaseHost,
    RemoveFinalizer,
    Step,
    SyncNodeRoles,
    Wait,
    WriteLCMMachine,
    WriteUserData,
)
from racksmith.controllers.machine.selection import consumer_ref, is_candidate, is_consumed_by
from racksmith.controllers.machine.states import PHASES
from racksmith.controllers.machine.status import apply_step, same_status, status_events
from racksmith.controllers.machine.timings import MachineTimings
from racksmith.controllers.machine.userdata import render_user_data
from racksmith.kinds.cluster import Machine
from racksmith.kinds.hostannotations import PROFILE
from racksmith.kinds.ipam import IpamHost
from racksmith.kinds.lcm import LCMMachine
from racksmith.kinds.metal import BareMetalHost
from racksmith.runtime.client import Client
from racksmith.runtime.conditions import ConditionSpec, EventSpec
from racksmith.runtime.errors import Conflict, NotFound
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.hostaccess import ensure_host_access, host_agent_token
from racksmith.runtime.resources import (
    HOSTS,
    IPAMHOSTS,
    LCMMACHINES,
    MACHINES,
    NODES,
    SECRETS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result

_CLAIM_ATTEMPTS = 3
"""Fresh reads of one candidate host before moving on to the next."""


@dataclass(frozen=True)
class SecretData:
    """A Secret's decoded data and version. Never log ``data``."""

    resource_version: str
    data: dict[str, bytes] = field(repr=False)
    raw: dict[str, Any] = field(repr=False)

    @property
    def uid(self) -> str:
        return str((self.raw.get("metadata") or {}).get("uid") or "")

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> SecretData:
        data = {str(k): base64.b64decode(v) for k, v in (raw.get("data") or {}).items()}
        return cls(str((raw.get("metadata") or {}).get("resourceVersion") or ""), data,
                   dict(raw))


@dataclass
class Raw:
    """The objects of a reconcile as read (dicts with their resourceVersion)."""

    machine: dict[str, Any]
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    ipamhost: dict[str, Any] | None = None
    lcm: dict[str, Any] | None = None
    node: dict[str, Any] | None = None
    user_data: SecretData | None = None
    cluster_client: Client | None = None
    """The controller's Client inside the Machine's cluster (Node, pods,
    evictions); None: the management client (a SharedPlane's)."""


@dataclass
class Outcome:
    """What performing an action adds to the step."""

    conditions: list[ConditionSpec] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)
    requeue: float | None = 0.0
    write_status: bool = True


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def writes_status(action: Action) -> bool:
    """The step's status is written after ``action`` (all but the finalizer edits)."""
    return not isinstance(action, AddFinalizer | RemoveFinalizer)


class Committer:
    """Performs steps (see the module docstring)."""

    def __init__(self, client: Client, clock: Clock, timings: MachineTimings | None = None,
                 recorder: EventRecorder | None = None) -> None:
        self.client = client
        self.clock = clock
        self.timings = timings if timings is not None else MachineTimings()
        self.recorder = recorder if recorder is not None else EventRecorder(
            getattr(client, "api_client", None), n.COMPONENT, clock=clock)

    def now(self) -> datetime:
        return self.clock.wall().replace(microsecond=0)

    async def commit(self, machine: Machine, raw: Raw, step: Step, log: Any) -> Result:
        """Carry out ``step`` for ``machine``; raises ``Conflict`` on a lost race,
        ``NotFound`` when the Machine is gone, and ``IllegalTransition`` (before
        doing anything) for a phase change the state table does not list."""
        action = step.action
        if writes_status(action):
            PHASES.check(machine.status.phase if machine.status else None, step.phase)
        outcome = await self._perform(machine, raw, action)
        if not isinstance(action, Wait):
            log.info("machine step", action=type(action).__name__, phase=step.phase.value)
        events = list(outcome.events)
        if outcome.write_status:
            old = machine.status
            new = apply_step(old, step, outcome.conditions, now=self.now(),
                             generation=machine.metadata.generation)
            if not same_status(old, new):
                body = copy.deepcopy(raw.machine)
                body["status"] = _dump(new)
                await self.client.update_status(MACHINES, body)
                events = status_events(old, step, outcome.conditions) + events
                old_phase = old.phase.value if old and old.phase else ""
                if old_phase != step.phase.value:
                    log.info("machine phase", old=old_phase, new=step.phase.value)
        await self.recorder.record_all(raw.machine, events)
        if isinstance(action, Wait):
            return Done() if action.seconds is None else RequeueAfter(action.seconds)
        if isinstance(action, RemoveFinalizer):
            return Done()
        return RequeueAfter(outcome.requeue or 0.0)

    async def _perform(self, machine: Machine, raw: Raw, action: Action) -> Outcome:
        meta = machine.metadata
        name, ns = meta.name or "", meta.namespace or ""
        match action:
            case Wait():
                return Outcome()
            case AddFinalizer():
                body = copy.deepcopy(raw.machine)
                body["metadata"].setdefault("finalizers", []).append(n.FINALIZER)
                await self.client.update(MACHINES, body)
                return Outcome(write_status=False)  # see writes_status
            case RemoveFinalizer():
                body = copy.deepcopy(raw.machine)
                body["metadata"]["finalizers"] = [
                    f for f in body["metadata"].get("finalizers") or [] if f != n.FINALIZER]
                await self.client.update(MACHINES, body)
                return Outcome(write_status=False)
            case ClaimHost(candidates=names):
                return await self._claim(machine, names)
            case EnsureIpamHost(spec=spec):
                if raw.ipamhost is None:
                    await self.client.create(IPAMHOSTS, self._owned(
                        machine, IpamHost.info.api_version, "IpamHost", name, _dump(spec)))
                else:
                    body = copy.deepcopy(raw.ipamhost)
                    body.setdefault("spec", {}).update(_dump(spec))
                    await self.client.update(IPAMHOSTS, body)
                return Outcome()
            case WriteLCMMachine(spec=spec):
                if raw.lcm is None:
                    await self.client.create(LCMMACHINES, self._owned(
                        machine, LCMMachine.info.api_version, "LCMMachine", name, _dump(spec)))
                else:
                    body = copy.deepcopy(raw.lcm)
                    body["spec"] = _dump(spec)
                    await self.client.update(LCMMACHINES, body)
                return Outcome()
            case WriteUserData(access=access, token=token, files=files):
                current = raw.user_data
                if token is None:
                    # the token is bound to the Secret (name and uid): the
                    # Secret comes first, empty; a crash here leaves an
                    # empty one, which the next reconcile fills
                    if current is None:
                        current = SecretData.from_raw(await self.client.create(
                            SECRETS, self._user_data(machine, None)))
                    await self._host_access(machine)
                    token = await self._agent_token(ns, name, current.uid)
                text = render_user_data(access, token, ns, name, files)
                secret = self._user_data(machine, text)
                if current is None:
                    await self.client.create(SECRETS, secret)
                else:
                    secret["metadata"]["resourceVersion"] = current.resource_version
                    await self.client.update(SECRETS, secret)
                return Outcome()
            case ProvisionHost(host=host, image=image, profile=profile):
                body = copy.deepcopy(raw.hosts[host])
                spec = body.setdefault("spec", {})
                spec["image"] = _dump(image)
                spec["userData"] = {"name": n.user_data_secret(name)}
                spec["online"] = True
                annotations = body["metadata"].setdefault("annotations", {})
                if profile is not None and annotations.get(PROFILE) != profile:
                    annotations[PROFILE] = profile
                    annotations[n.PROFILE_SET_ANNOTATION] = name
                await self.client.update(HOSTS, body)
                return Outcome(events=[EventSpec(
                    "Normal", "ProvisioningRequested", f"host {host}: image {image.url}")])
            case ReleaseHost(host=host, clear_profile=clear_profile):
                body = copy.deepcopy(raw.hosts[host])
                spec = body.setdefault("spec", {})
                for key in ("image", "userData", "consumerRef"):
                    spec.pop(key, None)
                spec["online"] = False
                if clear_profile:
                    annotations = body["metadata"].get("annotations") or {}
                    annotations.pop(PROFILE, None)
                    annotations.pop(n.PROFILE_SET_ANNOTATION, None)
                await self.client.update(HOSTS, body)
                return Outcome(events=[EventSpec("Normal", "HostReleased", f"host {host}")])
            case SyncNodeRoles(labels=labels, taints=taints):
                node = copy.deepcopy(raw.node or {})
                node["metadata"]["labels"] = labels
                node.setdefault("spec", {})["taints"] = list(taints)
                await self._update_node(raw, node)
                return Outcome()
            case CordonNode():
                node = copy.deepcopy(raw.node or {})
                node.setdefault("spec", {})["unschedulable"] = True
                await self._update_node(raw, node)
                return Outcome(events=[EventSpec("Normal", "Cordoned", f"Node {name}")])
            case EvictPods(pods=pods):
                evicted = 0
                for pod in pods:
                    refusal = await self._in_cluster(raw).evict(pod.namespace, pod.name)
                    if refusal is not None:
                        return Outcome(
                            conditions=[ConditionSpec.false(
                                n.DRAINED, n.EVICTION_REFUSED,
                                f"pod {pod}: {refusal.describe()}")],
                            requeue=self.timings.retry_drain)
                    evicted += 1
                return Outcome(events=[EventSpec(
                    "Normal", "Evicted", f"evicted {evicted} pods from Node {name}")])
            case DeleteNode():
                await self._in_cluster(raw).delete(NODES, None, name)
                return Outcome()
            case DeleteLCMMachine():
                await self.client.delete(LCMMACHINES, ns, name)
                return Outcome()
            case DeleteIpamHost():
                await self.client.delete(IPAMHOSTS, ns, name)
                return Outcome()
            case DeleteUserData():
                await self.client.delete(SECRETS, ns, n.user_data_secret(name))
                return Outcome()
        raise TypeError(f"unknown action {action!r}")

    def _user_data(self, machine: Machine, text: str | None) -> dict[str, Any]:
        """Secret ``m-user-data`` owned by the Machine (None: empty, for now)."""
        secret = self._owned(machine, "v1", "Secret",
                             n.user_data_secret(machine.metadata.name or ""), None)
        secret.pop("spec")
        secret["type"] = "Opaque"
        secret["data"] = {} if text is None else {
            n.USER_DATA_KEY: base64.b64encode(text.encode()).decode()}
        return secret

    async def _host_access(self, machine: Machine) -> None:
        """The host agent's ServiceAccount, Role and RoleBinding
        (``racksmith-host-<m>``, :mod:`racksmith.hostcreds`), owned by the
        Machine. Looked at whenever a token is requested (new user data,
        renewal), not on every reconcile."""
        owned = self._owned(machine, "v1", "ServiceAccount", "", None)["metadata"]
        await ensure_host_access(self.client, machine.metadata.namespace or "",
                                 machine.metadata.name or "",
                                 {"labels": owned["labels"],
                                  "ownerReferences": owned["ownerReferences"]})

    async def _agent_token(self, namespace: str, name: str, secret_uid: str) -> str:
        """A new token for the host agent of machine ``name``: its own
        ServiceAccount, bound to its user-data Secret (of uid ``secret_uid``)."""
        if not secret_uid:
            raise Conflict(409, "Conflict", f"Secret {namespace}/{n.user_data_secret(name)} "
                           "has no uid yet")
        return await host_agent_token(self.client, namespace, name, secret_uid,
                                      seconds=self.timings.agent_token_seconds)

    async def _claim(self, machine: Machine, names: tuple[str, ...]) -> Outcome:
        """Claim the first still-free host of ``names``; a 409 means someone
        else wrote it first: read it again and, if it is taken, try the next."""
        ns = machine.metadata.namespace or ""
        ref = _dump(consumer_ref(machine))
        for host_name in names:
            for _ in range(_CLAIM_ATTEMPTS):
                raw = await self.client.get(HOSTS, ns, host_name, live=True)
                if raw is None:
                    break
                host = BareMetalHost.model_validate(raw)
                if is_consumed_by(host, machine):
                    return Outcome()
                if not is_candidate(host, machine):
                    break
                raw.setdefault("spec", {})["consumerRef"] = ref
                try:
                    await self.client.update(HOSTS, raw)
                except Conflict:
                    continue  # the claim's own race: read the host again
                return Outcome(events=[EventSpec("Normal", "HostClaimed",
                                                 f"claimed host {host_name}")])
        return Outcome()

    def _in_cluster(self, raw: Raw) -> Client:
        return raw.cluster_client if raw.cluster_client is not None else self.client

    async def _update_node(self, raw: Raw, node: dict[str, Any]) -> None:
        """PUT the Node as read (optimistic); a Node gone meanwhile is fine."""
        if not node.get("metadata"):
            return
        try:
            await self._in_cluster(raw).update(NODES, node)
        except NotFound:
            return

    @staticmethod
    def _owned(machine: Machine, api_version: str, kind: str, name: str,
               spec: Any) -> dict[str, Any]:
        meta = machine.metadata
        return {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": meta.namespace,
                "labels": {n.MACHINE_LABEL: meta.name or "",
                           n.CLUSTER_LABEL: machine.spec.cluster_name},
                "ownerReferences": [{
                    "apiVersion": n.MACHINE_API_VERSION, "kind": "Machine",
                    "name": meta.name, "uid": meta.uid, "controller": True,
                    "blockOwnerDeletion": True,
                }],
            },
            "spec": spec,
        }
