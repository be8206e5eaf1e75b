"""CacheAccess: the SelfSubjectAccessReviews behind reads from informers that
run under another identity — one question per answer needed, however many
reads wait for it (with a recording fake of the Client's call, no server)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from racksmith.runtime.client import CacheAccess
from racksmith.runtime.errors import Forbidden
from racksmith.runtime.resources import CONFIG_MAPS, PODS

pytestmark = pytest.mark.asyncio


class Reviews:
    """Answers SelfSubjectAccessReviews: allowed where ``allowed`` names the
    namespace ("" = across namespaces), after a pause (so reads pile up)."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, str]] = []

    async def _call(self, method: str, path: str, *, body: Any) -> dict[str, Any]:
        attrs = body["spec"]["resourceAttributes"]
        self.asked.append((attrs["resource"], attrs["namespace"], attrs["verb"]))
        await asyncio.sleep(0.01)
        return {"status": {"allowed": attrs["namespace"] in self.allowed}}


async def test_reads_at_a_controllers_start_ask_once() -> None:
    """50 reads at once (every worker's first reconcile) make one question —
    list and watch, across namespaces — not one each (the update controller
    made 394 reviews at racksmith up's start)."""
    reviews = Reviews({""})
    access = CacheAccess(cast(Any, reviews))
    await asyncio.gather(*(access.require(PODS, f"ns-{i % 5}") for i in range(50)))
    assert reviews.asked == [("pods", "", "list"), ("pods", "", "watch")]
    await access.require(PODS, "elsewhere")
    await access.require(PODS, None)
    assert len(reviews.asked) == 2


async def test_a_namespace_only_identity_is_asked_per_namespace() -> None:
    reviews = Reviews({"team-a"})
    access = CacheAccess(cast(Any, reviews))
    await asyncio.gather(*(access.require(CONFIG_MAPS, "team-a") for _ in range(10)))
    assert reviews.asked == [("configmaps", "", "list"),
                             ("configmaps", "team-a", "list"), ("configmaps", "team-a", "watch")]
    await access.require(CONFIG_MAPS, "team-a")
    assert len(reviews.asked) == 3  # the namespace's answer is kept
    with pytest.raises(Forbidden):
        await access.require(CONFIG_MAPS, "team-b")
    with pytest.raises(Forbidden):
        await access.require(CONFIG_MAPS, None)
    asked = len(reviews.asked)
    with pytest.raises(Forbidden):  # a refusal is asked again (a role may be fixed)
        await access.require(CONFIG_MAPS, None)
    assert len(reviews.asked) == asked + 1


async def test_a_cancelled_read_leaves_the_question_to_the_others() -> None:
    reviews = Reviews({""})
    access = CacheAccess(cast(Any, reviews))
    first = asyncio.ensure_future(access.require(PODS, None))
    second = asyncio.ensure_future(access.require(PODS, None))
    await asyncio.sleep(0)
    first.cancel()
    await second
    assert first.cancelled()
    assert reviews.asked == [("pods", "", "list"), ("pods", "", "watch")]
