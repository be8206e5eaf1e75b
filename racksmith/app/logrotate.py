"""Rotation of the logs other processes write into the data dir.

Owns which files are rotated (:data:`PATTERNS`, relative to the data dir:
Ironic, the virtual datacenter and sushy-tools, every emulated host's agent,
etcd members, API server replicas, ``racksmith up --detach``'s output) and
how: logrotate's ``copytruncate``. The writers hold their file open in append
mode and cannot be told to reopen it, so a file grown past ``max_bytes`` is
copied to ``NAME.1`` (``.1`` → ``.2`` …, the oldest of ``keep`` dropped) and
then truncated to zero; an O_APPEND writer goes on at the new end. A line
written between the copy and the truncation can be lost, nothing else.
Copies are 0600 like the logs. :func:`rotate_once` is the whole work (sync,
tested directly); :class:`LogRotator` runs it every ``interval`` seconds in
``racksmith up``. The audit log rotates itself (racksmith.apiserver.audit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from pathlib import Path

from racksmith import filemodes

log = logging.getLogger("racksmith.app.logrotate")

PATTERNS = ("logs/*.log", "ironic/ironic.log", "emulator/*.log",
            "emulator/hosts/*/root/var/log/*.log", "etcd/member-*.log")
MAX_BYTES = 10 * 1024 * 1024
KEEP = 3
INTERVAL = 30.0


def _rotate(path: Path, keep: int) -> None:
    for n in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
    first = path.with_name(f"{path.name}.1")
    tmp = path.with_name(f".{path.name}.rotating")
    filemodes.private_file(tmp, create=True)
    with path.open("rb") as src, tmp.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1024 * 1024)
    os.replace(tmp, first)
    # truncate in place: the writer's O_APPEND descriptor goes on at the new end
    with path.open("r+b") as f:
        f.truncate(0)


def rotate_once(data_dir: Path, *, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> list[Path]:
    """Rotate every log of ``data_dir`` larger than ``max_bytes``; the ones rotated."""
    done: list[Path] = []
    for pattern in PATTERNS:
        for path in sorted(data_dir.glob(pattern)):
            try:
                if not path.is_file() or path.stat().st_size <= max_bytes:
                    continue
                _rotate(path, max(1, keep))
            except OSError as exc:
                log.warning("cannot rotate %s: %s", path, exc.strerror or type(exc).__name__)
                continue
            done.append(path)
    return done


class LogRotator:
    """:func:`rotate_once` every ``interval`` seconds until stopped."""

    def __init__(self, data_dir: Path, *, interval: float = INTERVAL,
                 max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.data_dir = data_dir
        self.interval = interval
        self.max_bytes = max_bytes
        self.keep = keep
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(),
                                                            name="racksmith-logrotate")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            rotated = await asyncio.to_thread(rotate_once, self.data_dir,
                                              max_bytes=self.max_bytes, keep=self.keep)
            for path in rotated:
                log.info("rotated %s", path)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
