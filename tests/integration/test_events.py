"""The EventRecorder against the real embedded API server: identical records
are one Event whose count goes 1 → 3, a different message is a second
Event, an Event deleted meanwhile is created anew, and an Event about a
cluster-scoped object lands in ``default``."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from racksmith.runtime.events import EventRecorder, object_ref

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def config_map(client: ApiClient, ns: str, name: str) -> dict[str, Any]:
    core = CoreV1Api(client)
    created = await core.create_namespaced_config_map(ns, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"k": "v"}})
    obj: dict[str, Any] = client.sanitize_for_serialization(created)
    return {**obj, "apiVersion": "v1", "kind": "ConfigMap"}


async def events_about(client: ApiClient, ns: str, name: str) -> list[Any]:
    listed = await CoreV1Api(client).list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name}")
    return sorted(listed.items, key=lambda e: e.metadata.name)


async def test_repeats_count_up_on_one_event(client: ApiClient, ns: str) -> None:
    obj = await config_map(client, ns, "cm-repeat")
    recorder = EventRecorder(client, "racksmith-test")
    counts = []
    for _ in range(3):
        await recorder.record(obj, "Warning", "Broken", "the config is broken")
        [event] = await events_about(client, ns, "cm-repeat")
        counts.append(event.count)
    assert counts == [1, 2, 3]
    assert event.involved_object.uid == obj["metadata"]["uid"]
    assert event.involved_object.kind == "ConfigMap"
    assert event.source.component == "racksmith-test"
    assert event.reporting_component == "racksmith-test"
    assert event.first_timestamp <= event.last_timestamp

    await recorder.record(obj, "Warning", "Broken", "the config is broken again")
    events = await events_about(client, ns, "cm-repeat")
    assert sorted((e.message, e.count) for e in events) == [
        ("the config is broken", 3), ("the config is broken again", 1)]


async def test_a_deleted_event_is_created_anew(client: ApiClient, ns: str) -> None:
    obj = await config_map(client, ns, "cm-gone")
    recorder = EventRecorder(client, "racksmith-test")
    await recorder.record(obj, "Normal", "Seen", "seen")
    await recorder.record(obj, "Normal", "Seen", "seen")
    [event] = await events_about(client, ns, "cm-gone")
    assert event.count == 2
    await CoreV1Api(client).delete_namespaced_event(event.metadata.name, ns)
    await recorder.record(obj, "Normal", "Seen", "seen")
    [again] = await events_about(client, ns, "cm-gone")
    assert again.count == 1 and again.metadata.name != event.metadata.name


async def test_cluster_scoped_objects_get_their_events_in_default(client: ApiClient,
                                                                  ns: str) -> None:
    recorder = EventRecorder(client, "racksmith-test")
    name = f"{ns}-node"
    await recorder.record(object_ref("v1", "Node", name, uid=name), "Normal", "Cordoned",
                          "cordoned for a test")
    [event] = await events_about(client, "default", name)
    assert event.involved_object.namespace is None
    assert (event.reason, event.count) == ("Cordoned", 1)
    await CoreV1Api(client).delete_namespaced_event(event.metadata.name, "default")
