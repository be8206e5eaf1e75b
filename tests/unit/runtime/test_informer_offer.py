"""A write's answer offered to the informer: a create is seen at once, a
late answer never brings back an object the watch has deleted; an
informer with a field selector of equalities takes the answers that match
it, one with a label selector or another form of field selector none."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.runtime.informer import SharedInformer, fields_match
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import NODES


def _node(rv: int) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "resourceVersion": str(rv)}}


def _synced(**selectors: str) -> SharedInformer:
    informer = SharedInformer(None, NODES, **selectors)  # type: ignore[arg-type]  # never started
    informer._synced = True  # what its first list does
    return informer


def test_a_created_object_is_in_the_cache_at_once() -> None:
    informer = _synced()
    informer.offer(_node(3))
    assert informer.get(ObjectKey("", "n1")) == _node(3)
    informer.offer(_node(2))  # an older answer does not win
    assert informer.get(ObjectKey("", "n1")) == _node(3)


def test_a_late_answer_does_not_resurrect_a_deleted_object() -> None:
    informer = _synced()
    informer._apply(key_of(_node(3)), _node(3))
    informer._apply(key_of(_node(5)), None)  # the watch told the deletion
    informer.offer(_node(3))
    assert informer.get(ObjectKey("", "n1")) is None
    informer.offer(_node(6))  # created again since
    assert informer.get(ObjectKey("", "n1")) == _node(6)


def test_the_answer_of_the_write_that_deleted_does_not_resurrect_it() -> None:
    # the stored copy is older than the deletion (an update removed the last
    # finalizer: the object went at that update's resourceVersion)
    informer = _synced()
    informer._apply(key_of(_node(3)), _node(3))
    informer._deleted(key_of(_node(5)), _node(5))
    for late in (4, 5):
        informer.offer(_node(late))
        assert informer.get(ObjectKey("", "n1")) is None, late
    informer.offer(_node(6))
    assert informer.get(ObjectKey("", "n1")) == _node(6)


def test_an_informer_that_is_not_running_takes_nothing() -> None:
    informer = SharedInformer(None, NODES)  # type: ignore[arg-type]
    informer.offer(_node(1))
    assert informer.get(ObjectKey("", "n1")) is None


def _pod(node: str, rv: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)},
            "spec": {"nodeName": node, "unschedulable": True}}


@pytest.mark.parametrize(("selector", "matches"), [
    ("spec.nodeName=n1", True),
    ("spec.nodeName==n1", True),
    ("spec.nodeName=n2", False),
    ("spec.nodeName=n1,metadata.name=p", True),
    ("spec.nodeName=n1,metadata.name=q", False),
    ("spec.unschedulable=true", True),
    ("spec.nodeName!=n2", False),  # not an equality: not known here
    ("spec.nodeName", False),
    ("spec=n1", False),  # a mapping is no field value
])
def test_field_selectors_of_equalities(selector: str, matches: bool) -> None:
    assert fields_match(selector, _pod("n1")) is matches


def test_a_field_selected_informer_takes_the_answers_it_would_list() -> None:
    informer = _synced(field_selector="spec.nodeName=n1")
    informer.offer(_pod("n2"))
    assert informer.get(ObjectKey("ns", "p")) is None
    informer.offer(_pod("n1"))
    assert informer.get(ObjectKey("ns", "p")) == _pod("n1")


def test_a_label_selected_informer_takes_no_answer() -> None:
    informer = _synced(label_selector="a=b")
    informer.offer({"metadata": {"name": "n1", "labels": {"a": "b"}, "resourceVersion": "1"}})
    assert informer.get(ObjectKey("", "n1")) is None
