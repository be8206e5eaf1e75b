"""Machine status from a step, the Events it is worth, and the Cluster summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from racksmith.controllers.cluster.summary import members, summarize
from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.plan import Step, Wait
from racksmith.controllers.machine.status import apply_step, same_status, status_events
from racksmith.controllers.machine.userdata import agent_access
from racksmith.kinds.cluster import Cluster, Machine, MachinePhase, MachineStatus
from racksmith.kinds.common import ConditionStatus
from racksmith.runtime.conditions import ConditionSpec
from tests.unit.machine import builders as b

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_transition_time_moves_only_with_the_status() -> None:
    wait = ConditionSpec.false(n.NETWORK_READY, "Pending", "rendering")
    first = apply_step(None, Step(Wait(), MachinePhase.PENDING, [wait]), now=T0, generation=3)
    assert first.observed_generation == 3 and first.phase is MachinePhase.PENDING
    later = T0 + timedelta(minutes=1)
    error = ConditionSpec.false(n.NETWORK_READY, "Error", "subnet x not found")
    second = apply_step(first, Step(Wait(), MachinePhase.PENDING, [error]), now=later,
                        generation=3)
    (c,) = second.conditions
    assert (c.reason, c.last_transition_time) == ("Error", T0)
    ok = ConditionSpec.true(n.NETWORK_READY, "OK", "rendered")
    third = apply_step(second, Step(Wait(), MachinePhase.PENDING, [ok]), now=later,
                       generation=3)
    assert third.conditions[0].last_transition_time == later
    assert same_status(third, third.model_copy(deep=True))
    assert not same_status(second, third)


def test_outcome_conditions_win() -> None:
    step = Step(Wait(), MachinePhase.DELETING,
                [ConditionSpec.false(n.DRAINED, "Draining", "evicting 1 pods")])
    refused = ConditionSpec.false(n.DRAINED, n.EVICTION_REFUSED, "pod default/web: budget")
    status = apply_step(None, step, [refused], now=T0, generation=1)
    assert [(c.type, c.reason) for c in status.conditions] == [(n.DRAINED, n.EVICTION_REFUSED)]
    events = status_events(None, step, [refused])
    assert [(e.type, e.reason) for e in events] == [("Normal", "Deleting"),
                                                     ("Warning", n.EVICTION_REFUSED)]


def test_events_for_problems_not_for_progress() -> None:
    old = MachineStatus(phase=MachinePhase.PENDING)
    progress = Step(Wait(), MachinePhase.PENDING, [
        ConditionSpec.false(n.NETWORK_READY, "Pending", "rendering"),
        ConditionSpec.false(n.READY, "NetworkReady", "rendering")])
    assert status_events(old, progress) == []
    problem = Step(Wait(), MachinePhase.PENDING, [
        ConditionSpec.false(n.HOST_CLAIMED, n.NO_MATCHING_HOST, "no host")])
    (event,) = status_events(old, problem)
    assert (event.type, event.reason) == ("Warning", n.NO_MATCHING_HOST)
    again = apply_step(old, problem, now=T0, generation=1)
    assert status_events(again, problem) == []  # unchanged: no new Event


def test_agent_access_needs_every_key_and_no_shared_token() -> None:
    assert agent_access({}) == "has no server, ca.crt key"
    assert agent_access({"server": b"https://x"}) == "has no ca.crt key"
    access = agent_access({"server": b"https://x\n", "ca.crt": b"PEM", "token": b"s3cret\n"})
    assert not isinstance(access, str)
    assert access.server == "https://x" and "s3cret" not in repr(access)
    assert not hasattr(access, "token")  # each host's token is its own


def _member(name: str, phase: str | None, release: str | None = None,
            roles: list[str] | None = None, cluster: str = "demo") -> Machine:
    m = b.machine(name, roles=roles, status={"phase": phase, "release": release})
    m.spec.cluster_name = cluster
    return m


def test_cluster_summary() -> None:
    cluster = b.cluster()
    assert isinstance(cluster, Cluster)
    empty = summarize(cluster, [], True, now=T0)
    assert (empty.machines_total, empty.machines_ready, empty.release) == (0, 0, None)
    ready = {c.type: (c.status, c.reason) for c in empty.conditions}
    assert ready["Ready"] == (ConditionStatus.FALSE, "NoMachines")
    assert ready["ReleaseFound"] == (ConditionStatus.TRUE, "Found")
    machines = [_member("a", "Ready", "rel-1"), _member("b", "Deploying"),
                _member("x", "Ready", "rel-1", cluster="other")]
    mine = members(cluster, machines)
    status = summarize(cluster, mine, False, now=T0)
    assert (status.machines_total, status.machines_ready, status.release) == (2, 1, None)
    conds = {c.type: (c.status, c.reason, c.message) for c in status.conditions}
    assert conds["Ready"][:2] == (ConditionStatus.FALSE, "MachinesNotReady")
    assert "b" in (conds["Ready"][2] or "")
    assert conds["ReleaseFound"][:2] == (ConditionStatus.FALSE, "NotFound")
    done = [_member("a", "Ready", "rel-1"), _member("b", "Ready", "rel-1")]
    status = summarize(cluster, done, True, now=T0)
    assert (status.machines_total, status.machines_ready, status.release) == (2, 2, "rel-1")
    assert {c.type: c.status for c in status.conditions}["Ready"] is ConditionStatus.TRUE


def test_cluster_bootstrap_unique() -> None:
    two = [_member("a", None, roles=["bootstrap"]), _member("b", None, roles=["bootstrap"])]
    status = summarize(b.cluster(), two, True, now=T0)
    cond = next(c for c in status.conditions if c.type == "BootstrapUnique")
    assert cond.status is ConditionStatus.FALSE and "a, b" in (cond.message or "")
