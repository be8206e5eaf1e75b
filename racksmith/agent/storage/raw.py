"""The ``rawBlockDevice`` backend: an existing disk or partition used as is.

Owns checking, formatting and wiping the device at ``devicePath``:

- prepare: the path must exist (else ``DeviceNotFound``). A device holding
  a signature (``blkid -p``) is refused with ``DeviceInUse`` unless the
  Volume is forced or the signature is this volume's own earlier work. In
  Filesystem mode it is formatted once; the task record
  (``records/<uid>.json``: ``formatting`` before mkfs, ``prepared`` after)
  makes a re-run after a crash format again instead of refusing its own
  half-written filesystem, and a re-run after success change nothing.
  deviceName is the path's basename (on a real host: the kernel name the
  path leads to under ``/dev``).
- unprepare: ``wipefs -a`` the device, then drop the record. Only a
  device this volume prepared is wiped (no record: nothing of ours is on
  it, e.g. a prepare refused with DeviceInUse); a device gone is success.

Emulated hosts: the path is taken under the root, where the emulated OS
links each non-root disk as ``/dev/<disk>`` to the host's disk image; such
a link may lead to ``<root>/../disks/`` (the host's own disks) and nowhere
else outside the root. Called by ``tasks``.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from racksmith.agent.host import Host, HostError
from racksmith.agent.storage.context import StorageContext, TaskRecords, VolumeRequest
from racksmith.agent.storage.devices import describe_signature, device_size
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.kinds.volumejobs import FORCE_ANNOTATION, FailureReason, Prepared

__all__ = ["prepare_raw", "resolve_device", "unprepare_raw"]

FORMATTING = "formatting"
PREPARED = "prepared"
EMULATED_DISKS_DIR = "disks"
"""Beside an emulated host's root: its disk images, the targets of ``/dev`` links."""


def resolve_device(ctx: StorageContext, device_path: str) -> Path | None:
    """The device file for ``device_path`` on this host; None when it does not exist.

    Raises ``TaskFailed`` (InvalidVolume) for a path that is not absolute,
    climbs with ``..`` or, emulated, leads anywhere but the root or the
    host's disk images.
    """
    try:
        lexical = Host.resolve(ctx.host, device_path)  # not following links yet
    except HostError as exc:
        raise TaskFailed(FailureReason.INVALID_VOLUME, f"devicePath: {exc}") from None
    if ctx.emulated:
        real = Path(os.path.realpath(lexical))
        root = ctx.host.root
        disks = root.parent / EMULATED_DISKS_DIR
        if not (real.is_relative_to(root) or (real.is_relative_to(disks)
                                              and lexical.is_relative_to(root / "dev"))):
            raise TaskFailed(FailureReason.INVALID_VOLUME,
                             f"devicePath {device_path} leads outside the emulated host")
    return lexical if lexical.exists() else None


def device_name(ctx: StorageContext, device_path: str, device: Path) -> str:
    """The basename of the path; on a real host, the kernel name it leads to in /dev."""
    if not ctx.emulated:
        real = Path(os.path.realpath(device))
        if real.parent == ctx.host.root / "dev":
            return real.name
    return PurePosixPath(device_path).name


async def prepare_raw(ctx: StorageContext, req: VolumeRequest) -> Prepared:
    """Check (and in Filesystem mode format) the device (see the module docstring)."""
    backend = req.spec.raw_block_device
    assert backend is not None
    device = resolve_device(ctx, backend.device_path)
    if device is None:
        raise TaskFailed(FailureReason.DEVICE_NOT_FOUND,
                         f"device {backend.device_path} does not exist on the node")
    records = TaskRecords(ctx.host)
    record = records.get(req.uid)
    ours = record is not None and record.get("devicePath") == backend.device_path
    if not ours:
        found = await ctx.tools.signatures(device)
        if found and not req.forced:
            raise TaskFailed(
                FailureReason.DEVICE_IN_USE,
                f"device {backend.device_path} holds a {describe_signature(found)} signature;"
                f' annotate the Volume {FORCE_ANNOTATION}: "true" to format it anyway')
    state = record.get("state") if ours and record else None
    if req.formats and state != PREPARED:
        records.put(req.uid, {"backend": "raw", "devicePath": backend.device_path,
                              "state": FORMATTING})
        await ctx.tools.mkfs(req.fs_type, req.mkfs_options, device)
    if state != PREPARED:
        records.put(req.uid, {"backend": "raw", "devicePath": backend.device_path,
                              "state": PREPARED})
    uuid = await ctx.tools.uuid(device) if req.formats else None
    return Prepared(device_name(ctx, backend.device_path, device), device_size(device), uuid)


async def unprepare_raw(ctx: StorageContext, req: VolumeRequest) -> None:
    """Wipe the device this volume prepared; idempotent (see the module docstring)."""
    records = TaskRecords(ctx.host)
    record = records.get(req.uid)
    if record is None:
        return
    path = str(record.get("devicePath") or "")
    device = resolve_device(ctx, path) if path else None
    if device is not None:
        await ctx.tools.wipe(device)
    records.drop(req.uid)
