"""The block-device tools the storage tasks run: mkfs, blkid, wipefs, sizes.

Owns the exact command lines (real processes through the injected
:data:`~racksmith.agent.host.Runner`, in both modes: they are harmless on a
file, and the emulated host's devices are files) and how their output is
read. ``blkid -p`` probes the device itself (no cache is read or written).
Every function may be called repeatedly; only :meth:`DeviceTools.mkfs` and
:meth:`DeviceTools.wipe` change anything. Called by ``sparse``, ``raw`` and
``lvm``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from racksmith.agent.host import HostError, Runner, render_argv
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.kinds.volumejobs import FailureReason

__all__ = ["FS_TYPES", "DeviceTools", "describe_signature", "device_size"]

#: fsType → the flag making mkfs overwrite an existing signature.
FS_TYPES: dict[str, str] = {"ext2": "-F", "ext3": "-F", "ext4": "-F", "xfs": "-f"}


def device_size(path: Path) -> int:
    """Size in bytes of a file (a symlink's target) or a block device."""
    try:
        info = path.stat()
        if stat.S_ISREG(info.st_mode):
            return info.st_size
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TaskFailed(FailureReason.HOST_ERROR,
                         f"cannot read the size of {path}: {exc.strerror or exc}") from None


class DeviceTools:
    """mkfs, blkid and wipefs through ``runner``."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def _run(self, argv: Sequence[str], ok: tuple[int, ...] = (0,)) -> str:
        try:
            result = await self.runner(argv, None)
        except HostError as exc:
            raise TaskFailed(FailureReason.COMMAND_FAILED, str(exc)) from None
        if result.returncode not in ok:
            raise TaskFailed(FailureReason.COMMAND_FAILED,
                             f"{render_argv(argv)}: {result.describe()}")
        return result.stdout

    async def mkfs(self, fs_type: str, options: Sequence[str], path: Path) -> None:
        """Format ``path`` with ``mkfs.<fs_type> <options>`` (overwriting what is there).

        Raises ``TaskFailed`` (Unsupported for an unknown ``fs_type``,
        CommandFailed when mkfs fails).
        """
        force = FS_TYPES.get(fs_type)
        if force is None:
            raise TaskFailed(FailureReason.UNSUPPORTED,
                             f"fsType {fs_type!r} is not one of {', '.join(FS_TYPES)}")
        await self._run([f"mkfs.{fs_type}", "-q", force, *options, str(path)])

    async def signatures(self, path: Path) -> dict[str, str]:
        """What ``blkid -p`` finds on ``path`` (``TYPE``, ``PTTYPE``, ``UUID``...); {} if none."""
        out = await self._run(["blkid", "-p", "-o", "export", str(path)], ok=(0, 2))
        found: dict[str, str] = {}
        for line in out.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                found[key.strip()] = value.strip()
        return found

    async def uuid(self, path: Path) -> str | None:
        """The filesystem UUID on ``path``, None if it has none."""
        return (await self.signatures(path)).get("UUID") or None

    async def wipe(self, path: Path) -> None:
        """Erase every signature on ``path`` (``wipefs -a``)."""
        await self._run(["wipefs", "-a", str(path)])


def describe_signature(found: dict[str, str]) -> str:
    """A short text for a ``blkid -p`` result, e.g. ``ext4 (UUID 1234...)``."""
    kind = found.get("TYPE") or (f"{found['PTTYPE']} partition table" if "PTTYPE" in found
                                 else "unknown")
    uuid = found.get("UUID") or found.get("PTUUID")
    return f"{kind}" + (f" (UUID {uuid})" if uuid else "")
