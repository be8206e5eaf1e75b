"""``racksmith up --detach`` and ``racksmith down``: the site in the background.

Owns starting ``racksmith up`` as a background process of its own and
stopping everything a data dir runs.

``detach``: the same ``racksmith up`` command line without ``--detach``, in a
new session (a closed terminal does not stop it), its output appended to
``DATA/logs/racksmith-up.log`` (0600); returns once it printed its
``readyz:`` line (the API server answers and, with controllers, they run),
or fails with the tail of that log when the process exits first or the
timeout passes (the process is then stopped: nothing is left half-started).
Its pid is the holder of the data dir's lock (racksmith.datalock).

``down``: SIGTERM to the holder of the data dir's lock (``racksmith up`` or
``racksmith apiserver``), which stops what it started in order; SIGKILL to
its process group after ``timeout``. Then, for what a killed ``up`` may have
left: the pid files of Ironic, the virtual datacenter, API server replicas
and etcd members, and any Racksmith, Ironic, etcd or sushy process whose command line names
the data dir (host agents) — each checked to be alive and to name the data dir before it
is signalled, so a reused pid is never hit. Returns a line per process it
stopped; nothing running is not an error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from racksmith import datalock, filemodes, procfs

LOG_NAME = "racksmith-up.log"
READY_MARK = "readyz: "
OURS = ("racksmith", "ironic", "etcd", "sushy", "haproxy")
"""What a process started for a data dir has in its command line."""
PID_FILES = ("ironic/ironic.pid", "emulator/emulator.pid", "replicas/r*.pid",
             "etcd/member-*.pid")


class DetachError(RuntimeError):
    """The background ``racksmith up`` did not come up (the message says why)."""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def detach(args: list[str], data_dir: Path, timeout: float) -> tuple[int, Path, str]:
    """Start ``racksmith up ARGS`` in the background; (pid, log, readyz URL)."""
    filemodes.private_dir(data_dir)
    logs = filemodes.private_dir(data_dir / "logs")
    log_path = logs / LOG_NAME
    filemodes.private_file(log_path, create=True)
    start = log_path.stat().st_size
    busy = datalock.holder(data_dir)
    if busy is not None:
        raise DetachError(f"a Racksmith server runs on {data_dir}"
                          + (f" (pid {busy})" if busy else "") + "; racksmith down stops it")
    with log_path.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "racksmith.cli.main", "up", *args],
                                stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + timeout
    while True:
        with log_path.open("rb") as f:
            f.seek(start)
            fresh = f.read().decode(errors="replace")
        for line in fresh.splitlines():
            if line.startswith(READY_MARK):
                return proc.pid, log_path, line[len(READY_MARK):].strip()
        code = proc.poll()
        if code is not None:
            raise DetachError(f"racksmith up exited with {code}:\n{_tail(log_path)}")
        if time.monotonic() >= deadline:
            _stop_group(proc.pid, 30.0)
            raise DetachError(f"racksmith up was not ready in {timeout:.0f}s (stopped it); "
                              f"last lines of {log_path}:\n{_tail(log_path)}")
        time.sleep(0.2)


@dataclass(frozen=True)
class Stopped:
    pid: int
    what: str
    how: str

    def line(self) -> str:
        return f"stopped {self.what} (pid {self.pid}, {self.how})"


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not procfs.alive(pid):
            return True
        time.sleep(0.05)
    return not procfs.alive(pid)


def _stop_group(pid: int, timeout: float) -> str:
    """SIGTERM ``pid``; SIGKILL its process group when it outlives ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout):
        return "SIGTERM"
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 5.0)
    return "SIGKILL after SIGTERM"


def _describe(cmdline: str) -> str:
    words = cmdline.split()
    for marker, what in (("ironic", "Ironic"), ("etcd", "an etcd member"),
                         ("apiserver", "an API server replica"), ("emulator", "the virtual "
                         "datacenter"), ("agent", "a host agent"),
                         ("haproxy", "a cluster endpoint's HAProxy")):
        if any(marker in w for w in words[:4]):
            return what
    return words[0] if words else "a process"


def down(data_dir: Path, timeout: float = 60.0) -> list[Stopped]:
    """Stop everything running on ``data_dir`` (see the module docstring)."""
    data_dir = data_dir.resolve()
    stopped: list[Stopped] = []
    owner = datalock.holder(data_dir)
    if owner:
        how = _stop_group(owner, timeout)
        stopped.append(Stopped(owner, "racksmith (the holder of the data dir's lock)", how))
    needle = str(data_dir)
    candidates: list[int] = []
    for pattern in PID_FILES:
        for pid_file in sorted(data_dir.glob(pattern)):
            with contextlib.suppress(ValueError, OSError):
                candidates.append(int(pid_file.read_text().strip()))
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != me and int(entry.name) not in candidates:
            candidates.append(int(entry.name))
    for pid in candidates:
        if pid == me or pid == owner:
            continue
        cmdline = procfs.cmdline_text(pid)
        # ours only: a shell or an editor with the data dir's path is left alone
        if needle not in cmdline or not any(m in cmdline for m in OURS) or not procfs.alive(pid):
            continue
        stopped.append(Stopped(pid, _describe(cmdline), _stop_group(pid, 10.0)))
    return stopped
