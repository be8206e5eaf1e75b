"""The backups ``racksmith up`` takes: files of one backup folder.

Owns :class:`LocalSnapshotter`, the backup controller's
``Snapshotter`` (``racksmith.controllers.backup``): backup ``NAME`` is the
file ``BACKUP_DIR/racksmith-NAME.tar`` (``.tar.enc`` with a key file),
written by :func:`racksmith.backup.archive.create_backup` from the data dir
in a worker thread, then verified (checksums, decryption, the store's
integrity check) before it is reported. A file already there under that name
(the controller restarted after writing it) is verified and kept, not taken
again; one that fails verification is set aside as ``...bad-<time>``. The
folder defaults to ``DATA/backups`` (``--backup-dir``: better on another
disk). Removal only ever deletes files of that folder named like backups.

Also owns :class:`EtcdStoreSnapshots`, the snapshotter when the API server
runs on etcd: ControlPlaneBackups copy the SQLite store only, so there each
one fails at once with a message pointing at ``etcdctl snapshot save``.

Both take a managed cluster's own store (:func:`snapshot_cluster`, a
ControlPlaneBackup with ``spec.cluster``): ``etcdctl snapshot save`` from
the first of its members that answers, with the client certificate the
controller issued (written to a private folder for the call, removed after),
checked with ``etcdctl snapshot status`` (its revision and key count are
the backup's resourceVersion and objects), then encrypted with the key file
when there is one. File: ``BACKUP_DIR/racksmith-NAME.etcd.db`` (``.enc``).
A file already there under that name is checked and kept, not taken again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from racksmith.backup.archive import BackupError, create_backup, sha256_of, verify_backup
from racksmith.backup.crypto import CannotDecrypt, decrypt_file, encrypt_file
from racksmith.snapshots import ClusterStore, Snapshot, SnapshotFailed

ETCDCTL = "/usr/bin/etcdctl"

PREFIX = "racksmith-"


class LocalSnapshotter:
    """See the module docstring."""

    def __init__(self, data_dir: Path, backup_dir: Path, key: bytes | None = None) -> None:
        self.data_dir = data_dir
        self.backup_dir = backup_dir
        self.key = key

    def path_of(self, name: str) -> Path:
        return self.backup_dir / f"{PREFIX}{name}.tar{'.enc' if self.key else ''}"

    async def take(self, name: str) -> Snapshot:
        return await asyncio.to_thread(self._take, name)

    def _take(self, name: str) -> Snapshot:
        path = self.path_of(name)
        try:
            if not path.exists():
                create_backup(self.data_dir, path, key=self.key)
            verified = verify_backup(path, key=self.key, scratch=self.backup_dir)
        except (BackupError, CannotDecrypt) as exc:
            if path.exists():
                stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
                path.rename(path.with_name(f"{path.name}.bad-{stamp}"))
            raise SnapshotFailed(str(exc)) from None
        except OSError as exc:
            raise SnapshotFailed(f"cannot write {path}: {exc.strerror or exc}") from None
        verified.close()
        info, m = verified.info, verified.info.manifest
        return Snapshot(file=str(path), size=info.size, sha256=info.sha256,
                        resource_version=m.resource_version, objects=m.objects,
                        encrypted=m.encrypted, verified_at=dt.datetime.now(dt.UTC))

    async def take_cluster(self, name: str, store: ClusterStore) -> Snapshot:
        return await asyncio.to_thread(snapshot_cluster, self.backup_dir, name, store, self.key)

    async def remove(self, file: str) -> None:
        path = Path(file)
        if path.parent.resolve() != self.backup_dir.resolve() or \
                not path.name.startswith(PREFIX):
            return  # not one of ours: left alone
        await asyncio.to_thread(path.unlink, True)


def _etcdctl(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([ETCDCTL, *args], capture_output=True, text=True,
                              timeout=timeout, env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SnapshotFailed(f"etcdctl {args[0] if args else ''}: {exc}") from None


def _status(db: Path) -> dict[str, Any]:
    res = _etcdctl(["snapshot", "status", str(db), "-w", "json"])
    if res.returncode != 0:
        raise SnapshotFailed(f"the snapshot does not check out: {res.stderr.strip()[-300:]}")
    try:
        status: dict[str, Any] = json.loads(res.stdout)
    except ValueError:
        raise SnapshotFailed("etcdctl snapshot status: unreadable answer") from None
    return status


def snapshot_cluster(backup_dir: Path, name: str, store: ClusterStore,
                     key: bytes | None = None) -> Snapshot:
    """Write and check backup ``name`` of a cluster's etcd (module docstring)."""
    backup_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = backup_dir / f"{PREFIX}{name}.etcd.db{'.enc' if key else ''}"
    work = Path(tempfile.mkdtemp(prefix=".cluster-snapshot-", dir=backup_dir))
    try:
        db = work / "snapshot.db"
        if path.exists():  # taken before a restart: check it and keep it
            if key:
                with db.open("wb") as out:
                    decrypt_file(path, out, key)
            else:
                shutil.copyfile(path, db)
        else:
            files = {"ca.crt": store.ca_pem, "client.crt": store.cert_pem,
                     "client.key": store.key_pem}
            for file, data in files.items():
                fd = os.open(work / file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            tls = [f"--cacert={work / 'ca.crt'}", f"--cert={work / 'client.crt'}",
                   f"--key={work / 'client.key'}", "--dial-timeout=5s"]
            errors = []
            for endpoint in store.endpoints:
                # a dead member is told in seconds; the snapshot itself may take long
                health = _etcdctl([f"--endpoints={endpoint}", *tls, "--command-timeout=5s",
                                   "endpoint", "health"], timeout=30)
                if health.returncode == 0:
                    res = _etcdctl([f"--endpoints={endpoint}", *tls, "--command-timeout=600s",
                                    "snapshot", "save", str(db)], timeout=660)
                else:
                    res = health
                if res.returncode == 0:
                    break
                last = (res.stderr.strip().splitlines() or ["no answer"])[-1]
                errors.append(f"{endpoint}: {last[:200]}")
                db.unlink(missing_ok=True)
            else:
                raise SnapshotFailed(f"no etcd member of cluster {store.cluster} gave a "
                                     f"snapshot: {'; '.join(errors)}"[:900])
        status = _status(db)
        if not path.exists():
            tmp = work / "final"
            if key:
                with tmp.open("wb") as out:
                    encrypt_file(db, out, key)
            else:
                db.rename(tmp)
            tmp.chmod(0o600)
            tmp.rename(path)
    except CannotDecrypt as exc:
        raise SnapshotFailed(f"{path.name}: {exc}") from None
    except OSError as exc:
        raise SnapshotFailed(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Snapshot(file=str(path), size=path.stat().st_size, sha256=sha256_of(path),
                    resource_version=int(status.get("revision") or 0),
                    objects=int(status.get("totalKey") or 0), encrypted=key is not None,
                    verified_at=dt.datetime.now(dt.UTC))


ETCD_MESSAGE = ("this API server keeps its objects in etcd, which a ControlPlaneBackup "
                "cannot copy: back the etcd cluster up with `etcdctl snapshot save` "
                "(docs/ha.md)")


class EtcdStoreSnapshots:
    """The backup controller's snapshotter when the API server's store is
    etcd: every backup of the management plane asked for fails at once with
    :data:`ETCD_MESSAGE`, so a ControlPlaneBackup created there says why
    (phase Failed, Event BackupFailed) instead of staying Pending. A backup
    of a managed cluster's store is written to ``backup_dir`` (None: those
    fail too, saying there is no backup folder)."""

    def __init__(self, backup_dir: Path | None = None, key: bytes | None = None) -> None:
        self.backup_dir = backup_dir
        self.key = key

    async def take(self, name: str) -> Snapshot:
        raise SnapshotFailed(ETCD_MESSAGE)

    async def take_cluster(self, name: str, store: ClusterStore) -> Snapshot:
        if self.backup_dir is None:
            raise SnapshotFailed("this process has no backup folder for cluster snapshots")
        return await asyncio.to_thread(snapshot_cluster, self.backup_dir, name, store, self.key)

    async def remove(self, file: str) -> None:
        path = Path(file)
        if self.backup_dir is None or path.parent.resolve() != self.backup_dir.resolve() \
                or not path.name.startswith(PREFIX):
            return
        await asyncio.to_thread(path.unlink, True)
