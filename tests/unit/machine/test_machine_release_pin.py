"""The Machine release pin: which ClusterRelease a Machine's LCMMachine renders from."""

from __future__ import annotations

from typing import Any

from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.plan import Wait, WriteLCMMachine, decide, release_to_render
from racksmith.kinds.cluster import Cluster, ClusterRelease, Machine
from racksmith.kinds.common import ConditionStatus
from tests.unit.machine import builders as b

DEPLOYED = {"release": "rel-1"}


def pinned(annotation: str | None = None, status: dict[str, Any] | None = None) -> Machine:
    m = b.machine(status=status)
    if annotation is not None:
        m.metadata.annotations[n.RELEASE_ANNOTATION] = annotation
    return m


def cluster_at(release: str) -> Cluster:
    c = b.cluster()
    c.spec.release = release
    return c


def release_named(name: str) -> ClusterRelease:
    r = b.release()
    r.metadata.name = name
    return r


def lcm_at(release: str) -> Any:
    return b.lcm({"machineRef": {"name": "m1"}, "clusterName": "demo", "release": release,
                  "stateItems": []})


def test_a_new_machine_uses_the_clusters_release() -> None:
    assert release_to_render(pinned(), cluster_at("rel-2"), None) == "rel-2"
    # An LCMMachine rendered before the first deploy follows the cluster too.
    assert release_to_render(pinned(), cluster_at("rel-2"), lcm_at("rel-1")) == "rel-2"


def test_a_deployed_machine_keeps_its_lcmmachine_release() -> None:
    m = pinned(status=DEPLOYED)
    assert release_to_render(m, cluster_at("rel-2"), lcm_at("rel-1")) == "rel-1"
    # No LCMMachine (yet again): the cluster's release.
    assert release_to_render(m, cluster_at("rel-2"), None) == "rel-2"


def test_the_annotation_wins() -> None:
    m = pinned("rel-3", status=DEPLOYED)
    assert release_to_render(m, cluster_at("rel-2"), lcm_at("rel-1")) == "rel-3"
    assert release_to_render(pinned("rel-3"), None, None) == "rel-3"
    assert release_to_render(pinned(""), cluster_at("rel-2"), None) == "rel-2"
    assert release_to_render(pinned(), None, None) is None


def _observed(m: Machine, release: ClusterRelease | None, lcm_release: str | None) -> Any:
    lcm = None
    if lcm_release is not None:
        # The spec the planner would render for this release, so only the release differs.
        lcm = lcm_at(lcm_release)
    return b.observed(m, cluster=cluster_at("rel-2"), release=release,
                      hosts=(b.host("h1", consumer=m),), ipamhost=b.ipamhost(), lcm=lcm)


def test_decide_renders_from_the_pinned_release() -> None:
    m = pinned("rel-3", status=DEPLOYED)
    step = decide(_observed(m, release_named("rel-3"), "rel-1"))
    assert isinstance(step.action, WriteLCMMachine)
    assert step.action.spec.release == "rel-3"


def test_decide_refuses_a_release_other_than_the_pinned_one() -> None:
    # The reconciler read rel-2 (say, from an older view): the planner does not render it.
    m = pinned("rel-3", status=DEPLOYED)
    step = decide(_observed(m, release_named("rel-2"), "rel-1"))
    assert isinstance(step.action, Wait)
    found = next(c for c in step.conditions if c.type == n.RELEASE_FOUND)
    assert (found.status, found.reason) == (ConditionStatus.FALSE, n.NOT_FOUND)
    assert "rel-3" in found.message


def test_missing_pinned_release_names_it() -> None:
    step = decide(_observed(pinned(status=DEPLOYED), None, "rel-1"))
    found = next(c for c in step.conditions if c.type == n.RELEASE_FOUND)
    assert (found.status, found.message) == (ConditionStatus.FALSE,
                                             "ClusterRelease rel-1 not found")
