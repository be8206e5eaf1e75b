"""Template choice, label selectors and the template-change confirmation rule."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.controllers.ipamhost.names import CONFIRM_GENERATION, RENDERED_GENERATION
from racksmith.controllers.ipamhost.selection import (
    NoTemplate,
    awaits_confirmation,
    choose_template,
    describe,
    is_outdated,
    matches,
)
from racksmith.kinds.cluster import Machine
from racksmith.kinds.common import LabelSelector
from racksmith.kinds.ipam import IpamHost, IpamHostState, L2Template


def tpl(name: str, labels: dict[str, str] | None = None, generation: int = 1,
        annotations: dict[str, str] | None = None, **spec: Any) -> L2Template:
    return L2Template.model_validate({
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {},
                     "generation": generation, "annotations": annotations or {}},
        "spec": {"npTemplate": "version: 2\n", **spec}})


def machine(selector: dict[str, Any] | None = None, cluster: str = "c1") -> Machine:
    spec: dict[str, Any] = {"clusterName": cluster}
    if selector is not None:
        spec["l2TemplateSelector"] = selector
    return Machine.model_validate({"metadata": {"name": "m", "namespace": "ns"}, "spec": spec})


def host(ref: str | None = None, rendered: str | None = None,
         used: str | None = None) -> IpamHost:
    return IpamHost.model_validate({
        "metadata": {"name": "m", "namespace": "ns",
                     "annotations": {RENDERED_GENERATION: rendered} if rendered else {}},
        "spec": {"l2TemplateRef": ref} if ref else {},
        "status": {"l2TemplateRef": used} if used else None})


def sel(**raw: Any) -> LabelSelector:
    return LabelSelector.model_validate(raw)


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    (sel(), {}, True),
    (sel(matchLabels={"a": "1"}), {"a": "1", "b": "2"}, True),
    (sel(matchLabels={"a": "1"}), {"a": "2"}, False),
    (sel(matchExpressions=[{"key": "a", "operator": "In", "values": ["1", "2"]}]),
     {"a": "2"}, True),
    (sel(matchExpressions=[{"key": "a", "operator": "In", "values": ["1"]}]), {}, False),
    (sel(matchExpressions=[{"key": "a", "operator": "NotIn", "values": ["1"]}]), {}, True),
    (sel(matchExpressions=[{"key": "a", "operator": "NotIn", "values": ["1"]}]),
     {"a": "1"}, False),
    (sel(matchExpressions=[{"key": "a", "operator": "Exists"}]), {"a": ""}, True),
    (sel(matchExpressions=[{"key": "a", "operator": "DoesNotExist"}]), {"a": ""}, False),
])
def test_matches(selector: LabelSelector, labels: dict[str, str], expected: bool) -> None:
    assert matches(selector, labels) is expected


def test_describe() -> None:
    s = sel(matchLabels={"rack": "r1"},
            matchExpressions=[{"key": "z", "operator": "In", "values": ["a", "b"]},
                              {"key": "x", "operator": "DoesNotExist"}])
    assert describe(s) == "rack=r1,z in (a,b),!x"


def test_ref_wins_and_a_missing_ref_is_pending() -> None:
    templates = [tpl("a", default=True), tpl("b")]
    chosen = choose_template(host(ref="b"), machine(), templates)
    assert isinstance(chosen, L2Template) and chosen.metadata.name == "b"
    missing = choose_template(host(ref="zz"), None, templates)
    assert isinstance(missing, NoTemplate) and missing.state == IpamHostState.PENDING
    assert "zz" in missing.message


def test_selector_must_match_exactly_one() -> None:
    templates = [tpl("a", {"rack": "r1"}), tpl("b", {"rack": "r2"}), tpl("d", default=True)]
    chosen = choose_template(host(), machine({"matchLabels": {"rack": "r2"}}), templates)
    assert isinstance(chosen, L2Template) and chosen.metadata.name == "b"
    none = choose_template(host(), machine({"matchLabels": {"rack": "r9"}}), templates)
    assert isinstance(none, NoTemplate) and none.state == IpamHostState.ERROR
    assert "rack=r9" in none.message
    both = choose_template(host(), machine({"matchExpressions": [
        {"key": "rack", "operator": "Exists"}]}), templates)
    assert isinstance(both, NoTemplate) and both.state == IpamHostState.ERROR
    assert "a, b" in both.message


def test_default_template_of_the_cluster() -> None:
    templates = [tpl("any", default=True), tpl("mine", default=True, clusterRef="c1"),
                 tpl("other", default=True, clusterRef="c2")]
    chosen = choose_template(host(), machine(cluster="c1"), templates)
    assert isinstance(chosen, L2Template) and chosen.metadata.name == "mine"
    # Another cluster: only the cluster-less default fits.
    chosen = choose_template(host(), machine(cluster="c3"), templates)
    assert isinstance(chosen, L2Template) and chosen.metadata.name == "any"
    # No Machine: cluster-less defaults only.
    chosen = choose_template(host(), None, templates)
    assert isinstance(chosen, L2Template) and chosen.metadata.name == "any"


def test_no_or_several_defaults() -> None:
    none = choose_template(host(), machine(), [tpl("x")])
    assert isinstance(none, NoTemplate) and none.state == IpamHostState.PENDING
    assert "no default template for cluster c1" in none.message
    two = choose_template(host(), machine(), [tpl("x", default=True), tpl("y", default=True)])
    assert isinstance(two, NoTemplate) and two.state == IpamHostState.ERROR


def test_confirmation_rule() -> None:
    t2 = tpl("t", generation=2)
    assert not is_outdated(host(), t2)                               # never rendered
    assert not is_outdated(host(rendered="1", used="other"), t2)     # another template
    assert not is_outdated(host(rendered="2", used="t"), t2)         # up to date
    assert is_outdated(host(rendered="1", used="t"), t2)
    assert awaits_confirmation(host(rendered="1", used="t"), t2)
    wrong = tpl("t", generation=2, annotations={CONFIRM_GENERATION: "1"})
    assert awaits_confirmation(host(rendered="1", used="t"), wrong)
    right = tpl("t", generation=2, annotations={CONFIRM_GENERATION: "2"})
    assert not awaits_confirmation(host(rendered="1", used="t"), right)
