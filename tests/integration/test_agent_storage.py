"""The agent's storage tasks against the real in-process API server: the
test plays the Volume controller (creates a StorageClass and Volumes, writes
``status.job`` through the status subresource) and ``run_agent`` runs in
emulated mode on a tmp root for node X: a prepare job gets an ok result
annotation (deviceName, sizeBytes, uuid) and a real file with the
StorageClass's filesystem; another node's Volume is ignored; an unprepare
job removes the file. Then an emulated host's OS boot links its non-root
disks as /dev/<disk>, and a rawBlockDevice Volume is prepared on such a link
and wiped by its unprepare job. The tests share the module's API server;
the StorageClass and Volumes a test made are deleted after it
(``tests.harness``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi, StorageV1Api

from racksmith.agent import run_agent
from racksmith.agent.config import AgentTiming
from racksmith.apiserver.server import ApiServer
from racksmith.emulator.disks import DiskStore
from racksmith.emulator.inventory import generate_host, root_disk
from racksmith.emulator.osboot import OSBoot
from tests.harness.api import MERGE
from tests.harness.wait import eventually

GROUP, VERSION, PLURAL = "storage.racksmith.io", "v1alpha1", "volumes"
RESULT = "storage.racksmith.io/job-result"
NODE = "node-x"
TIMING = AgentTiming(poll=0.2, heartbeat=1, backoff_base=0.2, backoff_cap=1)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def write_config(api_server: ApiServer, root: Path, namespace: str) -> Path:
    assert api_server.ca_pem is not None
    path = root / "etc/racksmith/agent.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "server": api_server.url,
        "certificateAuthorityData": base64.b64encode(api_server.ca_pem).decode(),
        "token": api_server.token, "namespace": namespace, "lcmMachine": "none",
        "nodeName": NODE}))
    return path


@contextlib.asynccontextmanager
async def agent(api_server: ApiServer, root: Path, namespace: str) -> AsyncIterator[None]:
    """``racksmith agent --emulated --root <root>`` for node X, in process."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_agent(write_config(api_server, root, namespace), root=root,
                                         emulated=True, stop=stop, timing=TIMING,
                                         handle_signals=False))
    try:
        yield
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0


async def create_volume(custom: CustomObjectsApi, name: str, node: str,
                        backend: dict[str, Any], mode: str = "Filesystem") -> str:
    obj = await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Volume", "metadata": {"name": name},
        "spec": {"nodeName": node, "storageClassName": "local", "mode": mode, **backend}})
    return str(obj["metadata"]["uid"])


async def start_job(custom: CustomObjectsApi, name: str, job: str) -> None:
    """What the controller does: the job id through the status subresource."""
    await custom.patch_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, name, {"status": {"job": job}}, **MERGE)


async def result_of(custom: CustomObjectsApi, name: str, job: str,
                    seconds: float = 15) -> dict[str, Any]:
    async def result() -> dict[str, Any] | None:
        obj = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        text = ((obj["metadata"].get("annotations") or {}).get(RESULT))
        if text and json.loads(text)["job"] == job:
            return dict(json.loads(text))
        return None
    found: dict[str, Any] = await eventually(result, f"a result for {job} on {name}",
                                             limit=seconds)
    return found


def blkid(path: Path) -> dict[str, str]:
    out = subprocess.run(["blkid", "-p", "-o", "export", str(path)], capture_output=True,
                         text=True, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


async def test_prepare_and_unprepare_a_sparse_volume(
        api_server: ApiServer, client: ApiClient, ns: str, tmp_path: Path) -> None:
    custom = CustomObjectsApi(client)
    await StorageV1Api(client).create_storage_class({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"fsType": "ext4",
                       "mkfsOptions": json.dumps(["-m", "0", "-E", "lazy_itable_init=1"])}})
    sparse = {"sparseLoopDevice": {"size": "32Mi"}}
    uid = await create_volume(custom, "mine", NODE, sparse)
    await create_volume(custom, "theirs", "node-y", sparse)
    await start_job(custom, "theirs", "prepare:0000aaaa")
    root = tmp_path / "root"
    volumes = root / "var/lib/racksmith/volumes"

    async with asyncio.timeout(40), agent(api_server, root, ns):
        await start_job(custom, "mine", "prepare:1234abcd")
        result = await result_of(custom, "mine", "prepare:1234abcd")
        assert result["ok"] is True, result
        assert (result["deviceName"], result["sizeBytes"]) == ("loop0", 32 * 2**20)
        file = volumes / f"{uid}.img"
        found = blkid(file)
        assert found["TYPE"] == "ext4" and result["uuid"] == found["UUID"]

        await start_job(custom, "mine", "unprepare:5678cdef")
        assert (await result_of(custom, "mine", "unprepare:5678cdef")) == {
            "job": "unprepare:5678cdef", "ok": True}
        assert not file.exists()

    theirs = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "theirs")
    assert RESULT not in (theirs["metadata"].get("annotations") or {})
    assert sorted(p.name for p in volumes.iterdir()) == ["loops.json"]
    assert json.loads((volumes / "loops.json").read_text()) == {}


async def test_raw_volume_on_a_disk_the_emulated_os_links(
        api_server: ApiServer, client: ApiClient, ns: str, tmp_path: Path) -> None:
    disks = DiskStore(tmp_path / "hosts")
    host = generate_host(3, seed=7)  # nvme0n1 (root), nvme1n1, sda
    boot = root_disk(host.inventory)
    fd = disks.open_for_write(host, boot)
    try:
        os.pwrite(fd, b"RACKSMITH-SAMPLE-OS-IMAGE\n", 0)
    finally:
        os.close(fd)
    osboot = OSBoot(disks, command=(sys.executable, "-c", "pass"), stop_timeout=2.0)
    try:
        osboot.want(host, True)
        await osboot.settle(host)
    finally:
        await osboot.stop_all()
    root = osboot.root(host)
    links = {p.name: Path(os.readlink(p)) for p in (root / "dev").iterdir()}
    assert links == {"nvme1n1": disks.disk_path(host, "nvme1n1").resolve(),
                     "sda": disks.disk_path(host, "sda").resolve()}
    sda = disks.disk_path(host, "sda")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1",
                    str(disks.disk_path(host, "nvme1n1"))], check=True)

    custom = CustomObjectsApi(client)
    await create_volume(custom, "raw-sda", NODE, {"rawBlockDevice": {"devicePath": "/dev/sda"}},
                        mode="Block")
    await create_volume(custom, "raw-nvme", NODE,
                        {"rawBlockDevice": {"devicePath": "/dev/nvme1n1"}}, mode="Block")
    async with asyncio.timeout(40), agent(api_server, root, ns):
        await start_job(custom, "raw-sda", "prepare:00000001")
        await start_job(custom, "raw-nvme", "prepare:00000002")
        ok = await result_of(custom, "raw-sda", "prepare:00000001")
        assert ok == {"job": "prepare:00000001", "ok": True, "deviceName": "sda",
                      "sizeBytes": sda.stat().st_size}
        refused = await result_of(custom, "raw-nvme", "prepare:00000002")
        assert (refused["ok"], refused["reason"]) == (False, "DeviceInUse")

        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1", str(sda)],
                       check=True)  # what a pod wrote on the block device
        await start_job(custom, "raw-sda", "unprepare:00000003")
        assert (await result_of(custom, "raw-sda", "unprepare:00000003"))["ok"] is True
        assert blkid(sda) == {}
    assert blkid(disks.disk_path(host, "nvme1n1"))["TYPE"] == "ext4"  # refused: untouched
