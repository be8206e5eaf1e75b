"""YAML bodies as JSON values, Secret base64 offsets, envelope type checks."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from racksmith.apiserver import corevalidation, options
from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.http import yamldecode


def test_yaml_keys_and_scalars_are_what_json_would_hold() -> None:
    doc = b"1: a\ntrue: b\nnull: c\n1.5: d\nwhen: 2020-01-01\nat: 2020-01-01T10:00:00Z\n"
    assert yamldecode.load(doc) == {"1": "a", "true": "b", "null": "c", "1.5": "d",
                                    "when": "2020-01-01", "at": "2020-01-01T10:00:00Z"}


@pytest.mark.parametrize("doc", [b"? [a]\n: b\n", b"k: !!binary aGk=\n", b"k: !!set {a}\n",
                                 b"k: !!python/name:os.system\n", b"a: 1\n---\nb: 2\n",
                                 b"k: !!timestamp 2020-01-01\n"])
def test_non_json_yaml_is_refused(doc: bytes) -> None:
    with pytest.raises(yamldecode.YamlBodyError):
        yamldecode.load(doc)


def bomb(levels: int, width: int = 9) -> bytes:
    lines = ['a0: &a0 ["x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines).encode()


def test_an_alias_bomb_is_refused_without_expanding_it() -> None:
    with pytest.raises(yamldecode.YamlBodyError, match="excessive aliasing"):
        yamldecode.load(bomb(12))      # 9**12 nodes if expanded


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(yamldecode.YamlBodyError, match="aliasing"):
        yamldecode.load(b"a: &a [*a]\n")


def test_ordinary_aliases_are_expanded_into_a_tree() -> None:
    value = yamldecode.load(b"a: &x {k: v}\nb: *x\n")
    assert value == {"a": {"k": "v"}, "b": {"k": "v"}}
    assert value["a"] is not value["b"]
    assert yamldecode.load(bomb(3)) is not None   # 9**3 = 729 nodes: fine


@pytest.mark.parametrize("text,offset", [("abc", 0), ("abcd", None), ("ab=d", 2),
                                         ("a!cd", 1), ("YWJj=A==", 4), ("YQ==", None),
                                         ("YQ=", 3), ("", None), ("YWJj\nZGVm", None)])
def test_base64_error_offsets(text: str, offset: int | None) -> None:
    assert corevalidation.base64_error_offset(text) == offset


@given(st.binary(max_size=64))
def test_every_standard_encoding_decodes(data: bytes) -> None:
    assert corevalidation.base64_error_offset(base64.b64encode(data).decode()) is None


@pytest.mark.parametrize("body", [{"preconditions": "x"}, {"preconditions": {"uid": 1}},
                                  {"propagationPolicy": 1}, {"orphanDependents": "true"},
                                  {"gracePeriodSeconds": True}, {"dryRun": "All"}, [1], "x"])
def test_delete_options_of_the_wrong_type(body: Any) -> None:
    with pytest.raises(ApiError) as err:
        options.delete_options(body)
    assert err.value.code == 400


def test_delete_options_are_passed_on_checked() -> None:
    assert options.delete_options({"preconditions": {"uid": "u", "resourceVersion": None},
                                   "propagationPolicy": "Orphan", "kind": "DeleteOptions"}) == {
        "preconditions": {"uid": "u"}, "propagationPolicy": "Orphan"}
    assert options.delete_options(None) == {}


@pytest.mark.parametrize("meta", [{"generateName": 5}, {"name": ["x"]}, {"namespace": {}},
                                  {"generation": "1"}, {"uid": True}])
def test_metadata_scalars_of_the_wrong_type(meta: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as err:
        options.check_metadata_types("ConfigMap", meta)
    assert err.value.code == 400 and "cannot unmarshal" in err.value.message
