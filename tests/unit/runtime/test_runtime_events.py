"""racksmith.runtime.events: the EventRecorder over a fake sink — repeats
aggregate into one Event's count, a gone Event is created anew, Events about
cluster-scoped objects go to ``default``, messages are redacted and cut,
and nothing it does fails the caller."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from racksmith.redact import REDACTED, SECRETS
from racksmith.runtime import FakeClock
from racksmith.runtime.conditions import EventSpec
from racksmith.runtime.events import (
    MAX_MESSAGE_BYTES,
    EventGone,
    EventRecorder,
    NameTaken,
    event_message,
    involved_object,
    object_ref,
)

MACHINE = {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine",
           "metadata": {"name": "m1", "namespace": "ns1", "uid": "u-1",
                        "resourceVersion": "42"}}
VOLUME = {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
          "metadata": {"name": "v1", "uid": "u-2", "resourceVersion": "7"}}


class FakeSink:
    """Events in memory, keyed by (namespace, name); ``fail`` makes every call raise."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.fail: Exception | None = None

    async def create(self, namespace: str, body: dict[str, Any]) -> None:
        self.calls.append(("create", namespace, body["metadata"]["name"]))
        if self.fail is not None:
            raise self.fail
        key = (namespace, body["metadata"]["name"])
        if key in self.events:
            raise NameTaken(key[1])
        self.events[key] = copy.deepcopy(body)

    async def patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.calls.append(("patch", namespace, name))
        if self.fail is not None:
            raise self.fail
        if (namespace, name) not in self.events:
            raise EventGone(name)
        self.events[namespace, name].update(body)

    def listed(self) -> list[dict[str, Any]]:
        return list(self.events.values())


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()


def recorder(sink: FakeSink, clock: FakeClock, **kwargs: Any) -> EventRecorder:
    return EventRecorder(None, "racksmith-test", sink=sink, clock=clock, instance="test-1",
                         **kwargs)


async def test_an_event_names_its_object_source_and_time(sink: FakeSink,
                                                         clock: FakeClock) -> None:
    await recorder(sink, clock).record(MACHINE, "Normal", "Provisioned", "host h1 ready")
    [event] = sink.listed()
    assert event["metadata"]["namespace"] == "ns1"
    name = event["metadata"]["name"]
    assert name.startswith("m1.") and int(name.split(".", 1)[1], 16) > 0
    assert event["involvedObject"] == {
        "apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine", "name": "m1",
        "namespace": "ns1", "uid": "u-1", "resourceVersion": "42"}
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal", "Provisioned", "host h1 ready")
    assert event["source"] == {"component": "racksmith-test"}
    assert event["reportingComponent"] == "racksmith-test"
    assert event["reportingInstance"] == "test-1"
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2025-01-01T00:00:00Z"


async def test_repeats_bump_the_count_and_last_timestamp(sink: FakeSink,
                                                         clock: FakeClock) -> None:
    rec = recorder(sink, clock)
    await rec.record(MACHINE, "Warning", "NoMatchingHost", "no host fits")
    await clock.advance(5)
    await rec.record(MACHINE, "Warning", "NoMatchingHost", "no host fits")
    await clock.advance(5)
    await rec.record(MACHINE, "Warning", "NoMatchingHost", "no host fits")
    [event] = sink.listed()
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2025-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2025-01-01T00:00:10Z"
    assert [c[0] for c in sink.calls] == ["create", "patch", "patch"]


@pytest.mark.parametrize("change", ["message", "reason", "type", "object", "uid"])
async def test_anything_different_is_another_event(sink: FakeSink, clock: FakeClock,
                                                   change: str) -> None:
    rec = recorder(sink, clock)
    obj, type_, reason, message = MACHINE, "Normal", "Claimed", "host h1"
    await rec.record(obj, type_, reason, message)
    if change == "message":
        message = "host h2"
    elif change == "reason":
        reason = "Released"
    elif change == "type":
        type_ = "Warning"
    elif change == "object":
        obj = {**MACHINE, "metadata": {**MACHINE["metadata"], "name": "m2", "uid": "u-9"}}
    else:  # the object was deleted and made again under the same name
        obj = {**MACHINE, "metadata": {**MACHINE["metadata"], "uid": "u-new"}}
    await rec.record(obj, type_, reason, message)
    assert sorted(e["count"] for e in sink.listed()) == [1, 1]


async def test_a_new_resource_version_is_still_a_repeat(sink: FakeSink,
                                                        clock: FakeClock) -> None:
    rec = recorder(sink, clock)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    later = {**MACHINE, "metadata": {**MACHINE["metadata"], "resourceVersion": "43"}}
    await rec.record(later, "Normal", "Claimed", "host h1")
    assert [e["count"] for e in sink.listed()] == [2]


async def test_after_the_window_a_repeat_is_a_new_event(sink: FakeSink,
                                                        clock: FakeClock) -> None:
    rec = recorder(sink, clock, window=60.0)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    await clock.advance(30)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    await clock.advance(61)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    assert sorted(e["count"] for e in sink.listed()) == [1, 2]


async def test_a_gone_event_is_created_anew(sink: FakeSink, clock: FakeClock) -> None:
    rec = recorder(sink, clock)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    sink.events.clear()  # deleted (an event TTL, a user)
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    [event] = sink.listed()
    assert event["count"] == 1
    assert [c[0] for c in sink.calls] == ["create", "patch", "patch", "create"]
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    assert [e["count"] for e in sink.listed()] == [2]


