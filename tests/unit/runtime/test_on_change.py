"""on_change: a mapper that drops the events of heartbeats (with the
LCMMachine digest the Machine and update controllers use)."""

from __future__ import annotations

from typing import Any

from racksmith.kinds.lcm import lcm_change
from racksmith.runtime.keys import ObjectKey, on_change, self_keys


def lcm(heartbeat: str, phase: str = "Ready", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "m-0", "namespace": "ns", "generation": 3, **meta},
            "spec": {"clusterName": "demo"},
            "status": {"phase": phase, "heartbeat": heartbeat, "observedGeneration": 3}}


def test_a_heartbeat_alone_wakes_nothing() -> None:
    mapped = on_change(lcm_change, self_keys)
    key = [ObjectKey("ns", "m-0")]
    assert mapped(lcm("12:00:00")) == key  # first sight
    assert mapped(lcm("12:00:20")) == []  # the agent's heartbeat only
    assert mapped(lcm("12:00:40", phase="Applying")) == key  # a change
    assert mapped(lcm("12:01:00", phase="Applying")) == []
    deleting = lcm("12:01:00", phase="Applying", deletionTimestamp="2026-12-05T12:01:00Z")
    assert mapped(deleting) == key and mapped(deleting) == key  # deletions always pass


def _node(name: str, rv: int, ready: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T12:00:00Z"
    return {"metadata": meta, "status": {"ready": ready, "heartbeat": rv}}


async def test_an_informer_source_compares_old_and_new_and_keeps_nothing() -> None:
    """Through an informer's source the filter compares the event's old and
    new object: a heartbeat wakes nothing, a change wakes once (not again on
    the next heartbeat), a deletion wakes, and no per-object state is kept."""
    import asyncio

    from racksmith.runtime.informer import InformerSource, SharedInformer
    from racksmith.runtime.resources import NODES

    informer = SharedInformer(None, NODES)  # type: ignore[arg-type]  # never started
    informer._synced = True
    informer._task = asyncio.get_running_loop().create_future()  # type: ignore[assignment]
    mapped = on_change(lambda o: o["status"]["ready"], self_keys)
    keys = InformerSource(informer, mapped).keys()
    n1, marker = ObjectKey("", "n1"), ObjectKey("", "marker")
    rv = iter(range(1, 100))

    def apply(name: str, ready: str, deleting: bool = False) -> None:
        informer._apply(ObjectKey("", name), _node(name, next(rv), ready, deleting))

    async def next_key(*, after_marker: bool = False) -> ObjectKey:
        if after_marker:  # a marker event after it: the next key tells what came before
            apply("marker", str(next(rv)))
        return await anext(keys)

    first = asyncio.ensure_future(anext(keys))
    await asyncio.sleep(0)  # subscribed
    apply("n1", "True")
    assert await first == n1
    apply("n1", "True")  # heartbeat
    assert await next_key(after_marker=True) == marker
    apply("n1", "False")  # a change
    assert await next_key() == n1
    apply("n1", "False")  # the next heartbeat: nothing
    assert await next_key(after_marker=True) == marker
    apply("n1", "False", deleting=True)
    assert await next_key() == n1
    informer._apply(n1, None)
    assert await next_key() == n1
    assert mapped._seen == {}
    await keys.aclose()
