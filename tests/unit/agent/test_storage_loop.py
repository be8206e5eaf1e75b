"""The storage loop against an in-memory Volume API (no API server): a job
without a result runs once and its result is annotated; a result for the job
stops it from running again; another node's Volume, a Volume without a job
and a deleted one are left alone; a malformed job gets a failed result; an
API failure is retried with back-off; ``run`` follows a source of keys and
stops on ``stop``."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from racksmith.agent.config import AgentTiming
from racksmith.agent.host import EmulatedHost
from racksmith.agent.storage import StorageContext, StorageLoop
from racksmith.clock import SystemClock
from racksmith.kinds.volumejobs import JOB_RESULT_ANNOTATION
from racksmith.runtime.keys import ObjectKey

NODE = "n1"


class FakeVolumes:
    """VolumeApi double: Volumes by name; annotation patches merged and counted."""

    def __init__(self) -> None:
        self.volumes: dict[str, dict[str, Any]] = {}
        self.patches: list[tuple[str, dict[str, str]]] = []
        self.fail_patches = 0

    def add(self, name: str, job: str | None, node: str = NODE) -> None:
        self.volumes[name] = {
            "metadata": {"name": name, "uid": f"uid-{name}", "annotations": {}},
            "spec": {"nodeName": node, "storageClassName": "sc", "mode": "Block",
                     "sparseLoopDevice": {"size": "8Mi"}},
            "status": {"job": job} if job else {},
        }

    async def get_volume(self, name: str) -> dict[str, Any] | None:
        obj = self.volumes.get(name)
        return copy.deepcopy(obj) if obj else None

    async def annotate_volume(self, name: str, annotations: dict[str, str]) -> None:
        if self.fail_patches:
            self.fail_patches -= 1
            raise ConnectionError("API unreachable")
        self.patches.append((name, dict(annotations)))
        self.volumes[name]["metadata"]["annotations"].update(annotations)

    async def get_storage_class(self, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name}, "parameters": {"fsType": "ext4"}}

    def result(self, name: str) -> dict[str, Any]:
        text = self.volumes[name]["metadata"]["annotations"][JOB_RESULT_ANNOTATION]
        return dict(json.loads(text))


class ListSource:
    """Source double: yields the given names, then waits forever."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.synced = False

    @property
    def has_synced(self) -> bool:
        return self.synced

    async def _keys(self) -> AsyncIterator[ObjectKey]:
        for name in self.names:
            yield ObjectKey("", name)
        self.synced = True
        await asyncio.Event().wait()

    def keys(self) -> AsyncIterator[ObjectKey]:
        return self._keys()


def make(tmp_path: Path, api: FakeVolumes, names: list[str] | None = None) -> StorageLoop:
    ctx = StorageContext.for_host(EmulatedHost(tmp_path))
    timing = AgentTiming(backoff_base=0.05, backoff_cap=0.2)
    return StorageLoop(api, ctx, NODE, SystemClock(), ListSource(names or []), timing)


async def test_a_job_runs_once_and_its_result_is_annotated(tmp_path: Path) -> None:
    api = FakeVolumes()
    api.add("v1", "prepare:00000001")
    loop = make(tmp_path, api)
    result = await loop.sync("v1")
    assert result is not None and result.ok
    assert api.result("v1") == {"job": "prepare:00000001", "ok": True, "deviceName": "loop0",
                                "sizeBytes": 8 * 2**20}
    assert await loop.sync("v1") is None  # the result names the job: not run again
    assert len(api.patches) == 1
    # The controller starts the next job: it runs.
    api.volumes["v1"]["status"]["job"] = "unprepare:00000002"
    assert (await loop.sync("v1")) is not None
    assert api.result("v1") == {"job": "unprepare:00000002", "ok": True}
    assert not (tmp_path / "var/lib/racksmith/volumes/uid-v1.img").exists()


async def test_other_nodes_no_job_and_gone_volumes_are_left_alone(tmp_path: Path) -> None:
    api = FakeVolumes()
    api.add("theirs", "prepare:00000001", node="n2")
    api.add("idle", None)
    loop = make(tmp_path, api)
    for name in ("theirs", "idle", "gone"):
        assert await loop.sync(name) is None
    assert api.patches == []
    assert not (tmp_path / "var").exists()


async def test_a_malformed_job_gets_a_failed_result(tmp_path: Path) -> None:
    api = FakeVolumes()
    api.add("v1", "format-everything")
    await make(tmp_path, api).sync("v1")
    result = api.result("v1")
    assert (result["job"], result["ok"], result["reason"]) == (
        "format-everything", False, "InvalidJob")


async def test_run_follows_the_source_retries_and_stops(tmp_path: Path) -> None:
    api = FakeVolumes()
    api.add("v1", "prepare:00000001")
    api.add("v2", "prepare:00000002")
    api.add("v3", "prepare:00000003", node="n2")
    api.fail_patches = 2  # the first two result writes fail: retried with back-off
    (tmp_path / "var/lib/racksmith/volumes").mkdir(parents=True)
    stale = tmp_path / "var/lib/racksmith/volumes/uid-old.img.tmp"
    stale.write_bytes(b"")
    loop = make(tmp_path, api, ["v1", "v2", "v3"])
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    async with asyncio.timeout(10):
        while len(api.patches) < 2:
            await asyncio.sleep(0.02)
        assert not stale.exists()  # recovered at start
        stop.set()
        await task
    assert sorted(name for name, _ in api.patches) == ["v1", "v2"]
    assert api.result("v1")["deviceName"] != api.result("v2")["deviceName"]


@pytest.mark.parametrize("attempt,delay", [(1, 0.05), (2, 0.1), (3, 0.2), (9, 0.2)])
def test_backoff_is_capped(tmp_path: Path, attempt: int, delay: float) -> None:
    assert make(tmp_path, FakeVolumes()).backoff(attempt) == pytest.approx(delay)
