"""Log rotation of the data dir (racksmith.app.logrotate): copy-truncate, the
writer goes on at the new end, copies shift and the oldest goes, 0600."""

from __future__ import annotations

import os
from pathlib import Path

from racksmith.app.logrotate import rotate_once


def test_a_grown_log_is_copied_and_truncated_under_its_writer(tmp_path: Path) -> None:
    log = tmp_path / "ironic" / "ironic.log"
    log.parent.mkdir()
    small = tmp_path / "emulator" / "emulator.log"
    small.parent.mkdir()
    small.write_bytes(b"short\n")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for generation in range(4):
            os.write(fd, f"generation {generation}\n".encode() * 100)
            assert rotate_once(tmp_path, max_bytes=1000, keep=3) == [log]
            assert log.stat().st_size == 0
        os.write(fd, b"after\n")  # the open descriptor writes at the new end
    finally:
        os.close(fd)
    assert log.read_bytes() == b"after\n"
    assert (tmp_path / "ironic" / "ironic.log.1").read_bytes().startswith(b"generation 3")
    assert (tmp_path / "ironic" / "ironic.log.3").read_bytes().startswith(b"generation 1")
    assert not (tmp_path / "ironic" / "ironic.log.4").exists()
    for copy in (tmp_path / "ironic").glob("ironic.log.*"):
        assert copy.stat().st_mode & 0o777 == 0o600
    assert small.read_bytes() == b"short\n"  # under the limit: left alone
    assert rotate_once(tmp_path, max_bytes=1000) == []


def test_agents_and_etcd_logs_are_covered(tmp_path: Path) -> None:
    paths = [tmp_path / "emulator" / "hosts" / "host-001" / "root" / "var" / "log" /
             "racksmith-agent.log", tmp_path / "etcd" / "member-0.log",
             tmp_path / "logs" / "apiserver-r1.log", tmp_path / "logs" / "racksmith-up.log"]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 2000)
    assert sorted(rotate_once(tmp_path, max_bytes=1000)) == sorted(paths)
