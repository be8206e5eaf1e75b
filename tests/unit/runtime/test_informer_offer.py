"""A write's answer offered to the informer: a create is seen at once, a
late answer never brings back an object the watch has deleted."""

from __future__ import annotations

from typing import Any

from racksmith.runtime.informer import SharedInformer
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import NODES


def _node(rv: int) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "resourceVersion": str(rv)}}


def _synced() -> SharedInformer:
    informer = SharedInformer(None, NODES)  # type: ignore[arg-type]  # never started
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


def test_an_informer_that_is_not_running_takes_nothing() -> None:
    informer = SharedInformer(None, NODES)  # type: ignore[arg-type]
    informer.offer(_node(1))
    assert informer.get(ObjectKey("", "n1")) is None
