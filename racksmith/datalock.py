"""Who runs on a data dir: an advisory lock held for a server's whole life.

Owns ``DATA/racksmith.lock``: :func:`hold` takes an exclusive ``flock`` on it
(non-blocking) and writes the holder's pid; the lock goes with the process
(kill -9 included — the kernel drops it; the descriptor is not inherited by
the children it starts, so an Ironic that outlives a crashed ``racksmith up``
holds nothing). :func:`holder` answers whether someone holds it, and who.
``racksmith up``/``apiserver`` hold it (a second server on the same data dir
is refused) and ``racksmith restore`` refuses to run while it is held.
A leaf module: files and the kernel only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_FILE = "racksmith.lock"


class DataDirBusy(RuntimeError):
    """Another process runs on this data dir (the message names its pid)."""


def hold(data_dir: Path) -> int:
    """Take the data dir's lock for this process; returns the descriptor
    (close it to let go). Raises :class:`DataDirBusy` when it is held."""
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pid = holder(data_dir)
        raise DataDirBusy(f"a Racksmith server runs on {data_dir}"
                          + (f" (pid {pid})" if pid else "")) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def holder(data_dir: Path) -> int | None:
    """The pid of the process holding the lock (0 when it cannot be read),
    or None when nobody holds it."""
    path = data_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            with contextlib.suppress(ValueError, OSError):
                return int(os.read(fd, 32).decode().strip() or 0)
            return 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
