"""Server-side apply and managed fields follow the schema's list and map types.

Two field managers per case, as structured-merge-diff merges them
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy):
atomic lists and maps are one leaf, sets are owned per member (``v:``), map
lists per item and per field of an item (``k:``), granular maps per key.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from racksmith.apiserver.builtins import builtin_resources
from racksmith.apiserver.patching import (
    ApplyConflict,
    PatchError,
    TypeNode,
    apply_patch,
    json_merge_patch,
    record_update,
    strategic,
)
from racksmith.apiserver.patching.fieldsets import decode, fieldset
from racksmith.apiserver.patching.schematypes import (
    ATOMIC,
    BUILTIN_LISTS,
    SET,
    ListSemantics,
    builtin_list,
)

STR: dict[str, Any] = {"type": "string"}
ITEM = {"type": "object", "properties": {"id": STR, "a": STR, "b": STR}}
PORT = {"type": "object", "required": ["port"], "properties": {
    "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"},
    "name": STR}}
SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "apiVersion": STR, "kind": STR, "metadata": {"type": "object"},
    "spec": {"type": "object", "properties": {
        "args": {"type": "array", "items": STR},
        "steps": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {
            "type": "object", "properties": {"name": STR, "run": STR}}},
        "roles": {"type": "array", "x-kubernetes-list-type": "set", "items": STR},
        "items": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["id"], "items": ITEM},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["protocol", "port"], "items": PORT},
        "labels": {"type": "object", "additionalProperties": STR},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
            "matchLabels": {"type": "object", "additionalProperties": STR}, "tier": STR}},
        "config": {"type": "object", "x-kubernetes-map-type": "atomic",
                   "additionalProperties": STR},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }},
}}
CRD = TypeNode.root(SCHEMA, builtin=False)


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "W",
            "metadata": {"name": "w", "namespace": "ns"}, "spec": spec}


def apply(live: dict[str, Any] | None, manager: str, *, force: bool = False,
          typ: TypeNode = CRD, **spec: Any) -> dict[str, Any]:
    return apply_patch(live, widget(**spec), manager=manager, force=force, now="T", typ=typ)


def owned(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any]:
    """The ``f:spec`` part of ``manager``'s fieldsV1."""
    for e in obj["metadata"].get("managedFields", []):
        if e["manager"] == manager and e["operation"] == operation:
            spec: dict[str, Any] = e["fieldsV1"].get("f:spec", {})
            return spec
    return {}


def managers(obj: dict[str, Any]) -> list[str]:
    return [e["manager"] for e in obj["metadata"].get("managedFields", [])]


def conflicts(live: dict[str, Any], manager: str, **spec: Any) -> list[tuple[str, str]]:
    with pytest.raises(ApplyConflict) as exc:
        apply(live, manager, **spec)
    return exc.value.conflicts


# -- atomic lists ------------------------------------------------------------------------


def test_crd_list_without_list_type_is_atomic() -> None:
    live = apply(None, "a", args=["x"], steps=[{"name": "s", "run": "r"}])
    assert owned(live, "a") == {"f:args": {}, "f:steps": {}}
    assert conflicts(live, "b", args=["y"]) == [(".spec.args", "a")]
    # a list of named objects declared atomic is not keyed by name
    assert conflicts(live, "b", steps=[{"name": "s", "run": "other"}]) == [(".spec.steps", "a")]


def test_atomic_list_force_takes_ownership_and_replaces_the_whole_list() -> None:
    live = apply(None, "a", args=["x", "z"])
    out = apply(live, "b", force=True, args=["y"])
    assert out["spec"]["args"] == ["y"]
    assert owned(out, "b") == {"f:args": {}}
    assert managers(out) == ["b"]  # a's only field moved


def test_atomic_list_same_value_is_co_owned() -> None:
    live = apply(None, "a", args=["x"])
    out = apply(live, "b", args=["x"])
    assert owned(out, "a") == owned(out, "b") == {"f:args": {}}


# -- set lists ---------------------------------------------------------------------------


def test_set_members_of_two_managers_merge() -> None:
    live = apply(None, "a", roles=["master", "etcd"])
    out = apply(live, "b", roles=["etcd", "infra"])
    assert out["spec"]["roles"] == ["master", "etcd", "infra"]
    assert owned(out, "a") == {"f:roles": {'v:"master"': {}, 'v:"etcd"': {}}}
    assert owned(out, "b") == {"f:roles": {'v:"etcd"': {}, 'v:"infra"': {}}}


