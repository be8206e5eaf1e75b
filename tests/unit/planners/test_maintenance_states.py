"""The node maintenance state table: within one walk, every decision that follows a
write is one the table lists (every small world, enumerated, and random worlds), every
listed transition is one the planner makes, and the executor stops a walk the table
refuses without performing the refused decision."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.controllers.maintenance.flow import NodeMaintenance
from racksmith.kinds.maintenance import MaintenanceScope
from racksmith.planners.maintenance import (
    CORDONED_BY,
    DRAIN_STARTED,
    REBOOT_BOOT_ID,
    REBOOT_REQUESTED,
    WAS_UNSCHEDULABLE,
    Action,
    Cordon,
    CreateRequest,
    Evict,
    LcmView,
    LockView,
    NodeJob,
    NodeObserved,
    NodeView,
    PodView,
    RebootPolicy,
    RecordReboot,
    Refusal,
    ReleaseReboot,
    RequestReboot,
    RequestView,
    SetRelease,
    StartDrain,
    Uncordon,
    Wait,
    decide,
    rfc3339,
)
from racksmith.planners.maintenance import NodeState as N
from racksmith.planners.maintenance_states import NODE_FLOW
from racksmith.runtime.statetable import IllegalTransition

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
OWNER = "plan.ns.p"
STUCK = "stuck"
"""A pod whose evictions a disruption budget refuses."""


def perform(obs: NodeObserved, action: Action) -> NodeObserved:
    """The world after the flow's ``action`` (nothing else moves meanwhile)."""
    req = obs.request
    ann = dict(req.annotations) if req else {}
    node = obs.node
    match action:
        case CreateRequest(was_unschedulable=was):
            return replace(obs, request=RequestView(
                obs.job.owner, {WAS_UNSCHEDULABLE: "true"} if was else {}))
        case Cordon(mark=mark):
            assert node is not None
            marks = {CORDONED_BY: obs.job.owner} if mark else {}
            return replace(obs, node=replace(node, unschedulable=True,
                                             annotations={**node.annotations, **marks}))
        case StartDrain(at=at):
            return replace(obs, request=RequestView(obs.job.owner,
                                                    {**ann, DRAIN_STARTED: rfc3339(at)}))
        case Evict(pods=pods):
            refused = Refusal("disruption budget", "pdb")
            kept = tuple(replace(p, refusal=refused, retry_at=obs.now + timedelta(seconds=2))
                         if p.name == STUCK else p
                         for p in obs.pods if p not in pods or p.name == STUCK)
            return replace(obs, pods=kept)
        case SetRelease(release=release):
            return replace(obs, machine_release=release)
        case RecordReboot(boot_id=boot_id):
            ann.pop(REBOOT_REQUESTED, None)
            return replace(obs, request=RequestView(obs.job.owner,
                                                    {**ann, REBOOT_BOOT_ID: boot_id}))
        case RequestReboot(at=at):
            return replace(obs, bmh_reboot_pending=True, request=RequestView(
                obs.job.owner, {**ann, REBOOT_REQUESTED: rfc3339(at)}))
        case ReleaseReboot():
            return replace(obs, bmh_reboot_pending=False)
        case Uncordon(keep_cordoned=keep):
            assert node is not None
            left = {k: v for k, v in node.annotations.items() if k != CORDONED_BY}
            return replace(obs, node=replace(node, annotations=left,
                                             unschedulable=node.unschedulable and keep))
    raise AssertionError(f"not a write: {action!r}")


def step(obs: NodeObserved) -> tuple[N, N] | None:
    """(the state of a write, the state decided after it), or None when ``obs`` waits."""
    first = decide(obs)
    if isinstance(first.action, Wait):
        return None
    return first.progress.state, decide(perform(obs, first.action)).progress.state


# --- small worlds, every one --------------------------------------------------------------

OURS = {CORDONED_BY: OWNER}
NODES = [None, NodeView("m1", ready=True, boot_id="b1"), NodeView("m1", boot_id="b1"),
         NodeView("m1", unschedulable=True, annotations=OURS, ready=True, boot_id="b1"),
         NodeView("m1", unschedulable=True, annotations=OURS, boot_id="b2"),
         NodeView("m1", unschedulable=True, annotations=OURS, ready=True, boot_id="b2"),
         NodeView("m1", unschedulable=True, ready=True, boot_id="b2"),
         NodeView("m1", unschedulable=True, ready=True, boot_id="b1"),
         NodeView("m1", ready=True)]
STARTED = {DRAIN_STARTED: rfc3339(NOW - timedelta(seconds=10))}
REQUESTS = [None, RequestView("reboot.ns.c"), RequestView(OWNER), RequestView(OWNER, STARTED),
            RequestView(OWNER, {**STARTED, WAS_UNSCHEDULABLE: "true"}),
            RequestView(OWNER, {**STARTED, REBOOT_BOOT_ID: "b1"}),
            RequestView(OWNER, {**STARTED, REBOOT_BOOT_ID: "b1",
                                REBOOT_REQUESTED: rfc3339(NOW - timedelta(hours=1))})]
