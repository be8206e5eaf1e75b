"""The emulated hosts' disks: one sparse file per disk under the data dir.

Owns the layout ``<hosts_dir>/<host>/disks/<disk>.img`` (``sda.img``,
``nvme0n1.img``) plus ``<disk>-configdrive.img`` next to the root disk, and
the operations the emulated agent performs on them: write an image stream,
write a config drive, erase metadata (zero the first and last MiB) and
erase everything. Files are created sparse at the disk's declared size when
the file system allows, else they grow with what is written. Blocking file
I/O: callers run these in a thread.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from racksmith.emulator.inventory import DiskInfo, EmulatedHost

METADATA_BYTES = 1024 * 1024


class DiskStore:
    """Disk files of all hosts under ``hosts_dir``."""

    def __init__(self, hosts_dir: Path) -> None:
        self.hosts_dir = Path(hosts_dir)

    def disk_path(self, host: EmulatedHost | str, disk: DiskInfo | str) -> Path:
        """The file backing ``disk`` (a DiskInfo, ``/dev/sda`` or ``sda``)."""
        name = host if isinstance(host, str) else host.name
        short = disk.short_name if isinstance(disk, DiskInfo) else disk.rsplit("/", 1)[-1]
        return self.hosts_dir / name / "disks" / f"{short}.img"

    def configdrive_path(self, host: EmulatedHost | str, disk: DiskInfo | str) -> Path:
        """The config drive written with an image to ``disk``."""
        path = self.disk_path(host, disk)
        return path.with_name(path.stem + "-configdrive.img")

    def ensure(self, host: EmulatedHost) -> None:
        """Create the host's disk files (sparse, declared size) if missing."""
        for disk in host.inventory.disks:
            path = self.disk_path(host, disk)
            if path.exists():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as f, contextlib.suppress(OSError):
                f.truncate(disk.size_bytes)

    def open_for_write(self, host: EmulatedHost, disk: DiskInfo) -> int:
        """A raw fd positioned at offset 0 of the disk file (caller closes)."""
        self.ensure(host)
        return os.open(self.disk_path(host, disk), os.O_WRONLY)

    def write_configdrive(self, host: EmulatedHost, disk: DiskInfo, data: bytes) -> Path:
        """Store the config drive next to the root disk."""
        path = self.configdrive_path(host, disk)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def erase_metadata(self, host: EmulatedHost) -> None:
        """Zero the first and last MiB of every disk; drop config drives."""
        self.ensure(host)
        for disk in host.inventory.disks:
            path = self.disk_path(host, disk)
            size = path.stat().st_size
            fd = os.open(path, os.O_WRONLY)
            try:
                head = min(size, METADATA_BYTES)
                os.pwrite(fd, bytes(head), 0)
                tail = min(size, METADATA_BYTES)
                if size > METADATA_BYTES:
                    os.pwrite(fd, bytes(tail), size - tail)
            finally:
                os.close(fd)
            self.configdrive_path(host, disk).unlink(missing_ok=True)

    def erase_all(self, host: EmulatedHost) -> None:
        """Zero every disk entirely (cheaply: truncate and re-extend)."""
        self.ensure(host)
        for disk in host.inventory.disks:
            path = self.disk_path(host, disk)
            size = path.stat().st_size
            with path.open("r+b") as f:
                f.truncate(0)
                f.truncate(size)
            self.configdrive_path(host, disk).unlink(missing_ok=True)
