"""The reference workload controller's pure rules (workloads_plan.plan)."""

from __future__ import annotations

from collections.abc import Sequence

from racksmith.emulator.workloads_plan import (
    Config,
    LockStatus,
    NodeView,
    PodView,
    RequestView,
    World,
    plan,
)


def world(pods: list[PodView], requests: Sequence[RequestView] = (),
          locks: dict[str, LockStatus] | None = None, **cfg: int) -> World:
    nodes = tuple(NodeView(n, True, True, z) for n, z in
                  [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")])
    return World(Config(**cfg), nodes, tuple(requests), None,
                 locks if locks is not None else {n.name: LockStatus() for n in nodes},
                 tuple(pods))


def test_config_parsing_falls_back_to_defaults() -> None:
    assert Config.from_data(None) == Config(6, 2, "metal.racksmith.io/rack")
    assert Config.from_data({"instances": "3", "maxParallel": "x", "zoneKey": " "}) == \
        Config(3, 2, "metal.racksmith.io/rack")
    assert Config.from_data({"maxParallel": "0"}).max_parallel == 2
    assert Config.from_data(Config(1, 3, "z").as_data()) == Config(1, 3, "z")


def test_new_instances_spread_evenly() -> None:
    acts = plan(world([], instances=6))
    placed = [c.node for c in acts.create_pods]
    assert sorted(placed) == ["a1", "a1", "a2", "a2", "b1", "b2"]
    assert acts.lock_status == {}


def test_migration_creates_replacement_then_deletes_old() -> None:
    pods = [PodView("i0-x", "instance-0", "a1", True)]
    req = RequestView("a1", "a1", "uid-1", "r2")
    acts = plan(world(pods, [req], instances=1))
    (create,) = acts.create_pods
    assert create.instance == "instance-0" and create.node != "a1"
    assert create.migration == "uid-1"
    assert acts.lock_status["a1"].state == "active" and acts.busy
    # The replacement exists, not Ready yet: wait.
    pods.append(PodView("i0-y", "instance-0", create.node, False, migration="uid-1"))
    acts = plan(world(pods, [req], instances=1))
    assert not acts.create_pods and not acts.delete_pods
    # Ready: the old pod goes; once gone the lock is released for the release.
    pods[1] = PodView("i0-y", "instance-0", create.node, True, migration="uid-1")
    assert plan(world(pods, [req], instances=1)).delete_pods == ["i0-x"]
    acts = plan(world(pods[1:], [req], instances=1))
    assert acts.lock_status["a1"] == LockStatus("inactive", release="r2",
                                                progress="migrated 1 instance(s)",
                                                percentage=100)


def test_two_nodes_in_maintenance_never_delete_each_others_copy() -> None:
    """instance-5 has a copy on a1 and one on a2, both Ready, and both nodes
    are in maintenance: neither copy is a replacement for the other. A third
    copy goes to a node out of maintenance; only once it is Ready do the two
    go (found as "4 Ready pods, fewer than 5" in the update e2e)."""
    pods = [PodView("i5-x", "instance-5", "a1", True),
            PodView("i5-y", "instance-5", "a2", True, migration="uid-1")]
    reqs = [RequestView("a1", "a1", "uid-1", "r2", "1"),
            RequestView("a2", "a2", "uid-2", "r2", "2")]
    acts = plan(world(pods, reqs, instances=6, max_parallel=2))
    assert not set(acts.delete_pods) & {"i5-x", "i5-y"}
    targets = [c.node for c in acts.create_pods if c.instance == "instance-5"]
    assert len(targets) == 1 and targets[0] in {"b1", "b2"}
    pods.append(PodView("i5-z", "instance-5", sorted(targets)[0], True, migration="uid-1"))
    acts = plan(world(pods, reqs, instances=6, max_parallel=2))
    assert {"i5-x", "i5-y"} <= set(acts.delete_pods)
    assert "i5-z" not in acts.delete_pods


def test_zone_and_parallel_limits() -> None:
    locks = {"a1": LockStatus("inactive"), "a2": LockStatus(), "b1": LockStatus(),
             "b2": LockStatus()}
    reqs = [RequestView("a1", "a1", "u1", None, "1"), RequestView("b1", "b1", "u2", None, "2"),
            RequestView("a2", "a2", "u3", None, "3")]
    acts = plan(world([], reqs, locks, instances=0, max_parallel=2))
    assert acts.lock_status["a2"].state == "inactive"
    assert "another" in (acts.lock_status["b1"].progress or "")
    acts = plan(world([], reqs, locks, instances=0, max_parallel=1))
    assert "maxParallel 1" in (acts.lock_status["a2"].progress or "")


def test_pinned_fails_without_moving_anything() -> None:
    pods = [PodView("p", "instance-0", "a1", True, pinned="local data")]
    acts = plan(world(pods, [RequestView("a1", "a1", "u", None)], instances=1))
    assert acts.lock_status["a1"] == LockStatus(
        "failed", error_message="instance instance-0 cannot migrate: local data")
    assert not acts.create_pods and not acts.delete_pods


def test_request_gone_reactivates_and_stray_duplicate_is_dropped() -> None:
    pods = [PodView("old", "instance-0", "a1", True),
            PodView("new", "instance-0", "a2", False, migration="u")]
    locks = {"a1": LockStatus("inactive", release="r2"), "a2": LockStatus(),
             "b1": LockStatus(), "b2": LockStatus()}
    acts = plan(world(pods, [], locks, instances=1))
    assert acts.lock_status["a1"] == LockStatus()
    assert acts.delete_pods == ["new"]  # keep the Ready one