LOCKS = [(), (LockView("w.m1", "w"),), (LockView("w.m1", "w", "failed"),),
         (LockView("w.m1", "w", "inactive"),)]
PODS = [(), (PodView("ns", "web"),), (PodView("ns", STUCK),)]
LCMS = [None, LcmView("r2", 2, "Ready", 2, "r2"), LcmView("r2", 2, "Deploying", 1, "r1"),
        LcmView("r2", 2, "Ready", 2, "r2", reboot_required=True)]
JOBS = [NodeJob(namespace="ns", machine="m1", owner=OWNER, cluster="c", release=release,
                reboot=policy, drain_timeout=timeout, scope=MaintenanceScope.OS)
        for release in (None, "r2") for policy in RebootPolicy for timeout in (0.0, 60.0)]


def small_worlds() -> Iterator[NodeObserved]:
    for job, node, req, locks, pods, release, lcm, (pending, on) in itertools.product(
            JOBS, NODES, REQUESTS, LOCKS, PODS, (None, "r2"), LCMS,
            ((False, None), (True, True), (True, False))):
        yield NodeObserved(job=job, now=NOW, node=node, request=req, locks=locks, pods=pods,
                           machine_release=release, lcm=lcm, bmh="h1",
                           bmh_reboot_pending=pending, bmh_powered_on=on)


CONCURRENT = {(N.REQUESTED, N.WAITING_FOR_OTHER), (N.REQUESTED, N.WAITING_FOR_NODE),
              (N.UNCORDONING, N.WAITING_FOR_NODE)}
"""Listed transitions that need the world to move during the walk (another owner's
request created first, the Node gone or no longer Ready between two reads)."""


def test_every_small_world_steps_inside_the_table_and_the_table_is_no_larger() -> None:
    made = {pair for pair in map(step, small_worlds()) if pair is not None}
    moves = {(a, b) for a, b in made if a != b}
    listed = {(t.source, t.target) for t in NODE_FLOW.transitions}
    assert moves - listed == set()
    assert listed - moves == CONCURRENT


def test_the_concurrent_transitions_happen_when_the_world_moves() -> None:
    job = JOBS[0]
    ready = NodeView("m1", ready=True, boot_id="b1")
    fresh = NodeObserved(job=job, now=NOW, node=ready)
    assert decide(fresh).progress.state == N.REQUESTED
    taken = replace(fresh, request=RequestView("reboot.ns.c"))
    assert decide(taken).progress.state == N.WAITING_FOR_OTHER
    assert decide(replace(perform(fresh, decide(fresh).action), node=None)
                  ).progress.state == N.WAITING_FOR_NODE
    for state, world in [
        (N.REBOOTING, NodeObserved(job=replace(job, reboot=RebootPolicy.ALWAYS), now=NOW,
                                   node=replace(ready, unschedulable=True),
                                   request=RequestView(OWNER, {**STARTED,
                                                               WAS_UNSCHEDULABLE: "true"}),
                                   bmh="h1")),
        (N.UNCORDONING, NodeObserved(job=job, now=NOW, request=RequestView(OWNER, STARTED),
                                     node=replace(ready, unschedulable=True,
                                                  annotations=OURS))),
    ]:
        d = decide(world)
        assert d.progress.state == state
        after = perform(world, d.action)
        assert after.node is not None
        for gone in (None, replace(after.node, ready=False)):
            following = decide(replace(after, node=gone)).progress.state
            assert following in (N.WAITING_FOR_NODE, state)
            assert NODE_FLOW.is_allowed(state, following)
        assert decide(replace(after, node=None)).progress.state == N.WAITING_FOR_NODE


def test_what_the_table_refuses(illegal_transitions: list[IllegalTransition]) -> None:
    waits = {N.WAITING_FOR_OTHER, N.WAITING_FOR_LOCKS, N.LOCK_FAILED, N.WAITING_FOR_NODE,
             N.READY_TO_FINISH}
    assert all(NODE_FLOW.targets(s) == [] for s in waits)
    for back in [(N.DRAINING, N.WAITING_FOR_LOCKS), (N.APPLYING, N.DRAINING),
                 (N.REBOOTING, N.APPLYING), (N.UNCORDONING, N.DRAINING),
                 (N.BLOCKED, N.DRAINING), (N.APPLYING, N.REQUESTED)]:
        with pytest.raises(IllegalTransition):
            NODE_FLOW.check(*back)
    assert len(illegal_transitions) == 6


