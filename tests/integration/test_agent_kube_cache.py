"""The agent's two cached reads (``racksmith.agent.kube.AgentKube``) against
the real in-process API server: before the node's Volume watch has listed,
``get_volume`` reads live; once it has, it answers from the watch's store
(a change made behind the cache's back shows only when its event arrives;
another node's Volume is None, as it is for the agent), and the agent's own
annotation patch is seen at once; ``get_storage_class`` is served by a
StorageClass informer while ``storage_class_cache`` is open and live
after. The StorageClass and Volumes a test made are deleted after it
(``tests.harness``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi, StorageV1Api

from racksmith.agent.kube import AgentKube
from racksmith.clock import SystemClock
from racksmith.runtime.resources import STORAGE_CLASSES
from tests.harness.api import MERGE
from tests.harness.wait import eventually

GROUP, VERSION, PLURAL = "storage.racksmith.io", "v1alpha1", "volumes"
NODE = "node-cache"

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def create_volume(custom: CustomObjectsApi, name: str, node: str) -> None:
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Volume", "metadata": {"name": name},
        "spec": {"nodeName": node, "storageClassName": "cached", "mode": "Filesystem",
                 "sparseLoopDevice": {"size": "8Mi"}}})


def labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


async def test_volume_reads_come_from_the_node_watch_once_it_has_listed(
        client: ApiClient) -> None:
    custom = CustomObjectsApi(client)
    await create_volume(custom, "cache-mine", NODE)
    await create_volume(custom, "cache-theirs", "node-other")
    kube = AgentKube(client)
    source = kube.volume_source(NODE, SystemClock())
    assert (await kube.get_volume("cache-mine")) is not None  # live: nothing listed yet
    assert (await kube.get_volume("cache-theirs")) is not None  # live reads see any node's

    keys = source.keys()
    consume = asyncio.create_task(anext(keys))
    try:
        await eventually(lambda: source.informer.has_synced, "the Volume watch listed")
        assert (await kube.get_volume("cache-theirs")) is None  # not this node's
        cached = await kube.get_volume("cache-mine")
        assert cached is not None
        cached["metadata"]["labels"] = {"changed": "by-caller"}  # a copy: the store keeps its own
        assert labels(await kube.get_volume("cache-mine")) == {}

        await custom.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, "cache-mine", {"metadata": {"labels": {"seen": "later"}}},
            **MERGE)

        async def labelled() -> bool:
            return labels(await kube.get_volume("cache-mine")) == {"seen": "later"}
        await eventually(labelled, "the label patch reached the cache")

        await kube.annotate_volume("cache-mine", {"example.com/mark": "1"})
        mine = await kube.get_volume("cache-mine")  # at once: the patch's answer was offered
        assert (mine or {})["metadata"]["annotations"] == {"example.com/mark": "1"}
    finally:
        consume.cancel()
        await asyncio.gather(consume, return_exceptions=True)
        await keys.aclose()


async def test_storage_classes_are_cached_while_the_cache_is_open(client: ApiClient) -> None:
    await StorageV1Api(client).create_storage_class({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "cached"}, "provisioner": "kubernetes.io/no-provisioner",
        "parameters": {"fsType": "ext4"}})
    kube = AgentKube(client)
    assert not kube.client.cached(STORAGE_CLASSES)
    async with kube.storage_class_cache():
        await eventually(lambda: kube.client.cached(STORAGE_CLASSES),
                         "the StorageClass informer listed")
        found = await kube.get_storage_class("cached")
        assert (found or {})["parameters"] == {"fsType": "ext4"}
        assert (await kube.get_storage_class("absent")) is None
    assert not kube.client.cached(STORAGE_CLASSES)
    assert (await kube.get_storage_class("cached")) is not None  # live again
