"""Private files: the modes of everything under a racksmith data directory.

Owns the rule (docs/security.md, "Files and their modes"): the data dir
holds every Secret (``store.db``), the API tokens (``tokens.csv``,
``kubeconfig``), the CA key, BMC passwords (Ironic's ``ironic.sqlite``,
``emulated-hosts.yaml``, ``emulator/bmc-passwords.json``) and logs, so
**every directory in it is 0700 and every file 0600** (an executable keeps
its owner's x bit: 0700).

How:

* server processes (``racksmith up``, ``apiserver``, ``emulator``) set the
  umask to :data:`PRIVATE_UMASK` first thing (``racksmith.cli.main``), so
  whatever they or their children create (SQLite's ``-wal``/``-shm``, Ironic
  and ``ironic-dbsync``, sushy-tools) is private; the children are also
  started with that umask explicitly (``umask=`` of ``subprocess``), which
  covers callers that never went through the CLI (tests);
* :func:`private_dir` (``mkdir`` then ``chmod``: ``mkdir``'s mode is
  filtered by the umask and ignored for an existing directory) and
  :func:`open_private` / :func:`write_private` (created 0600, an existing
  file chmodded) for what racksmith writes itself;
* on start, :func:`tighten_tree` walks the data dir and strips group and
  other bits from every directory and file found with looser modes (a data
  dir made by an older version, or by hand), logging one warning per path
  (the path and the modes, never contents).

Exception: an emulated host's OS root (``emulator/hosts/<host>/root/``,
:func:`is_emulated_root`) reproduces a real host's file system — e.g.
``/etc/hostname`` 0644, a ``write_files`` entry with the mode it asks for —
because the host agent checks and sets those modes; its processes run with
a real host's umask 0022. Nothing in it is tightened. It is reachable by
nobody else all the same: its parents ``emulator/``, ``emulator/hosts/``
and ``emulator/hosts/<host>/`` are 0700 like every other directory.

Symbolic links are never followed (an emulated root links its disks).
Standard library only, so that every layer may use it.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "HOST_UMASK",
    "PRIVATE_UMASK",
    "is_emulated_root",
    "open_private",
    "private_dir",
    "private_file",
    "tighten_tree",
    "write_private",
]

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600
HOST_UMASK = 0o022
"""The umask of an emulated host's processes (a real host's default)."""
MAX_WARNINGS = 20
"""Paths named one by one when tightening; the rest are counted."""

log = logging.getLogger("racksmith.filemodes")


def _tighten(path: Path, *, warn: bool) -> bool:
    """Strip group/other bits of ``path`` (not following links). True if changed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return False
    mode = stat.S_IMODE(st.st_mode)
    # Directories 0700; files lose their group/other bits only (0644 → 0600,
    # an executable 0755 → 0700, a read-only 0444 → 0400).
    wanted = DIR_MODE if stat.S_ISDIR(st.st_mode) else mode & 0o700
    if mode == wanted:
        return False
    try:
        os.chmod(path, wanted)
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("cannot make %s private (mode %04o): %s", path, mode, exc.strerror)
        return False
    if warn:
        log.warning("%s was mode %04o (readable by others); set it to %04o", path, mode, wanted)
    return True


def private_dir(path: Path, *, warn: bool = True) -> Path:
    """``mkdir -p path`` then ``chmod 0700 path``; an existing looser
    directory is tightened with a warning naming it."""
    existed = path.is_dir()
    path.mkdir(parents=True, exist_ok=True)
    _tighten(path, warn=warn and existed)
    return path


def private_file(path: Path, *, create: bool = False, warn: bool = True) -> None:
    """Make an existing file 0600 (with a warning if it was looser);
    ``create``: create it empty, 0600, when missing."""
    if create:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        os.close(fd)
    _tighten(path, warn=warn)


def open_private(path: Path, mode: str = "ab") -> IO[Any]:
    """``open(path, mode)`` for writing (``w``/``a``, text or binary), the
    file created 0600 or tightened if it exists."""
    flags = os.O_WRONLY | os.O_CREAT
    flags |= os.O_APPEND if "a" in mode else os.O_TRUNC
    fd = os.open(path, flags, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` (created 0600, or truncated and tightened)."""
    with open_private(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def is_emulated_root(relative: tuple[str, ...]) -> bool:
    """Whether a path (its parts relative to the data dir) is an emulated
    host's OS root, ``emulator/hosts/<host>/root``."""
    return len(relative) == 4 and relative[:2] == ("emulator", "hosts") \
        and relative[3] == "root"


def tighten_tree(data_dir: Path,
                 skip: Callable[[tuple[str, ...]], bool] = is_emulated_root) -> int:
    """Make ``data_dir`` and everything below it private (see the module
    docstring), except the directories ``skip`` says (by their parts
    relative to ``data_dir``), which are left whole. Returns how many paths
    were changed; the first :data:`MAX_WARNINGS` are logged by name."""
    if not data_dir.is_dir():
        return 0
    changed = 0

    def fix(path: Path) -> None:
        nonlocal changed
        if _tighten(path, warn=changed < MAX_WARNINGS):
            changed += 1

    fix(data_dir)
    for top, dirs, files in os.walk(data_dir, followlinks=False):
        base = Path(top)
        rel = base.relative_to(data_dir).parts
        dirs[:] = [d for d in dirs if not skip((*rel, d))]
        for name in (*dirs, *files):
            fix(base / name)
    if changed > MAX_WARNINGS:
        log.warning("%d more paths under %s were readable by others; made them private",
                    changed - MAX_WARNINGS, data_dir)
    return changed