# --- random worlds --------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> NodeObserved:
    job = replace(JOBS[0], release=draw(st.sampled_from([None, "r2"])),
                  reboot=draw(st.sampled_from(list(RebootPolicy))),
                  scope=draw(st.sampled_from(list(MaintenanceScope))),
                  drain_timeout=draw(st.sampled_from([0.0, 5.0, 600.0])))
    now = NOW + timedelta(seconds=draw(st.integers(0, 4000)))
    annotations = draw(st.dictionaries(
        st.sampled_from([DRAIN_STARTED, WAS_UNSCHEDULABLE, REBOOT_BOOT_ID, REBOOT_REQUESTED]),
        st.sampled_from([rfc3339(NOW), "true", "b1", "b2", "garbage"]), max_size=4))
    request = draw(st.sampled_from([None, RequestView(OWNER, annotations),
                                    RequestView("reboot.ns.c"), RequestView(None)]))
    node = None
    if draw(st.booleans()):
        node = NodeView("m1", unschedulable=draw(st.booleans()), ready=draw(st.booleans()),
                        boot_id=draw(st.sampled_from([None, "b1", "b2"])),
                        annotations=draw(st.sampled_from([{}, OURS, {CORDONED_BY: "other"}])))
    pods = tuple(PodView("ns", name, retry_at=draw(st.sampled_from(
        [None, now + timedelta(seconds=3), now - timedelta(seconds=3)])))
        for name in draw(st.lists(st.sampled_from(["web", STUCK, "db"]), unique=True)))
    locks = tuple(LockView(f"{c}.m1", c, draw(st.sampled_from(["active", "inactive", "failed"])))
                  for c in draw(st.lists(st.sampled_from(["w", "x"]), unique=True)))
    lcm = None
    if draw(st.booleans()):
        lcm = LcmView(draw(st.sampled_from(["r1", "r2"])), 2,
                      draw(st.sampled_from([None, "Ready", "Deploying", "Failed"])),
                      draw(st.sampled_from([1, 2])), draw(st.sampled_from([None, "r1", "r2"])),
                      reboot_required=draw(st.booleans()))
    return NodeObserved(job=job, now=now, node=node, request=request, locks=locks, pods=pods,
                        machine_release=draw(st.sampled_from([None, "r1", "r2"])), lcm=lcm,
                        bmh=draw(st.sampled_from([None, "h1"])),
                        bmh_reboot_pending=draw(st.booleans()),
                        bmh_powered_on=draw(st.sampled_from([None, True, False])))


@settings(max_examples=500, deadline=None)
@given(worlds())
def test_in_any_world_a_write_leads_to_a_listed_state(world: NodeObserved) -> None:
    pair = step(world)
    if pair is not None:
        assert NODE_FLOW.is_allowed(*pair), pair


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_a_whole_walk_stays_inside_the_table(world: NodeObserved) -> None:
    """Walk as ``advance`` does (decide, write, decide again) until the planner waits."""
    decision = decide(world)
    for _ in range(12):
        if isinstance(decision.action, Wait):
            return
        world = perform(world, decision.action)
        following = decide(world)
        assert NODE_FLOW.is_allowed(decision.progress.state, following.progress.state)
        decision = following


# --- the executor refuses ------------------------------------------------------------------


class Scripted(NodeMaintenance):
    """The flow over scripted observations; records the writes it performs."""

    def __init__(self, *worlds: NodeObserved) -> None:
        super().__init__(None)
        self.worlds = list(worlds)
        self.acted: list[Action] = []

    async def inside(self, job: NodeJob) -> Any:
        return None

    async def observe(self, job: NodeJob, *, live_locks: bool = False,
                      inside: Any = None) -> NodeObserved:
        return self.worlds.pop(0)

    async def _act(self, inside: Any, job: NodeJob, observed: NodeObserved, action: Action,
                   log: Any) -> None:
        self.acted.append(action)


async def test_advance_stops_a_walk_the_table_refuses(
        illegal_transitions: list[IllegalTransition]) -> None:
    job = replace(JOBS[0], release="r2")
    ours = NodeView("m1", unschedulable=True, annotations=OURS, ready=True, boot_id="b1")
    applying = NodeObserved(job=job, now=NOW, node=ours, request=RequestView(OWNER, STARTED),
                            lcm=LcmView("r2", 2, "Ready", 2, "r2"))
    assert decide(applying).action == SetRelease("r2")
    # Between the write and the next read someone uncordons the node: the planner would
    # cordon it again (Draining), which the set release cannot lead to.
    moved = replace(applying, machine_release="r2", node=replace(ours, unschedulable=False))
    assert decide(moved).action == Cordon()
    flow = Scripted(applying, moved)
    progress = await flow.advance(job)
    assert flow.acted == [SetRelease("r2")]
    assert progress.state == N.APPLYING
    assert "Applying → Draining is not in the state table" in progress.message
    assert progress.requeue == flow.timings.poll
    assert [(e.source, e.target) for e in illegal_transitions] == [(N.APPLYING, N.DRAINING)]
