"""Backups against a real API server: taken while it writes (a consistent
snapshot at one resourceVersion), through the CLI (verify, refusals with
nothing changed), and as ControlPlaneBackup objects the backup controller
takes, prunes and deletes with their files."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.apiserver.server import ApiServer
from racksmith.apiserver.store.sqlite import inspect_file
from racksmith.backup.archive import create_backup, verify_backup
from racksmith.backup.service import ETCD_MESSAGE, EtcdStoreSnapshots, LocalSnapshotter
from racksmith.controllers.backup import BackupSchedule, backup_controller
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.events import EVENTS
from racksmith.runtime.resources import BACKUPS, CONFIG_MAPS
from tests.harness.controllers import managed
from tests.harness.process import ServerProc
from tests.harness.wait import eventually

ON_MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")


def racksmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=120)


@ON_MODULE_LOOP
async def test_a_backup_taken_while_the_server_writes_is_one_consistent_snapshot(
        api_server: ApiServer, client: ApiClient, ns: str, tmp_path: Path) -> None:
    c = as_client(client)
    stop = asyncio.Event()
    made: list[int] = []

    async def writer() -> None:
        i = 0
        while not stop.is_set():
            out = await c.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": f"w-{i}", "namespace": ns}})
            made.append(int(out["metadata"]["resourceVersion"]))
            i += 1

    task = asyncio.create_task(writer())
    await asyncio.sleep(0.3)
    info = await asyncio.to_thread(create_backup, api_server.data_dir, tmp_path / "b.tar")
    await asyncio.sleep(0.3)
    stop.set()
    await task
    rv = info.manifest.resource_version
    assert made and made[0] <= rv < made[-1]  # taken in the middle of the writes
    verified = await asyncio.to_thread(verify_backup, info.path)
    try:
        facts = inspect_file(verified.folder / "parts" / "store.db")
        assert facts.resource_version == rv and facts.integrity == ["ok"]
    finally:
        verified.close()


def test_the_cli_takes_verifies_and_refuses(server_process: ServerProc, tmp_path: Path) -> None:
    data = server_process.data_dir
    key = tmp_path / "backup.key"
    key.write_bytes(b"0123456789abcdef0123456789abcdef")
    out = tmp_path / "site.tar.enc"
    made = racksmith("backup", "create", "--data-dir", str(data), "--output", str(out),
                     "--key-file", str(key))
    assert made.returncode == 0, made.stderr
    assert f"backup: {out}" in made.stdout and "resourceVersion: " in made.stdout
    assert out.stat().st_mode & 0o777 == 0o600
    ok = racksmith("backup", "verify", str(out), "--key-file", str(key))
    assert ok.returncode == 0 and ok.stdout.startswith("ok: "), ok.stderr
    # a wrong or missing key, a flipped byte: refused, nothing changed
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"x" * 32)
    res = racksmith("backup", "verify", str(out), "--key-file", str(wrong))
    assert res.returncode == 1 and "cannot decrypt" in res.stderr
    res = racksmith("backup", "verify", str(out))
    assert res.returncode == 1 and "cannot decrypt" in res.stderr
    plain = tmp_path / "site.tar"
    assert racksmith("backup", "create", "--data-dir", str(data), "--output",
                     str(plain)).returncode == 0
    raw = bytearray(plain.read_bytes())
    raw[len(raw) // 3] ^= 0x40
    flipped = tmp_path / "flipped.tar"
    flipped.write_bytes(bytes(raw))
    res = racksmith("backup", "verify", str(flipped))
    assert res.returncode == 1 and "part " in res.stderr, res.stderr
    # a restore onto the running server is refused, its data dir untouched
    before = hashlib.sha256((data / "tokens.csv").read_bytes()).hexdigest()
    res = racksmith("restore", str(plain), "--data-dir", str(data))
    assert res.returncode == 1 and "a Racksmith server runs on" in res.stderr
    assert hashlib.sha256((data / "tokens.csv").read_bytes()).hexdigest() == before
    assert not list(data.parent.glob(f"{data.name}.pre-restore-*"))
    res = racksmith("backup", "create", "--data-dir", str(data), "--key-file",
                    str(tmp_path / "nope"))
    assert res.returncode == 1 and "cannot read the key file" in res.stderr


@ON_MODULE_LOOP
async def test_the_backup_controller_takes_prunes_and_deletes(
        api_server: ApiServer, client: ApiClient, tmp_path: Path) -> None:
    c = as_client(client)
    folder = tmp_path / "backups"
    snapshotter = LocalSnapshotter(api_server.data_dir, folder)
    controller = backup_controller(client, snapshotter,
                                   schedule=BackupSchedule(every=3600, keep=1))
    async with managed(client, [controller], identity="backup-test"):
        # the schedule asks for one at once (none exists yet)
        async def scheduled() -> list[dict[str, object]] | None:
            items = [b for b in await c.list(BACKUPS, live=True)
                     if (b.get("status") or {}).get("phase") == "Completed"]
            return items or None

        [first] = await eventually(scheduled, "the first scheduled backup")
        await c.create(BACKUPS, {"apiVersion": "lcm.racksmith.io/v1alpha1",
                                 "kind": "ControlPlaneBackup",
                                 "metadata": {"name": "by-hand"}, "spec": {}})

        done = await eventually(_in_phase(c, "by-hand", "Completed"),
                                "the backup asked for by hand")
        status = done["status"]
        assert isinstance(status, dict)
        path = Path(str(status["file"]))
        assert path.parent == folder and _exists(path)
        assert status["sha256"] == _sha256(path)
        assert status["verifiedAt"] and status["resourceVersion"]
        # deleting the object deletes its file (finalizer)
        await c.delete(BACKUPS, None, "by-hand")

        async def gone() -> bool:
            return await c.get(BACKUPS, None, "by-hand", live=True) is None

        await eventually(gone, "the by-hand backup deleted")
        assert not _exists(path)
        first_status = first["status"]
        assert isinstance(first_status, dict)
        assert _exists(Path(str(first_status["file"])))  # the newest scheduled one is kept
        await c.delete(BACKUPS, None, str(first["metadata"]["name"]))  # type: ignore[index]
        await eventually(lambda: _none_left(c), "every backup deleted")


@ON_MODULE_LOOP
async def test_on_etcd_a_backup_asked_for_fails_saying_how_to_back_up(
        client: ApiClient) -> None:
    """With the API server on etcd (``racksmith up --store etcd``) the
    controller runs with ``EtcdStoreSnapshots``: a ControlPlaneBackup ends
    Failed with the way to back etcd up, an Event says it, no file is named,
    and deleting it is not held up."""
    c = as_client(client)
    controller = backup_controller(client, EtcdStoreSnapshots())
    async with managed(client, [controller], identity="backup-etcd-test"):
        await c.create(BACKUPS, {"apiVersion": "lcm.racksmith.io/v1alpha1",
                                 "kind": "ControlPlaneBackup",
                                 "metadata": {"name": "on-etcd"}, "spec": {}})

        done = await eventually(_in_phase(c, "on-etcd", "Failed"), "the backup on etcd Failed")
        status = done["status"]
        assert isinstance(status, dict)
        assert status["message"] == ETCD_MESSAGE and "etcdctl snapshot save" in ETCD_MESSAGE
        assert "file" not in status and status["completedAt"]

        async def told() -> list[dict[str, object]] | None:
            found = [e for e in await c.list(EVENTS, "default", live=True)
                     if (e.get("involvedObject") or {}).get("name") == "on-etcd"
                     and e.get("reason") == "BackupFailed"]
            return found or None

        [event] = await eventually(told, "the BackupFailed Event")
        assert event["type"] == "Warning" and event["message"] == ETCD_MESSAGE
        await c.delete(BACKUPS, None, "on-etcd")
        await eventually(lambda: _none_left(c), "the backup on etcd deleted")


def _in_phase(c: Client, name: str, phase: str
              ) -> Callable[[], Awaitable[dict[str, object] | None]]:
    """A check for ``eventually``: the ControlPlaneBackup ``name`` once in ``phase``."""
    async def check() -> dict[str, object] | None:
        b = await c.get(BACKUPS, None, name, live=True)
        return b if b and (b.get("status") or {}).get("phase") == phase else None
    return check


def _exists(path: Path) -> bool:
    return path.exists()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _none_left(c: Client) -> bool:
    return not await c.list(BACKUPS, live=True)


@ON_MODULE_LOOP
async def test_a_backup_of_a_cluster_that_cannot_be_found_fails_saying_why(
        client: ApiClient, tmp_path: Path) -> None:
    """Bad input: a ControlPlaneBackup naming a missing cluster, or one with no
    control-plane machine, ends Failed with the reason; nothing is written."""
    c = as_client(client)
    folder = tmp_path / "backups"
    controller = backup_controller(client, EtcdStoreSnapshots(folder))
    async with managed(client, [controller], identity="backup-cluster-test"):
        await c.create(BACKUPS, {"apiVersion": "lcm.racksmith.io/v1alpha1",
                                 "kind": "ControlPlaneBackup", "metadata": {"name": "no-such"},
                                 "spec": {"cluster": {"namespace": "default", "name": "nope"}}})
        done = await eventually(_in_phase(c, "no-such", "Failed"), "the backup Failed")
        status = done["status"]
        assert isinstance(status, dict)
        assert status["message"] == "Cluster default/nope not found" and "file" not in status
        assert not folder.exists() or not any(folder.iterdir())
        await c.delete(BACKUPS, None, "no-such")
        await eventually(lambda: _none_left(c), "the backup deleted")
