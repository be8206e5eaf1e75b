"""``make up`` as a person runs it: on a terminal (a pty) the live
display — steps, elapsed time, hosts and machines in counts, a progress bar
per cluster — and no raw log line, until the demo cluster is Ready; piped,
the same command prints plain lines (test_cluster checks that on the demo
rack, which runs it piped). ``ARGS`` passes options through make (here: fake
BMCs, short waits, a data dir and free ports of the test's own)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.rack import TIMINGS, reap
from tests.harness.process import ROOT

pytestmark = [pytest.mark.timeout(600)]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
RAW_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \[(debug|info|warning|error)",
                          re.M)
READY = "6/6 machines Ready"


def make_args(data: Path) -> str:
    return (f"ARGS=--data-dir {data} --port 0 --ironic-port 0 --hardware fake "
            f"--timings {TIMINGS}")


def stop(pid: int, fd: int, data: Path) -> None:
    """SIGTERM to make's process group, then wait for make to exit. The pty is
    drained meanwhile: what ``racksmith up`` prints while it shuts down must
    not fill the terminal's buffer (a writer blocked on it never exits)."""
    with_group = True
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        with_group = False
    deadline = time.monotonic() + 60
    while with_group and time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            break
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:  # the terminal closed: make is exiting
                time.sleep(0.2)
    reap(data)


def test_make_up_on_a_terminal_shows_the_live_display(tmp_path: Path) -> None:
    data = tmp_path / "site"
    pid, fd = pty.fork()
    if pid == 0:  # the child: make up on the pty
        os.chdir(ROOT)
        os.execvpe("make", ["make", "--no-print-directory", "up", make_args(data)],
                   {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    chunks: list[bytes] = []
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                if READY in ANSI.sub("", b"".join(chunks[-50:]).decode(errors="replace")):
                    break
    finally:
        stop(pid, fd, data)
        os.close(fd)
    screen = ANSI.sub("", b"".join(chunks).decode(errors="replace"))
    assert READY in screen, screen[-3000:]
    for expected in ("racksmith up", "hosts", "machines", "cluster default/demo",
                     "logs: ", "racksmith.log"):
        assert expected in screen, (expected, screen[-3000:])
    raw = RAW_LOG_LINE.findall(screen)
    assert raw == [], screen[-3000:]
    log_file = data / "logs" / "racksmith.log"
    assert log_file.stat().st_mode & 0o777 == 0o600
    assert RAW_LOG_LINE.search(log_file.read_text()), "the log lines went to the file"
