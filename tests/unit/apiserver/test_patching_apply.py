"""Server-side apply and managedFields bookkeeping."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.apiserver.patching import (
    ApplyConflict,
    PatchError,
    apply_patch,
    json_merge_patch,
    record_update,
)
from racksmith.apiserver.patching.fieldsets import decode, encode, fieldset, get_at


def deploy(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "labels": {"app": "x"}},
            "spec": spec}


def managed(obj: dict[str, Any]) -> list[dict[str, Any]]:
    mf: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return mf


def by_manager(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in managed(obj)}


CONFIG = deploy(replicas=2, template={"spec": {"containers": [{"name": "c", "image": "n:1"}]}})


def test_create_records_apply_entry_in_kube_format() -> None:
    out = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    assert out["spec"] == CONFIG["spec"]
    assert out["metadata"]["name"] == "d"
    assert managed(out) == [{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": "T1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}}},
            },
        },
    }]


def test_reapply_is_a_fixpoint() -> None:
    once = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    twice = apply_patch(once, CONFIG, manager="kubectl", force=False, now="T2")
    assert twice == once  # time kept: nothing changed


def test_apply_does_not_mutate_inputs() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    live_copy, config_copy = copy.deepcopy(live), copy.deepcopy(CONFIG)
    apply_patch(live, deploy(replicas=3), manager="kubectl", force=False, now="T2")
    assert live == live_copy and config_copy == CONFIG


def updated_by_hpa(replicas: int) -> dict[str, Any]:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    new = json_merge_patch(live, {"spec": {"replicas": replicas}})
    record_update(live, new, manager="hpa", api_version="autoscaling/v2", now="T2")
    return new


def test_conflict_with_updater() -> None:
    live = updated_by_hpa(5)
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(live, CONFIG, manager="kubectl", force=False, now="T3")
    err = exc.value
    assert err.conflicts == [(".spec.replicas", "hpa")]
    assert str(err) == ('Apply failed with 1 conflict: conflict with "hpa" using '
                        "autoscaling/v2: .spec.replicas")
    (cause,) = err.causes()
    assert (cause.field, cause.message, cause.reason) == (
        ".spec.replicas", 'conflict with "hpa" using autoscaling/v2', "FieldManagerConflict")


def test_force_moves_ownership() -> None:
    live = updated_by_hpa(5)
    out = apply_patch(live, CONFIG, manager="kubectl", force=True, now="T3")
    assert out["spec"]["replicas"] == 2
    owners = by_manager(out)
    assert ("hpa", "Update") not in owners  # its only field moved: entry dropped
    assert "f:replicas" in owners[("kubectl", "Apply")]["f:spec"]


def test_same_value_is_shared_not_a_conflict() -> None:
    live = updated_by_hpa(5)
    config = deploy(replicas=5, template=CONFIG["spec"]["template"])
    out = apply_patch(live, config, manager="kubectl", force=False, now="T3")
    owners = by_manager(out)
    assert "f:replicas" in owners[("hpa", "Update")]["f:spec"]
    assert "f:replicas" in owners[("kubectl", "Apply")]["f:spec"]


def test_omitted_fields_are_removed() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    config = deploy(template=CONFIG["spec"]["template"])
    config["metadata"]["labels"] = {}
    config["metadata"].pop("labels")
    out = apply_patch(live, config, manager="kubectl", force=False, now="T2")
    assert "replicas" not in out["spec"]
    assert "labels" not in out["metadata"]  # emptied parent map goes too
    assert out["metadata"]["name"] == "d"


def test_omitted_field_kept_when_co_owned() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    live = apply_patch(live, deploy(replicas=2), manager="other", force=False, now="T2")
    out = apply_patch(live, deploy(template=CONFIG["spec"]["template"]), manager="kubectl",
                      force=False, now="T3")
    assert out["spec"]["replicas"] == 2
    assert out["metadata"]["labels"] == {"app": "x"}  # "other" applied it too


def test_fields_of_others_are_untouched() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    live = apply_patch(live, {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "d", "annotations": {"o": "1"}}},
                       manager="other", force=False, now="T2")
    out = apply_patch(live, deploy(replicas=3), manager="kubectl", force=False, now="T3")
    assert out["metadata"]["annotations"] == {"o": "1"}
    assert out["spec"] == {"replicas": 3}


def test_keyed_list_items_merge_and_remove() -> None:
    two = deploy(template={"spec": {"containers": [{"name": "a", "image": "a:1"},
                                                   {"name": "b", "image": "b:1"}]}})
    live = apply_patch(None, two, manager="kubectl", force=False, now="T1")
    # a sidecar injector adds a field to container b and a container of its own
    new = copy.deepcopy(live)
    new["spec"]["template"]["spec"]["containers"][1]["env"] = [{"name": "X", "value": "1"}]
    new["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "s"})
    record_update(live, new, manager="injector", api_version="apps/v1", now="T2")
    one = deploy(template={"spec": {"containers": [{"name": "a", "image": "a:2"}]}})
    out = apply_patch(new, one, manager="kubectl", force=False, now="T3")
    containers = out["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a", "b", "side"]
    assert containers[0]["image"] == "a:2"
    assert containers[1] == {"name": "b", "env": [{"name": "X", "value": "1"}]}


def test_conditions_keyed_by_type_and_finalizers_as_set() -> None:
    base = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}}
    live = apply_patch(None, {**base, "metadata": {"name": "w", "finalizers": ["a"]},
                              "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                       manager="m1", force=False, now="T1")
    out = apply_patch(live, {**base, "metadata": {"name": "w", "finalizers": ["b"]},
                             "status": {"conditions": [{"type": "Synced", "status": "True"}]}},
                      manager="m2", force=False, now="T2")
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "Synced"]
    owners = by_manager(out)
    assert owners[("m2", "Apply")]["f:metadata"] == {"f:finalizers": {'v:"b"': {}}}
    assert 'k:{"type":"Synced"}' in owners[("m2", "Apply")]["f:status"]["f:conditions"]


def test_atomic_list_conflict() -> None:
    base = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}}
    live = apply_patch(None, {**base, "spec": {"args": ["a"]}}, manager="m1", force=False,
                       now="T1")
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(live, {**base, "spec": {"args": ["b"]}}, manager="m2", force=False,
                    now="T2")
    assert exc.value.conflicts == [(".spec.args", "m1")]


def test_keyed_conflict_path_rendering() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    other = deploy(template={"spec": {"containers": [{"name": "c", "image": "n:2"}]}})
    other["metadata"].pop("labels")
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(live, other, manager="ci", force=False, now="T2")
    assert exc.value.conflicts == [('.spec.template.spec.containers[name="c"].image',
                                    "kubectl")]


def test_server_owned_metadata_ignored() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    live["metadata"].update(uid="u1", resourceVersion="10", creationTimestamp="t",
                            generation=1)
    config = copy.deepcopy(CONFIG)
    config["metadata"].update(uid="zzz", resourceVersion="10", generation=9)
    out = apply_patch(live, config, manager="kubectl", force=False, now="T2")
    assert (out["metadata"]["uid"], out["metadata"]["generation"]) == ("u1", 1)
    fields = by_manager(out)[("kubectl", "Apply")]["f:metadata"]
    assert set(fields) == {"f:labels"}


def test_nulls_in_config_mean_unspecified() -> None:
    out = apply_patch(None, deploy(replicas=None, paused=True), manager="m", force=False,
                      now="T")
    assert out["spec"] == {"paused": True}


@pytest.mark.parametrize(("applied", "fragment"), [
    ([1], "cannot unmarshal array"),
    ({"metadata": {"managedFields": []}}, "metadata.managedFields must be nil"),
    ({"metadata": "x"}, "cannot unmarshal string"),
])
def test_apply_errors(applied: Any, fragment: str) -> None:
    with pytest.raises(PatchError) as exc:
        apply_patch(None, applied, manager="m", force=False, now="T")
    assert fragment in str(exc.value)


# -- record_update -----------------------------------------------------------------

def test_record_update_on_create() -> None:
    obj = deploy(replicas=1)
    record_update(None, obj, manager="kubectl-create", api_version="apps/v1", now="T1")
    assert managed(obj) == [{
        "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1",
        "time": "T1", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}},
        },
    }]


def test_record_update_moves_changed_fields_and_drops_empty_entries() -> None:
    old = deploy(replicas=1)
    record_update(None, old, manager="a", api_version="apps/v1", now="T1")
    new = json_merge_patch(old, {"metadata": {"labels": {"app": "y"}}, "spec": {"replicas": 2}})
    record_update(old, new, manager="b", api_version="apps/v1", now="T2")
    owners = by_manager(new)
    assert owners[("a", "Update")] == {"f:metadata": {"f:labels": {}}}
    assert owners[("b", "Update")] == {"f:metadata": {"f:labels": {"f:app": {}}},
                                       "f:spec": {"f:replicas": {}}}
    newer = json_merge_patch(new, {"metadata": {"labels": None}})
    record_update(new, newer, manager="c", api_version="apps/v1", now="T3")
    assert by_manager(newer) == {("b", "Update"): {"f:spec": {"f:replicas": {}}}}


def test_record_update_noop_adds_nothing() -> None:
    old = deploy(replicas=1)
    record_update(None, old, manager="a", api_version="apps/v1", now="T1")
    new = copy.deepcopy(old)
    record_update(old, new, manager="b", api_version="apps/v1", now="T2")
    assert [e["manager"] for e in managed(new)] == ["a"]
    assert managed(new)[0]["time"] == "T1"


def test_record_update_subresource_entry() -> None:
    old = deploy(replicas=1)
    record_update(None, old, manager="a", api_version="apps/v1", now="T1")
    new = json_merge_patch(old, {"status": {"readyReplicas": 1}})
    record_update(old, new, manager="ctrl", api_version="apps/v1", now="T2",
                  subresource="status")
    entry = managed(new)[-1]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:readyReplicas": {}}}


def test_record_update_keeps_managed_fields_sent_by_client() -> None:
    old = deploy(replicas=1)
    record_update(None, old, manager="a", api_version="apps/v1", now="T1")
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = []
    new["spec"]["replicas"] = 3
    record_update(old, new, manager="b", api_version="apps/v1", now="T2")
    assert [e["manager"] for e in managed(new)] == ["b"]
    missing = copy.deepcopy(old)
    del missing["metadata"]["managedFields"]
    missing["spec"]["replicas"] = 3
    record_update(old, missing, manager="b", api_version="apps/v1", now="T2")
    assert [e["manager"] for e in managed(missing)] == ["a", "b"]


def test_update_then_apply_conflicts_on_edited_field() -> None:
    live = apply_patch(None, CONFIG, manager="kubectl", force=False, now="T1")
    edited = copy.deepcopy(live)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "n:9"
    record_update(live, edited, manager="kubectl-edit", api_version="apps/v1", now="T2")
    with pytest.raises(ApplyConflict) as exc:
        apply_patch(edited, CONFIG, manager="kubectl", force=False, now="T3")
    assert exc.value.conflicts == [('.spec.template.spec.containers[name="c"].image',
                                    "kubectl-edit")]


# -- properties ---------------------------------------------------------------------

names = st.sampled_from(["a", "b", "name", "type", "conditions", "finalizers", "spec"])
scalars = st.booleans() | st.integers(-3, 3) | st.text(alphabet="xyz", max_size=2)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(names, inner, max_size=3)
    | st.lists(st.fixed_dictionaries({"name": st.sampled_from(["p", "q", "r"])},
                                     optional={"v": inner}), max_size=3,
               unique_by=lambda d: d["name"]),
    max_leaves=10,
)
configs = st.builds(lambda spec: {"apiVersion": "x.io/v1", "kind": "W",
                                  "metadata": {"name": "w"}, "spec": spec},
                    st.dictionaries(names, values, max_size=4))


@settings(max_examples=200, deadline=None)
@given(configs)
def test_fieldsv1_round_trip(obj: dict[str, Any]) -> None:
    paths = fieldset(obj)
    assert decode(encode(paths)) == paths


@settings(max_examples=200, deadline=None)
@given(configs, configs)
def test_apply_sets_every_applied_leaf_and_is_a_fixpoint(first: dict[str, Any],
                                                         second: dict[str, Any]) -> None:
    live = apply_patch(None, first, manager="m", force=False, now="T1")
    out = apply_patch(live, second, manager="m", force=False, now="T2")
    for p in fieldset(second):
        assert get_at(out, p) == get_at(second, p) or isinstance(get_at(second, p), dict)
    assert apply_patch(out, second, manager="m", force=False, now="T3") == out
