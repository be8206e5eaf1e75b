"""What Linux's ``/proc`` says about a process: whether it is alive (a zombie
is not: it only waits for its parent to reap it) and its command line.

A process still inside ``execve`` shows an empty ``/proc/<pid>/cmdline``:
the parent's ``Popen`` has returned, the new image's arguments are not
mapped yet (seen under load: a restarted emulator booted a second agent
instead of adopting the first; the emulated kubelet missed the static pod it
had just started). Whoever checks a process it started itself asks
:func:`cmdline` with ``settle``: an empty command line of a live process is
read again for that long. Scans of every process (``racksmith down``) do
not: a kernel thread's command line is always empty.

A leaf every layer may use."""

from __future__ import annotations

import time
from pathlib import Path

SETTLE_SECONDS = 0.5
"""How long an empty command line of a live process is read again when a
caller asks to settle: far longer than an ``execve`` takes under load."""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (exists and is not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def read_cmdline(pid: int) -> bytes:
    """``/proc/<pid>/cmdline`` as it is now (NUL-separated); OSError if gone."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def cmdline(pid: int, *, settle: float = 0.0) -> bytes:
    """The NUL-separated command line of ``pid``, ``b""`` if it is gone; with
    ``settle``, an empty one of a live process is read again for that long."""
    deadline = time.monotonic() + settle
    while True:
        try:
            raw = read_cmdline(pid)
        except OSError:
            return b""
        if raw or time.monotonic() >= deadline or not alive(pid):
            return raw
        time.sleep(0.005)


def argv(pid: int, *, settle: float = 0.0) -> list[bytes]:
    """The arguments of ``pid`` (empty if it is gone)."""
    raw = cmdline(pid, settle=settle)
    return raw.rstrip(b"\0").split(b"\0") if raw else []


def cmdline_text(pid: int, *, settle: float = 0.0) -> str:
    """The command line of ``pid`` as one line (arguments joined by spaces)."""
    return cmdline(pid, settle=settle).replace(b"\0", b" ").decode("utf-8", "replace")
