"""Label and field selectors (k8s.io/apimachinery labels and fields packages)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    Requirement,
    SelectorError,
    validate_label_key,
    validate_label_value,
)

LABELS = {"app": "web", "tier": "front", "env": "", "n": "5", "example.com/team": "a"}

MATCH_CASES: list[tuple[str, bool]] = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("app!=web", False),
    ("missing!=x", True),
    ("app in (web,db)", True),
    ("app in (db)", False),
    ("app notin (db)", True),
    ("app notin (web)", False),
    ("missing notin (x)", True),
    ("missing in (x)", False),
    ("app", True),
    ("missing", False),
    ("!missing", True),
    ("!app", False),
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
    ("  app = web ,  tier in ( front , back ) ", True),
    ("env=", True),
    ("env==", True),
    ("env in (,x)", True),
    ("app in (x,)", False),
    ("n>4", True),
    ("n>5", False),
    ("n<6", True),
    ("app>1", False),
    ("missing<1", False),
    ("example.com/team=a", True),
    ("example.com/team", True),
    ("app in (in,notin)", False),
    ("app=web,!missing,tier", True),
]


@pytest.mark.parametrize(("text", "want"), MATCH_CASES)
def test_label_selector_matches(text: str, want: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is want


ERROR_CASES: list[tuple[str, str]] = [
    ("a b", "unable to parse requirement: found 'b', expected:"),
    ("=x", "found '=', expected: !, identifier, or 'end of string'"),
    ("a,", "expected: identifier after ','"),
    ("a,,b", "expected: identifier after ','"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("a in ()", "for 'in', 'notin' operators, values set can't be empty"),
    ("a in (x", "found '', expected: ',' or ')'"),
    ("a in x", "found 'x' expected: '('"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("a/b/c", "a qualified name must consist of alphanumeric characters"),
    ("-a=b", "name part must consist of alphanumeric characters"),
    ("a=" + "x" * 64, "must be no more than 63 characters"),
    ("a=-x", "a valid label must be an empty string or consist of alphanumeric"),
    ("Example.com/a=b", "prefix part a lowercase RFC 1123 subdomain must consist"),
    ("/a", "prefix part must be non-empty"),
    ("a/", "name part must be non-empty"),
    ("n>x", "the value must be an integer"),
    ("in=1", "found 'in', expected: identifier"),
]


@pytest.mark.parametrize(("text", "fragment"), ERROR_CASES)
def test_label_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as exc:
        LabelSelector.parse(text)
    assert fragment in str(exc.value)


def test_selector_error_is_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


def test_parse_error_prefix() -> None:
    with pytest.raises(SelectorError, match=r'^unable to parse requirement: key: Invalid value: '
                                            r'"-a"'):
        LabelSelector.parse("-a")


def test_render_sorted_like_kube() -> None:
    s = LabelSelector.parse("z in (b,a), a!=x, !m, k, n>3")
    assert str(s) == "a!=x,k,!m,n>3,z in (a,b)"
    assert LabelSelector.parse(str(s)) == s


def test_is_empty() -> None:
    assert LabelSelector.parse("").is_empty
    assert LabelSelector.parse("   ").is_empty
    assert not LabelSelector.parse("a").is_empty


DICT_CASES: list[tuple[dict[str, Any] | None, dict[str, str], bool]] = [
    ({}, {}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
     {"tier": "b"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
     {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""},
     False),
    ({"matchLabels": {"app": "web"},
      "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "web"}, False),
]


@pytest.mark.parametrize(("d", "labels", "want"), DICT_CASES)
def test_from_dict(d: dict[str, Any] | None, labels: dict[str, str], want: bool) -> None:
    assert LabelSelector.from_dict(d).matches(labels) is want


def test_from_dict_none_and_empty() -> None:
    none = LabelSelector.from_dict(None)
    assert none.is_empty and none.is_null
    empty = LabelSelector.from_dict({})
    assert empty.is_empty and not empty.is_null


@pytest.mark.parametrize(("d", "fragment"), [
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
     '"Gt" is not a valid label selector operator'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
     "values set can't be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     "values set must be empty for exists and does not exist"),
    ({"matchLabels": {"a b": "c"}}, "name part must consist"),
    ({"matchLabels": {"a": 1}}, "must be a string"),
    ({"matchLabels": []}, "matchLabels must be an object"),
])
def test_from_dict_errors(d: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SelectorError) as exc:
        LabelSelector.from_dict(d)
    assert fragment in str(exc.value)


@pytest.mark.parametrize(("key", "ok"), [
    ("a", True), ("A.b-c_d", True), ("example.com/x", True), ("a" * 63, True),
    ("a" * 64, False), ("", False), ("-a", False), ("a-", False), ("a/b/c", False),
    ("EXAMPLE.com/x", False), ("ex_ample.com/x", False), (("a" * 254) + "/x", False),
])
def test_label_key_validation(key: str, ok: bool) -> None:
    assert (validate_label_key(key) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), ("a", True), ("a.b_c-d", True), ("a" * 63, True), ("a" * 64, False),
    ("-a", False), ("a b", False), ("a/b", False),
])
def test_label_value_validation(value: str, ok: bool) -> None:
    assert (validate_label_value(value) == []) is ok


# -- property: rendering round-trips ---------------------------------------------

names = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?", fullmatch=True).filter(
    lambda s: s not in ("in", "notin"))
prefixed = st.one_of(names, st.builds(lambda p, n: f"{p}.io/{n}",
                                      st.from_regex(r"[a-z]{1,5}", fullmatch=True), names))
values = st.one_of(st.just(""), names)
requirements = st.one_of(
    st.builds(lambda k, v: Requirement.new(k, "=", [v]), prefixed, values),
    st.builds(lambda k, v: Requirement.new(k, "==", [v]), prefixed, values),
    st.builds(lambda k, v: Requirement.new(k, "!=", [v]), prefixed, values),
    st.builds(lambda k, vs: Requirement.new(k, "in", vs), prefixed,
              st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda k, vs: Requirement.new(k, "notin", vs), prefixed,
              st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda k: Requirement.new(k, "exists", []), prefixed),
    st.builds(lambda k: Requirement.new(k, "!", []), prefixed),
    st.builds(lambda k, n: Requirement.new(k, "gt", [str(n)]), prefixed, st.integers(0, 99)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements, max_size=4),
       st.dictionaries(prefixed, values, max_size=4))
def test_rendered_selector_round_trips(reqs: list[Requirement],
                                       labels: dict[str, str]) -> None:
    selector = LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))
    parsed = LabelSelector.parse(str(selector))
    assert parsed == selector
    assert parsed.matches(labels) == selector.matches(labels)


# -- field selectors ----------------------------------------------------------------

def test_field_selector_parse() -> None:
    fs = FieldSelector.parse("metadata.name=foo,spec.nodeName!=n1,status.phase==Running")
    assert fs.requirements == [("metadata.name", "=", "foo"), ("spec.nodeName", "!=", "n1"),
                               ("status.phase", "=", "Running")]
    assert fs.fields() == {"metadata.name", "spec.nodeName", "status.phase"}


@pytest.mark.parametrize(("text", "reqs"), [
    ("", []),
    ("a=", [("a", "=", "")]),
    (r"a=x\,y", [("a", "=", "x,y")]),
    (r"a=x\=y", [("a", "=", "x=y")]),
    (r"a=x\\y", [("a", "=", "x\\y")]),
    ("a!=b", [("a", "!=", "b")]),
    ("b=1,a=2", [("a", "=", "2"), ("b", "=", "1")]),
    ("involvedObject.name=x,involvedObject.namespace=", [
        ("involvedObject.name", "=", "x"), ("involvedObject.namespace", "=", "")]),
])
def test_field_selector_cases(text: str, reqs: list[tuple[str, str, str]]) -> None:
    assert FieldSelector.parse(text).requirements == reqs


@pytest.mark.parametrize(("text", "fragment"), [
    ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
    ("a=b=c", "unescaped character in value"),
    (r"a=b\x", r"invalid escape sequence: \x"),
    ("a=b\\", "invalid escape sequence"),
])
def test_field_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as exc:
        FieldSelector.parse(text)
    assert fragment in str(exc.value)


def test_field_selector_matches() -> None:
    obj = {"metadata.name": "foo", "spec.nodeName": "n1"}
    get = obj.get
    assert FieldSelector.parse("metadata.name=foo").matches(get)
    assert not FieldSelector.parse("metadata.name=bar").matches(get)
    assert FieldSelector.parse("metadata.name!=bar,spec.nodeName=n1").matches(get)
    assert FieldSelector.parse("missing=").matches(get)
    assert not FieldSelector.parse("missing!=").matches(get)
    assert FieldSelector.parse("").matches(get)
    assert FieldSelector.parse("").is_empty


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z.]{0,8}", fullmatch=True),
                          st.sampled_from(["=", "!="]),
                          st.text(alphabet="ab,=\\ x", max_size=5)), max_size=4))
def test_field_selector_round_trips(reqs: list[tuple[str, str, str]]) -> None:
    fs = FieldSelector(sorted(reqs))
    parsed = FieldSelector.parse(str(fs))
    assert sorted(parsed.requirements) == sorted(reqs)


# -- needles: the store's prefilter never drops a matching object ------------------

_KEYS = st.sampled_from(["app", "tier", "example.com/team", "n", "k8s.io/x"])
_VALUES = st.sampled_from(["", "web", "db", "5", "a.b-c_d", "x/y"])


@settings(max_examples=300, deadline=None)
@given(labels=st.dictionaries(_KEYS, _VALUES, max_size=4),
       selector=st.lists(st.tuples(_KEYS, st.sampled_from(["=", "==", "!=", "in", "exists",
                                                           "notin", "!"]), _VALUES),
                         max_size=3),
       spec=st.dictionaries(_KEYS, _VALUES, max_size=2))
def test_needles_are_in_every_matching_object(labels: dict[str, str],
                                              selector: list[tuple[str, str, str]],
                                              spec: dict[str, str]) -> None:
    import orjson
    parts = []
    for key, op, value in selector:
        if (value == "x/y" and op not in ("exists", "!")) or (not value and "in" in op):
            continue  # not a valid label value; `in ()` is refused
        parts.append({"=": f"{key}={value}", "==": f"{key}=={value}", "!=": f"{key}!={value}",
                      "in": f"{key} in ({value})", "notin": f"{key} notin ({value})",
                      "exists": key, "!": f"!{key}"}[op])
    sel = LabelSelector.parse(",".join(parts))
    obj = {"metadata": {"name": "o", "labels": labels}, "spec": spec}
    raw = orjson.dumps(obj)
    if sel.matches(labels):
        assert all(n in raw for n in sel.needles())


def test_needles_name_the_equalities_and_existences() -> None:
    sel = LabelSelector.parse("app=web,tier in (a),env in (a,b),team,x!=y,!gone,n>3")
    assert set(sel.needles()) == {b'"app":"web"', b'"tier":"a"', b'"team":', b'"n":'}