async def test_the_cache_is_an_lru(sink: FakeSink, clock: FakeClock) -> None:
    rec = recorder(sink, clock, cache_size=2)
    for message in ("a", "b", "a", "c", "a", "b"):  # "b" is pushed out by "c"
        await rec.record(MACHINE, "Normal", "Step", message)
    counts = sorted((e["message"], e["count"]) for e in sink.listed())
    assert counts == [("a", 3), ("b", 1), ("b", 1), ("c", 1)]


async def test_cluster_scoped_objects_get_events_in_default(sink: FakeSink,
                                                            clock: FakeClock) -> None:
    rec = recorder(sink, clock)
    await rec.record(VOLUME, "Warning", "CreationError", "no disk")
    await rec.record(object_ref("v1", "Node", "node-1", uid="node-1"), "Normal", "Cordoned",
                     "cordoned")
    volume, node = sink.listed()
    assert volume["metadata"]["namespace"] == node["metadata"]["namespace"] == "default"
    assert "namespace" not in volume["involvedObject"]
    assert node["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1",
                                      "uid": "node-1"}


async def test_events_in_one_instant_get_distinct_names(sink: FakeSink,
                                                        clock: FakeClock) -> None:
    rec = recorder(sink, clock)
    for i in range(5):
        await rec.record(MACHINE, "Normal", "Step", f"step {i}")
    names = [e["metadata"]["name"] for e in sink.listed()]
    assert len(set(names)) == 5


async def test_a_taken_name_is_retried_with_the_next(sink: FakeSink,
                                                     clock: FakeClock) -> None:
    first = recorder(sink, clock)
    second = recorder(sink, clock)  # another replica, same instant
    await first.record(MACHINE, "Normal", "Step", "one")
    await second.record(MACHINE, "Normal", "Step", "two")
    assert sorted(e["message"] for e in sink.listed()) == ["one", "two"]


def test_long_messages_are_cut_to_1024_bytes() -> None:
    assert event_message("x" * 1024) == "x" * 1024
    cut = event_message("x" * 5000)
    assert len(cut.encode()) == MAX_MESSAGE_BYTES and cut.endswith("...")
    wide = event_message("é" * 1000)  # 2000 bytes; the cut never splits a character
    assert len(wide.encode()) <= MAX_MESSAGE_BYTES
    assert wide.endswith("...") and set(wide[:-3]) == {"é"}


async def test_messages_never_carry_secrets(sink: FakeSink, clock: FakeClock) -> None:
    secret = "s3cr3t-bmc-value-of-the-event-test"
    SECRETS.add(secret)  # as the BMC credentials reader does (left registered: harmless)
    await recorder(sink, clock).record(
        MACHINE, "Warning", "RegistrationError",
        f"login with {secret} failed; Authorization: Bearer abcdefghijklmnop")
    [event] = sink.listed()
    assert secret not in event["message"] and "abcdefghijklmnop" not in event["message"]
    assert REDACTED in event["message"]


async def test_errors_are_logged_and_swallowed(sink: FakeSink, clock: FakeClock) -> None:
    class Log:
        def __init__(self) -> None:
            self.warnings: list[dict[str, Any]] = []

        def warning(self, event: str, **kw: Any) -> None:
            self.warnings.append({"event": event, **kw})

    log = Log()
    rec = recorder(sink, clock, logger=log)
    sink.fail = RuntimeError("API down")
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")
    await rec.record({"metadata": {"name": "x"}}, "Normal", "Claimed", "no kind")
    await rec.record(MACHINE, "Info", "Claimed", "not a type")
    assert [w["event"] for w in log.warnings] == ["event not recorded"] * 3
    assert "API down" in log.warnings[0]["error"]
    sink.fail = None
    await rec.record(MACHINE, "Normal", "Claimed", "host h1")  # nothing half-remembered
    assert [e["count"] for e in sink.listed()] == [1]


async def test_cancellation_propagates(clock: FakeClock) -> None:
    class Stuck(FakeSink):
        async def create(self, namespace: str, body: dict[str, Any]) -> None:
            await asyncio.Event().wait()

    task = asyncio.create_task(recorder(Stuck(), clock).record(MACHINE, "Normal", "A", "b"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_components_share_the_cache_but_not_the_source(sink: FakeSink,
                                                             clock: FakeClock) -> None:
    root = recorder(sink, clock)
    a, b = root.for_component("racksmith-a"), root.for_component("racksmith-b")
    await a.record(MACHINE, "Normal", "Step", "same")
    await a.record(MACHINE, "Normal", "Step", "same")
    await b.record(MACHINE, "Normal", "Step", "same")
    by_source = {e["source"]["component"]: e["count"] for e in sink.listed()}
    assert by_source == {"racksmith-a": 2, "racksmith-b": 1}
    assert a.clock is clock
    assert a.instance.startswith("racksmith-a-")


async def test_record_all_records_specs_in_order(sink: FakeSink, clock: FakeClock) -> None:
    await recorder(sink, clock).record_all(MACHINE, [
        EventSpec("Normal", "First", "1"), EventSpec("Warning", "Second", "2")])
    assert [(e["type"], e["reason"]) for e in sink.listed()] == [
        ("Normal", "First"), ("Warning", "Second")]


def test_involved_object_needs_kind_and_name() -> None:
    with pytest.raises(ValueError):
        involved_object({"apiVersion": "v1", "metadata": {"name": "x"}})
    with pytest.raises(ValueError):
        involved_object({"apiVersion": "v1", "kind": "Node", "metadata": {}})
