"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.apiserver.patching import (
    PatchError,
    PatchTestFailed,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

# RFC 7386 appendix A (object targets only: the API server patches objects)
RFC7386: list[tuple[dict[str, Any], Any, dict[str, Any]]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ({"a": 1}, {}, {"a": 1}),
    ({"metadata": {"labels": {"a": "1", "b": "2"}}},
     {"metadata": {"labels": {"a": None, "c": "3"}}},
     {"metadata": {"labels": {"b": "2", "c": "3"}}}),
]


@pytest.mark.parametrize(("target", "patch", "want"), RFC7386)
def test_merge_patch_rfc7386(target: dict[str, Any], patch: Any, want: dict[str, Any]) -> None:
    before = copy.deepcopy(target)
    assert json_merge_patch(target, patch) == want
    assert target == before  # not mutated


@pytest.mark.parametrize(("patch", "message"), [
    ([{"op": "add"}], "json: cannot unmarshal array into Go value of type "
                      "map[string]interface {}"),
    ("x", "json: cannot unmarshal string into Go value of type map[string]interface {}"),
    (1, "json: cannot unmarshal number into Go value of type map[string]interface {}"),
    (True, "json: cannot unmarshal bool into Go value of type map[string]interface {}"),
])
def test_merge_patch_rejects_non_objects(patch: Any, message: str) -> None:
    with pytest.raises(PatchError) as exc:
        json_merge_patch({}, patch)
    assert str(exc.value) == message
    assert exc.value.code == 400


def test_merge_patch_result_does_not_alias_patch() -> None:
    patch = {"spec": {"list": [1, 2]}}
    out = json_merge_patch({}, patch)
    out["spec"]["list"].append(3)
    assert patch == {"spec": {"list": [1, 2]}}


json_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=2)
keys = st.sampled_from(["a", "b", "c", "d"])
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)
objects = st.dictionaries(keys, json_values, max_size=4)


def no_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: no_nulls(x) for k, x in v.items() if x is not None}
    return v


def create_merge_patch(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for k in a:
        if k not in b:
            patch[k] = None
    for k, v in b.items():
        if k in a and isinstance(a[k], dict) and isinstance(v, dict):
            sub = create_merge_patch(a[k], v)
            if sub:
                patch[k] = sub
        elif k not in a or a[k] != v or type(a[k]) is not type(v):
            patch[k] = v
    return patch


@settings(max_examples=300, deadline=None)
@given(objects, objects)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = json_merge_patch(target, patch)
    assert json_merge_patch(once, patch) == once


@settings(max_examples=300, deadline=None)
@given(objects, objects)
def test_merge_patch_of_diff_reaches_target(a: dict[str, Any], b: dict[str, Any]) -> None:
    b = no_nulls(b)
    assert json_merge_patch(a, create_merge_patch(a, b)) == b


@settings(max_examples=200, deadline=None)
@given(objects, objects)
def test_strategic_equals_merge_without_special_lists(a: dict[str, Any],
                                                      patch: dict[str, Any]) -> None:
    assert strategic_merge_patch(a, patch) == json_merge_patch(a, patch)


# -- JSON patch ----------------------------------------------------------------------

DOC = {"metadata": {"name": "x", "resourceVersion": "7", "finalizers": ["a"]},
       "spec": {"list": [1, 2, 3], "n": 1}}

JSON_PATCH_CASES: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
    ([{"op": "add", "path": "/spec/m", "value": 2}],
     {**DOC, "spec": {"list": [1, 2, 3], "n": 1, "m": 2}}),
    ([{"op": "replace", "path": "/spec/n", "value": 5}],
     {**DOC, "spec": {"list": [1, 2, 3], "n": 5}}),
    ([{"op": "remove", "path": "/spec/list/0"}], {**DOC, "spec": {"list": [2, 3], "n": 1}}),
    ([{"op": "add", "path": "/spec/list/-", "value": 4}],
     {**DOC, "spec": {"list": [1, 2, 3, 4], "n": 1}}),
    ([{"op": "move", "from": "/spec/n", "path": "/spec/k"}],
     {**DOC, "spec": {"list": [1, 2, 3], "k": 1}}),
    ([{"op": "copy", "from": "/spec/n", "path": "/spec/k"}],
     {**DOC, "spec": {"list": [1, 2, 3], "n": 1, "k": 1}}),
    ([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
      {"op": "remove", "path": "/metadata/finalizers/0"}],
     {**DOC, "metadata": {"name": "x", "resourceVersion": "7", "finalizers": []}}),
    ([], DOC),
]


@pytest.mark.parametrize(("ops", "want"), JSON_PATCH_CASES)
def test_json_patch(ops: list[dict[str, Any]], want: dict[str, Any]) -> None:
    before = copy.deepcopy(DOC)
    assert json_patch(DOC, ops) == want
    assert before == DOC


def test_json_patch_test_failure() -> None:
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
           {"op": "remove", "path": "/metadata/finalizers/0"}]
    with pytest.raises(PatchTestFailed) as exc:
        json_patch(DOC, ops)
    assert str(exc.value) == "testing value /metadata/resourceVersion failed: test failed"
    assert exc.value.code == 422
    assert isinstance(exc.value, PatchError)


def test_json_patch_test_on_missing_path_fails() -> None:
    with pytest.raises(PatchTestFailed):
        json_patch(DOC, [{"op": "test", "path": "/nope", "value": 1}])


def test_json_patch_test_distinguishes_bool_and_int() -> None:
    with pytest.raises(PatchTestFailed):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])


@pytest.mark.parametrize(("ops", "code", "fragment"), [
    ({"spec": {}}, 400, "cannot unmarshal object into Go value of type jsonpatch.Patch"),
    ("x", 400, "cannot unmarshal string"),
    ([1], 400, "cannot unmarshal number into Go value of type jsonpatch.Operation"),
    ([{"op": "frobnicate", "path": "/a"}], 400, "Unexpected kind: frobnicate"),
    ([{"path": "/a"}], 400, "Unexpected kind: "),
    ([{"op": "add", "value": 1}], 400, "add operation is missing path"),
    ([{"op": "add", "path": "/a"}], 400, "add operation is missing value"),
    ([{"op": "move", "path": "/a"}], 400, "move operation is missing from"),
    ([{"op": "remove", "path": "/spec/nope"}], 422,
     "Unable to remove nonexistent key: nope: missing value"),
    ([{"op": "replace", "path": "/spec/nope", "value": 1}], 422,
     "replace operation does not apply: doc is missing key: /spec/nope: missing value"),
    ([{"op": "add", "path": "/nope/deeper", "value": 1}], 422,
     'add operation does not apply: doc is missing path: "/nope/deeper": missing value'),
    ([{"op": "add", "path": "/spec/list/9", "value": 1}], 422, "add operation does not apply"),
    ([{"op": "move", "from": "/nope", "path": "/a"}], 422,
     "move operation does not apply: doc is missing from path: /nope: missing value"),
    ([{"op": "add", "path": "spec", "value": 1}], 422, "invalid path"),
    ([{"op": "replace", "path": "", "value": [1]}], 422, "cannot unmarshal array"),
])
def test_json_patch_errors(ops: Any, code: int, fragment: str) -> None:
    with pytest.raises(PatchError) as exc:
        json_patch(DOC, ops)
    assert exc.value.code == code
    assert fragment in str(exc.value)
    assert not isinstance(exc.value, PatchTestFailed)
