"""Loop devices for sparse-file volumes: real (``losetup``) or emulated.

Owns attaching a volume's backing file to a loop device, detaching it and
re-attaching every file at agent start (the "loop device missing after
reboot" bug of the field). Two implementations of :class:`LoopDevices`:

- :class:`RealLoops` runs ``losetup -l -n -O NAME -j <file>`` to find an
  attachment, ``losetup --find --show <file>`` to attach and
  ``losetup -d /dev/loopN`` to detach.
- :class:`EmulatedLoops` starts no process: a stable name ``loopN`` per
  file is recorded in ``/var/lib/racksmith/volumes/loops.json`` under the
  root (the lowest number not in use). The record *is* the attachment, so it
  survives an agent restart as a real one survives nothing but is re-made.

Paths are host paths (``/var/lib/...``), resolved under the host's root.
Every method may be called repeatedly. Called by ``sparse``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from racksmith.agent.host import Host, HostError, Runner, render_argv
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.kinds.volumejobs import FailureReason

__all__ = ["LOOPS_FILE", "EmulatedLoops", "LoopDevices", "RealLoops"]

LOOPS_FILE = "/var/lib/racksmith/volumes/loops.json"


class LoopDevices(ABC):
    """Loop attachments of backing files (see the module docstring)."""

    @abstractmethod
    async def attach(self, path: str) -> str:
        """The loop device name (``loop3``) backed by ``path``, attaching it if needed."""

    @abstractmethod
    async def detach(self, path: str) -> None:
        """Detach every loop device backed by ``path`` (none: nothing to do)."""

    @abstractmethod
    async def recover(self, paths: Iterable[str]) -> None:
        """At agent start: make sure each of ``paths`` (existing backing files)
        is attached; forget attachments of files that are gone."""


class RealLoops(LoopDevices):
    """``losetup`` on the real machine."""

    def __init__(self, host: Host, runner: Runner) -> None:
        self.host = host
        self.runner = runner

    async def _run(self, argv: Sequence[str]) -> str:
        try:
            result = await self.runner(argv, None)
        except HostError as exc:
            raise TaskFailed(FailureReason.COMMAND_FAILED, str(exc)) from None
        if result.returncode != 0:
            raise TaskFailed(FailureReason.COMMAND_FAILED,
                             f"{render_argv(argv)}: {result.describe()}")
        return result.stdout

    async def attached(self, path: str) -> list[str]:
        """The loop devices (``/dev/loopN``) backed by ``path``."""
        out = await self._run(["losetup", "-l", "-n", "-O", "NAME", "-j",
                               str(self.host.resolve(path))])
        return [line.strip() for line in out.splitlines() if line.strip()]

    async def attach(self, path: str) -> str:
        devices = await self.attached(path)
        if not devices:
            out = await self._run(["losetup", "--find", "--show",
                                   str(self.host.resolve(path))])
            devices = [out.strip()]
        return PurePosixPath(devices[0]).name

    async def detach(self, path: str) -> None:
        if not self.host.resolve(path).exists():
            return  # a loop device keeps a deleted file alive; we never delete first
        for device in await self.attached(path):
            await self._run(["losetup", "-d", device])

    async def recover(self, paths: Iterable[str]) -> None:
        for path in paths:
            await self.attach(path)


class EmulatedLoops(LoopDevices):
    """Stable emulated loop names recorded under the root; no process."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def _load(self) -> dict[str, str]:
        raw = self.host.read_file(LOOPS_FILE)
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise TaskFailed(FailureReason.HOST_ERROR,
                             f"{LOOPS_FILE} is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise TaskFailed(FailureReason.HOST_ERROR, f"{LOOPS_FILE} must hold an object")
        return {str(k): str(v) for k, v in data.items()}

    def _save(self, records: dict[str, str]) -> None:
        text = json.dumps(records, indent=2, sort_keys=True) + "\n"
        self.host.write_file(LOOPS_FILE, text.encode(), 0o644)

    def records(self) -> dict[str, str]:
        """Backing file → loop name, as recorded."""
        return self._load()

    async def attach(self, path: str) -> str:
        records = self._load()
        if path in records:
            return records[path]
        used = set(records.values())
        number = next(n for n in range(len(used) + 1) if f"loop{n}" not in used)
        records[path] = f"loop{number}"
        self._save(records)
        return records[path]

    async def detach(self, path: str) -> None:
        records = self._load()
        if records.pop(path, None) is not None:
            self._save(records)

    async def recover(self, paths: Iterable[str]) -> None:
        wanted = set(paths)
        records = self._load()
        kept = {p: name for p, name in records.items() if p in wanted}
        if kept != records:
            self._save(kept)
        for path in sorted(wanted - set(kept)):
            await self.attach(path)
