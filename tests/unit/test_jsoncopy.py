"""json_copy: an exact deep copy of JSON data, deepcopy for what orjson refuses."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from racksmith.jsoncopy import json_copy

json_data = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(json_data)
def test_equal_and_shares_nothing(value: Any) -> None:
    out = json_copy(value)
    assert out == value
    assert type(out) is type(value)

    def containers(v: Any) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for x in v.values() for i in containers(x))]
        if isinstance(v, list):
            return [id(v), *(i for x in v for i in containers(x))]
        return []

    assert not set(containers(out)) & set(containers(value))


def test_what_orjson_refuses_is_deep_copied() -> None:
    for value in ({1: ["a"]}, {"big": [2**70]}, {"set": {1, 2}}):
        out = json_copy(value)
        assert out == value
        assert out is not value


def test_a_mutation_of_the_copy_leaves_the_original() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": 1}]}}
    out = json_copy(obj)
    out["metadata"]["labels"]["b"] = "2"
    out["spec"]["items"][0]["x"] = 2
    assert obj == {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": 1}]}}
