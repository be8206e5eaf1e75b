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
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

from racksmith.backup.archive import BackupError, create_backup, verify_backup
from racksmith.backup.crypto import CannotDecrypt
from racksmith.controllers.backup import Snapshot, SnapshotFailed

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

    async def remove(self, file: str) -> None:
        path = Path(file)
        if path.parent.resolve() != self.backup_dir.resolve() or \
                not path.name.startswith(PREFIX):
            return  # not one of ours: left alone
        await asyncio.to_thread(path.unlink, True)


ETCD_MESSAGE = ("this API server keeps its objects in etcd, which a ControlPlaneBackup "
                "cannot copy: back the etcd cluster up with `etcdctl snapshot save` "
                "(docs/ha.md)")


class EtcdStoreSnapshots:
    """The backup controller's snapshotter when the API server's store is
    etcd: every backup asked for fails at once with :data:`ETCD_MESSAGE`,
    so a ControlPlaneBackup created there says why (phase Failed, Event
    BackupFailed) instead of staying Pending. It never writes a file, so
    there is nothing to remove."""

    async def take(self, name: str) -> Snapshot:
        raise SnapshotFailed(ETCD_MESSAGE)

    async def remove(self, file: str) -> None:
        return None
