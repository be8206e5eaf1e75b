"""File-mode checks of a data dir (docs/security.md, "Files and their modes").

Owns :func:`loose_modes`: every directory under a data dir must be 0700 and
every file have no group/other bits, except inside emulated host roots
(``emulator/hosts/<host>/root``, which reproduce a real host's modes behind
0700 parents) and the folders a test names (a kubectl ``HOME`` the test
put there).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path


def loose_modes(data_dir: Path, ignore: Iterable[str] = ()) -> list[str]:
    """``path mode`` of everything under ``data_dir`` looser than the rule."""
    skip = set(ignore)
    bad: list[str] = []
    for top, dirs, files in os.walk(data_dir):
        rel = Path(top).relative_to(data_dir).parts
        dirs[:] = [d for d in dirs
                   if not (len(rel) == 3 and rel[:2] == ("emulator", "hosts") and d == "root")
                   and not (not rel and d in skip)]
        for name in (*dirs, *files):
            path = Path(top) / name
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if (stat.S_ISDIR(st.st_mode) and mode != 0o700) or mode & 0o077:
                bad.append(f"{path} {mode:04o}")
    top_mode = stat.S_IMODE(data_dir.stat().st_mode)
    if top_mode != 0o700:
        bad.append(f"{data_dir} {top_mode:04o}")
    return bad
