"""What /proc says about a process (``racksmith.procfs``): a zombie is not
alive, a process still inside execve is read again, a gone one is empty."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from racksmith import procfs


def test_a_started_process_shows_its_arguments_at_once_with_settle() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--marker"])
    try:
        assert procfs.alive(proc.pid)
        assert procfs.argv(proc.pid, settle=procfs.SETTLE_SECONDS)[-1] == b"--marker"
        assert procfs.cmdline_text(proc.pid).endswith("--marker ")
    finally:
        proc.kill()
        proc.wait()
    assert not procfs.alive(proc.pid)
    assert procfs.cmdline(proc.pid, settle=procfs.SETTLE_SECONDS) == b""
    assert procfs.argv(proc.pid) == []


def test_a_zombie_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30  # a bound, not an expectation
        while time.monotonic() < deadline:  # exited, not reaped: a zombie
            with open(f"/proc/{proc.pid}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    break
            time.sleep(0.01)
        else:
            pytest.fail("the child never exited")
        assert not procfs.alive(proc.pid)
    finally:
        proc.wait()


def test_an_empty_cmdline_of_a_live_process_is_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads = iter([b"", b"", b"etcd\0--data-dir\0/x\0"])
    monkeypatch.setattr(procfs, "read_cmdline", lambda _pid: next(reads))
    monkeypatch.setattr(procfs, "alive", lambda _pid: True)
    assert procfs.argv(12345, settle=procfs.SETTLE_SECONDS) == [b"etcd", b"--data-dir", b"/x"]


def test_without_settle_an_empty_cmdline_is_returned_as_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procfs, "read_cmdline", lambda _pid: b"")
    monkeypatch.setattr(procfs, "alive", lambda _pid: True)
    assert procfs.cmdline(2) == b""  # a kernel thread's is always empty
