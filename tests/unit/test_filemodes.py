"""racksmith.filemodes: private data dirs, emulated host roots left as a host has them."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from racksmith.filemodes import (
    open_private,
    private_dir,
    private_file,
    tighten_tree,
    write_private,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> object:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_private_dir_chmods_after_mkdir(tmp_path: Path, loose_umask: object,
                                        caplog: pytest.LogCaptureFixture) -> None:
    new = private_dir(tmp_path / "a" / "data")
    assert mode(new) == 0o700
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    with caplog.at_level(logging.WARNING, "racksmith.filemodes"):
        private_dir(old)
    assert mode(old) == 0o700
    assert str(old) in caplog.text and "0755" in caplog.text


def test_private_files(tmp_path: Path, loose_umask: object) -> None:
    write_private(tmp_path / "w", "x")
    assert mode(tmp_path / "w") == 0o600
    existing = tmp_path / "e"
    existing.write_text("old")
    existing.chmod(0o644)
    with open_private(existing, "ab") as f:
        f.write(b"more")
    assert mode(existing) == 0o600 and existing.read_text() == "oldmore"
    private_file(tmp_path / "db", create=True)
    assert mode(tmp_path / "db") == 0o600
    private_file(tmp_path / "missing")  # no error, nothing created
    assert not (tmp_path / "missing").exists()


def test_tighten_tree_skips_emulated_roots(tmp_path: Path, loose_umask: object,
                                           caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    root = data / "emulator" / "hosts" / "h1" / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text("h1\n")
    (root / "etc" / "hostname").chmod(0o644)
    (data / "ironic").mkdir()
    (data / "store.db").write_text("")
    (data / "store.db").chmod(0o644)
    (data / "ironic" / "run.sh").write_text("")
    (data / "ironic" / "run.sh").chmod(0o755)
    (data / "emulator" / "hosts" / "h1" / "disks").mkdir()
    (data / "emulator" / "hosts" / "h1" / "disks" / "sda.img").write_text("")
    (data / "link").symlink_to("/etc/passwd")
    before = mode(Path("/etc/passwd"))
    with caplog.at_level(logging.WARNING, "racksmith.filemodes"):
        changed = tighten_tree(data)
    assert changed >= 7
    assert mode(data) == mode(data / "ironic") == mode(data / "emulator") == 0o700
    assert mode(data / "emulator" / "hosts") == mode(data / "emulator" / "hosts" / "h1") == 0o700
    assert mode(data / "store.db") == 0o600
    assert mode(data / "ironic" / "run.sh") == 0o700
    assert mode(data / "emulator" / "hosts" / "h1" / "disks" / "sda.img") == 0o600
    # A host's root keeps a host's modes (its parents are private).
    assert mode(root) == 0o755 and mode(root / "etc" / "hostname") == 0o644
    assert mode(Path("/etc/passwd")) == before  # links are not followed
    assert str(data / "store.db") in caplog.text
    assert tighten_tree(data) == 0
