"""The ``sparseLoopDevice`` backend: a sparse file attached as a loop device.

Owns ``/var/lib/racksmith/volumes/<volume uid>.img`` (under the root):

- prepare: unless the file exists, create ``<file>.tmp`` truncated to the
  size, format it in Filesystem mode (``mkfs.<fsType> <mkfsOptions>``), then
  rename it into place — a crash leaves only a ``.tmp``. Then attach it
  (``loops``) and read back the size (the file's) and the UUID (``blkid``).
- unprepare: detach, remove the file (and a stray ``.tmp``).
- recover (agent start): remove stale ``.tmp`` files and the atomic-write
  leftovers of the state files, re-attach every volume file.

A re-run after a crash at any point finishes the same work: an existing
file is never formatted again, an attached file is not attached twice.
Called by ``tasks``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from racksmith.agent.storage.context import (
    RECORDS_DIR,
    VOLUMES_DIR,
    StorageContext,
    VolumeRequest,
)
from racksmith.agent.storage.devices import device_size
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.kinds.volumejobs import FailureReason, Prepared
from racksmith.planners.quantity import to_bytes

__all__ = ["prepare_sparse", "recover_sparse", "sparse_path", "unprepare_sparse"]

TMP_SUFFIX = ".tmp"


def sparse_path(uid: str) -> str:
    """The host path of the volume's backing file."""
    return f"{VOLUMES_DIR}/{uid}.img"


async def prepare_sparse(ctx: StorageContext, req: VolumeRequest) -> Prepared:
    """Create, format and attach the volume's file (see the module docstring)."""
    backend = req.spec.sparse_loop_device
    assert backend is not None
    try:
        size = to_bytes(backend.size)
    except ValueError as exc:
        raise TaskFailed(FailureReason.INVALID_VOLUME, str(exc)) from None
    if size <= 0:
        raise TaskFailed(FailureReason.INVALID_VOLUME, f"size {backend.size!r} must be positive")
    path = sparse_path(req.uid)
    final = ctx.host.resolve(path)
    if not final.exists():
        tmp = final.with_name(final.name + TMP_SUFFIX)
        tmp.unlink(missing_ok=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as fh:
            fh.truncate(size)
        if req.formats:
            await ctx.tools.mkfs(req.fs_type, req.mkfs_options, tmp)
        _fsync(tmp)
        os.replace(tmp, final)
        _fsync(final.parent)
    device = await ctx.loops.attach(path)
    uuid = await ctx.tools.uuid(final) if req.formats else None
    return Prepared(device, device_size(final), uuid)


async def unprepare_sparse(ctx: StorageContext, req: VolumeRequest) -> None:
    """Detach and remove the volume's file; a file already gone is success."""
    path = sparse_path(req.uid)
    final = ctx.host.resolve(path)
    await ctx.loops.detach(path)
    final.with_name(final.name + TMP_SUFFIX).unlink(missing_ok=True)
    final.unlink(missing_ok=True)


async def recover_sparse(ctx: StorageContext) -> list[str]:
    """At agent start: drop leftovers, re-attach every volume file; returns their paths."""
    directory = ctx.host.resolve(VOLUMES_DIR)
    records = ctx.host.resolve(RECORDS_DIR)
    for folder in (directory, records):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            # ``.tmp`` of an interrupted create; ``.<name>.XXXX`` of an
            # interrupted atomic write of loops.json or a record.
            if entry.is_file() and (entry.name.endswith(TMP_SUFFIX)
                                    or entry.name.startswith(".")):
                entry.unlink(missing_ok=True)
    paths = sorted(
        f"{VOLUMES_DIR}/{entry.name}" for entry in
        (directory.iterdir() if directory.is_dir() else [])
        if entry.is_file() and entry.name.endswith(".img")
    )
    await ctx.loops.recover(paths)
    return paths


def _fsync(path: Path) -> None:
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0)
    with contextlib.suppress(OSError):
        fd = os.open(path, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