def test_set_member_removal_drops_only_your_own() -> None:
    live = apply(apply(None, "a", roles=["master", "etcd"]), "b", roles=["etcd", "infra"])
    # the shared member stays while b still owns it
    out = apply(live, "a", roles=["master"])
    assert out["spec"]["roles"] == ["master", "etcd", "infra"]
    assert owned(out, "a") == {"f:roles": {'v:"master"': {}}}
    out = apply(out, "a")
    assert out["spec"]["roles"] == ["etcd", "infra"]
    assert out["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {}}  # an empty spec
    out = apply(out, "b", roles=["infra"])
    assert out["spec"]["roles"] == ["infra"]


def test_set_is_never_a_conflict_even_after_an_atomic_owner() -> None:
    """Managed fields stored when roles were atomic (the old guess) do not make the
    set conflict: the members are new paths below the old leaf."""
    live = apply(None, "a", roles=["master"])
    entry = live["metadata"]["managedFields"][0]
    entry["fieldsV1"]["f:spec"] = {"f:roles": {}}
    out = apply(live, "b", roles=["etcd"])
    assert out["spec"]["roles"] == ["master", "etcd"]


def test_set_update_entry_tracks_members() -> None:
    live = apply(None, "a", roles=["master"])
    new = json_merge_patch(live, {"spec": {"roles": ["master", "node"]}})
    record_update(live, new, manager="ctl", api_version="x.io/v1", now="T2", typ=CRD)
    assert owned(new, "ctl", "Update") == {"f:roles": {'v:"node"': {}}}
    assert owned(new, "a") == {"f:roles": {'v:"master"': {}}}
    newer = json_merge_patch(new, {"spec": {"roles": ["node"]}})
    record_update(new, newer, manager="ctl", api_version="x.io/v1", now="T3", typ=CRD)
    assert "a" not in managers(newer)  # its member was removed


# -- map lists ---------------------------------------------------------------------------


def test_map_list_items_merge_by_key_fields_owned_per_manager() -> None:
    live = apply(None, "a", items=[{"id": "1", "a": "x"}])
    out = apply(live, "b", items=[{"id": "1", "b": "y"}, {"id": "2", "a": "z"}])
    assert out["spec"]["items"] == [{"id": "1", "a": "x", "b": "y"}, {"id": "2", "a": "z"}]
    assert owned(out, "a") == {"f:items": {'k:{"id":"1"}': {".": {}, "f:a": {}, "f:id": {}}}}
    assert owned(out, "b") == {"f:items": {
        'k:{"id":"1"}': {".": {}, "f:b": {}, "f:id": {}},
        'k:{"id":"2"}': {".": {}, "f:a": {}, "f:id": {}}}}


def test_map_list_conflict_only_on_the_same_field_of_the_same_item() -> None:
    live = apply(apply(None, "a", items=[{"id": "1", "a": "x"}]),
                 "b", items=[{"id": "1", "b": "y"}, {"id": "2", "a": "z"}])
    assert conflicts(live, "c", items=[{"id": "1", "a": "other"}, {"id": "2", "b": "q"}]) == [
        ('.spec.items[id="1"].a', "a")]
    # the same value is shared, another item's other field is free
    out = apply(live, "c", items=[{"id": "1", "a": "x"}, {"id": "2", "b": "q"}])
    assert out["spec"]["items"][1] == {"id": "2", "a": "z", "b": "q"}


def test_map_list_item_removal_keeps_fields_others_own() -> None:
    live = apply(apply(None, "a", items=[{"id": "1", "a": "x"}, {"id": "3", "a": "w"}]),
                 "b", items=[{"id": "1", "b": "y"}])
    out = apply(live, "a", items=[{"id": "3", "a": "w"}])
    assert out["spec"]["items"] == [{"id": "1", "b": "y"}, {"id": "3", "a": "w"}]


def test_two_key_map_list_keys_sorted_and_defaulted() -> None:
    live = apply(None, "a", ports=[{"port": 80, "protocol": "TCP", "name": "http"}])
    out = apply(live, "b", ports=[{"port": 80, "protocol": "UDP", "name": "dns"}])
    assert [p["name"] for p in out["spec"]["ports"]] == ["http", "dns"]
    # keys sorted by name whatever the declared order (protocol, port)
    assert set(owned(out, "a")["f:ports"]) == {'k:{"port":80,"protocol":"TCP"}'}
    assert set(owned(out, "b")["f:ports"]) == {'k:{"port":80,"protocol":"UDP"}'}
    # an item omitting protocol is the TCP one (the schema's default)
    assert conflicts(out, "c", ports=[{"port": 80, "name": "web"}]) == [
        ('.spec.ports[port=80,protocol="TCP"].name', "a")]
    shared = apply(out, "c", ports=[{"port": 80, "name": "http"}])
    assert shared["spec"]["ports"] == out["spec"]["ports"]
    assert set(owned(shared, "c")["f:ports"]) == {'k:{"port":80,"protocol":"TCP"}'}


@pytest.mark.parametrize(("spec", "message"), [
    ({"items": [{"a": "x"}]}, '.spec.items: element 0: associative list with keys has an '
     'element that omits key field "id" (and doesn\'t have default value)'),
    ({"items": ["x"]}, ".spec.items: element 0: associative list with keys may not have "
     "non-map elements"),
    ({"items": [{"id": "1"}, {"id": "1", "a": "x"}]},
     '.spec.items: duplicate entries for key [id="1"]'),
    ({"roles": ["a", {"b": 1}]}, ".spec.roles: element 1: associative list without keys "
     "has an element that's a map type"),
    ({"roles": ["a", "a"]}, '.spec.roles: duplicate entries for key [="a"]'),
])
def test_config_not_fitting_its_declared_list_type_is_rejected(
        spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError) as exc:
        apply(None, "a", **spec)
    assert exc.value.code == 400
    assert str(exc.value) == f"failed to create typed patch object (ns/w; x.io/v1, Kind=W): " \
                             f"{message}"


def test_stored_list_not_fitting_its_type_is_tracked_as_one_leaf() -> None:
    old = widget(items=[{"a": "x"}])
    record_update(None, old, manager="a", api_version="x.io/v1", now="T", typ=CRD)
    assert owned(old, "a", "Update") == {"f:items": {}}


# -- maps --------------------------------------------------------------------------------


def test_granular_map_keys_owned_by_their_managers() -> None:
    live = apply(None, "a", labels={"x": "1"})
    out = apply(live, "b", labels={"y": "2"})
    assert out["spec"]["labels"] == {"x": "1", "y": "2"}
    assert owned(out, "a") == {"f:labels": {"f:x": {}}}
    assert owned(out, "b") == {"f:labels": {"f:y": {}}}
    assert conflicts(out, "b", labels={"x": "3"}) == [(".spec.labels.x", "a")]
    assert apply(out, "a")["spec"]["labels"] == {"y": "2"}


@pytest.mark.parametrize("field", ["selector", "config"])
def test_atomic_map_is_one_leaf_replaced_whole(field: str) -> None:
    first: dict[str, Any] = {"matchLabels": {"app": "a"}, "tier": "t"} \
        if field == "selector" else {"k1": "v1", "k2": "v2"}
    second: dict[str, Any] = {"tier": "u"} if field == "selector" else {"k3": "v3"}
    one: dict[str, Any] = {field: first}
    two: dict[str, Any] = {field: second}
    live = apply(None, "a", **one)
    assert owned(live, "a") == {f"f:{field}": {}}
    # the owner's next apply replaces it, nothing merged
    assert apply(live, "a", **two)["spec"][field] == second
    # another manager's different value conflicts on the whole map
    assert conflicts(live, "b", **two) == [(f".spec.{field}", "a")]
    out = apply(live, "b", force=True, **two)
    assert out["spec"][field] == second
    assert owned(out, "b") == {f"f:{field}": {}} and managers(out) == ["b"]
    # the same value is co-owned
    shared = apply(live, "b", **copy.deepcopy(one))
    assert owned(shared, "a") == owned(shared, "b") == {f"f:{field}": {}}


def test_atomic_map_update_entry_owns_the_map_not_its_keys() -> None:
    live = apply(None, "a", config={"k1": "v1"})
    new = json_merge_patch(live, {"spec": {"config": {"k2": "v2"}}})
    record_update(live, new, manager="ctl", api_version="x.io/v1", now="T2", typ=CRD)
    assert owned(new, "ctl", "Update") == {"f:config": {}}
    assert "a" not in managers(new)


# -- where the schema says nothing -------------------------------------------------------


def test_preserve_unknown_fields_region_falls_back_to_the_builtin_table() -> None:
    live = apply(None, "a", extra={"containers": [{"name": "c", "image": "i:1"}],
                                   "finalizers": ["f1"], "tags": ["t"]})
    out = apply(live, "b", extra={"containers": [{"name": "d", "image": "i:2"}],
                                  "finalizers": ["f2"]})
    assert [c["name"] for c in out["spec"]["extra"]["containers"]] == ["c", "d"]
    assert out["spec"]["extra"]["finalizers"] == ["f1", "f2"]
    assert set(owned(out, "a")["f:extra"]) == {"f:containers", "f:finalizers", "f:tags"}
    assert owned(out, "a")["f:extra"]["f:tags"] == {}  # a guessed atomic list


def test_a_guess_that_changes_between_applies_keeps_the_applied_value() -> None:
    """Keyed by name last time, atomic now (an item without a name): the list is the
    applied one, not cut by removing last time's items."""
    live = apply(None, "a", extra={"things": [{"name": "p", "v": 1}]})
    out = apply(live, "a", extra={"things": [{"name": "p", "v": 1}, {"v": 2}]})
    assert out["spec"]["extra"]["things"] == [{"name": "p", "v": 1}, {"v": 2}]
    assert owned(out, "a") == {"f:extra": {"f:things": {}}}


def test_root_metadata_is_object_meta_whatever_the_crd_says() -> None:
    meta = {"name": "w", "namespace": "ns", "finalizers": ["a/f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                                 "uid": "u1"}]}
    live = apply_patch(None, {**widget(), "metadata": meta}, manager="a", force=False,
                       now="T", typ=CRD)
    fields = decode(live["metadata"]["managedFields"][0]["fieldsV1"])
    assert ("f:metadata", "f:finalizers", 'v:"a/f"') in fields
    assert ("f:metadata", "f:ownerReferences", 'k:{"uid":"u1"}') in fields


def test_builtin_kinds_use_the_table_even_where_their_loose_schema_has_a_list() -> None:
    infos = {i.kind: i for i in builtin_resources() if i.group == ""}
    pod_type = TypeNode.root(infos["Pod"].schema, builtin=True)
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}
    paths = fieldset(pod, pod_type)
    c = ("f:spec", "f:containers", 'k:{"name":"c"}')
    assert (*c, "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}') in paths
    live = apply_patch(None, pod, manager="a", force=False, now="T", typ=pod_type)
    udp = copy.deepcopy(pod)
    udp["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "protocol": "UDP"}]
    out = apply_patch(live, udp, manager="b", force=False, now="T", typ=pod_type)
    assert out["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]
    ns_type = TypeNode.root(infos["Namespace"].schema, builtin=True)
    assert ns_type.field("spec").field("finalizers").list_semantics(["kubernetes"]) == SET


def test_semantics_resolution_order() -> None:
    spec = CRD.field("spec")
    assert spec.field("roles").list_semantics([]).kind == "set"
    assert spec.field("args").list_semantics(["x"]).atomic
    assert spec.field("extra").field("finalizers").list_semantics(["x"]) == SET
    assert spec.field("extra").field("things").list_semantics([{"name": "a"}]) == \
        ListSemantics("map", ("name",))
    # the table applies only when the items fit it, then the heuristic
    assert spec.field("extra").field("conditions").list_semantics(
        [{"name": "a"}]) == ListSemantics("map", ("name",))
    assert spec.field("extra").field("things").list_semantics(
        [{"name": "a"}, {"name": "a"}]) == ATOMIC
    assert spec.field("extra").field("things").list_semantics([]) == ATOMIC
    assert not CRD.field("spec").atomic_map and spec.field("selector").atomic_map


def test_multi_key_elements_sort_keys_like_structured_merge_diff() -> None:
    sem = ListSemantics("map", ("protocol", "containerPort"), (("protocol", "TCP"),))
    assert sem.element({"protocol": "UDP", "containerPort": 53}) == \
        'k:{"containerPort":53,"protocol":"UDP"}'
    assert sem.element({"containerPort": 80}) == 'k:{"containerPort":80,"protocol":"TCP"}'
    assert sem.element({"protocol": "TCP"}) is None


def test_strategic_merge_and_apply_share_one_table() -> None:
    for name, entry in BUILTIN_LISTS.items():
        assert strategic.merge_key(("spec", name)) == entry.patch_merge_key
    for path, key in [(("spec", "containers", "ports"), "containerPort"),
                      (("spec", "initContainers", "ports"), "containerPort"),
                      (("spec", "ports"), "port"), (("status", "ports"), None),
                      (("spec", "tolerations"), None)]:
        assert strategic.merge_key(path) == key
        listed = builtin_list(path)
        assert (listed.patch_merge_key if listed else None) == key
    ports = builtin_list(("spec", "containers", "ports"))
    assert ports is not None and ports.apply.keys == ("containerPort", "protocol")
