"""The example manifests validate against the kinds, with no field lost.

Every document under ``examples/`` of a Racksmith kind is read with its
model; dumping it back (fields as written) gives the document's spec again,
so a misspelt field (which the models would ignore) fails here. Plus what
the update demo relies on: racksmith-1.1.0 is racksmith-1.0.0 with a
rebooting kernel and a kubelet rebuild; machines carry rack and update-group
labels naming existing UpdateGroups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.kinds.base import Resource
from racksmith.kinds.registry import ALL_KINDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KINDS: dict[tuple[str, str], type[Resource]] = {
    (k.info.api_version, k.info.kind): k for k in ALL_KINDS}
GROUP_LABEL = "lcm.racksmith.io/update-group"
RACK_LABEL = "metal.racksmith.io/rack"


def documents(*parts: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((EXAMPLES.joinpath(*parts)).rglob("*.yaml")):
        out.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return out


def ours() -> list[dict[str, Any]]:
    return [d for d in documents() if (d.get("apiVersion"), d.get("kind")) in KINDS]


def by_name(kind: str, *parts: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents(*parts) if d.get("kind") == kind}


def _id(doc: dict[str, Any]) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


@pytest.mark.parametrize("doc", ours(), ids=_id)
def test_example_validates_without_losing_fields(doc: dict[str, Any]) -> None:
    model = KINDS[(doc["apiVersion"], doc["kind"])].model_validate(doc)
    dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert yaml.safe_load(yaml.safe_dump(dumped["spec"])) == doc["spec"]


def test_release_1_1_0_is_1_0_0_with_a_rebooting_kernel() -> None:
    releases = by_name("ClusterRelease")
    old, new = releases["racksmith-1.0.0"]["spec"], releases["racksmith-1.1.0"]["spec"]
    assert (old["version"], new["version"]) == ("1.0.0", "1.1.0")
    assert new["kubernetesVersion"] == old["kubernetesVersion"]
    old_items = {i["name"]: i for i in old["stateItems"]}
    new_items = {i["name"]: i for i in new["stateItems"]}
    assert set(new_items) - set(old_items) == {"linux-image"}
    assert set(old_items) <= set(new_items)
    kernel = new_items["linux-image"]
    assert (kernel["type"], kernel["phase"], kernel["requiresReboot"]) == (
        "package", "configuration", True)
    assert kernel["params"] == {"name": "linux-image", "version": "6.8.0-50"}
    changed = {n for n in old_items if old_items[n] != new_items[n]}
    assert changed == {"kubelet"}
    assert new_items["kubelet"]["params"]["version"] != old_items["kubelet"]["params"]["version"]
    # Both keep the apply order of the phases, and uncordon once per host life.
    for items in (old_items, new_items):
        assert items["uncordon"]["params"]["creates"] == "/var/lib/racksmith/uncordoned"


def test_machines_name_existing_update_groups_and_racks() -> None:
    groups = by_name("UpdateGroup", "cluster")
    assert {g: (d["spec"]["index"], d["spec"]["concurrentUpdates"])
            for g, d in groups.items()} == {"demo-workers-a": (1, 1), "demo-workers-b": (2, 1)}
    for machine in by_name("Machine", "cluster").values():
        labels = machine["metadata"]["labels"]
        rack = labels[RACK_LABEL]
        if "master" in machine["spec"]["roles"]:
            assert rack == "rack-a" and GROUP_LABEL not in labels
        else:
            assert labels[GROUP_LABEL] == {"rack-a": "demo-workers-a",
                                           "rack-b": "demo-workers-b"}[rack]
            assert groups[labels[GROUP_LABEL]]["metadata"]["namespace"] == \
                machine["metadata"]["namespace"]


def test_two_clusters_have_their_own_networks_vips_and_machines() -> None:
    """examples/two-clusters: two Clusters whose VIPs lie in their own
    control-plane networks (distinct), each with a master and a worker."""
    clusters = by_name("Cluster", "two-clusters")
    assert sorted(clusters) == ["alpha", "beta"]
    vips = {name: c["spec"]["apiServer"]["vip"] for name, c in clusters.items()}
    assert vips == {"alpha": "10.10.0.5", "beta": "10.30.0.5"}
    for name, cluster in clusters.items():
        cidr = cluster["spec"]["networks"]["controlPlaneCIDRs"][0]
        assert vips[name].rsplit(".", 1)[0] == cidr.rsplit(".", 1)[0]
    machines = by_name("Machine", "two-clusters")
    for name in ("alpha", "beta"):
        roles = sorted(tuple(m["spec"]["roles"]) for m in machines.values()
                       if m["spec"]["clusterName"] == name)
        assert roles == [("master", "etcd"), ("node",)]
