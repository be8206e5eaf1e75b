"""The ``lvmLogicalVolume`` backend: a new logical volume in an existing VG.

Owns, on a real host only (an emulated host has no LVM: the task fails
with ``Unsupported``), the logical volume ``<vgName>/<volume name>``:

- prepare: ``lvcreate -n <name> -L <size>b <vg>`` unless ``/dev/<vg>/<name>``
  exists, then (Filesystem mode) ``mkfs`` it once. The task record
  (``creating`` → ``formatting`` → ``prepared``) tells our interrupted work
  from a stranger's LV of the same name, which is refused (``DeviceInUse``).
- unprepare: ``lvremove -y <vg>/<name>`` when it exists and is ours.

Called by ``tasks``.
"""

from __future__ import annotations

from racksmith.agent.host import HostError, render_argv
from racksmith.agent.storage.context import StorageContext, TaskRecords, VolumeRequest
from racksmith.agent.storage.devices import device_size
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.agent.storage.raw import device_name
from racksmith.kinds.volumejobs import FailureReason, Prepared
from racksmith.planners.quantity import to_bytes

__all__ = ["prepare_lvm", "unprepare_lvm"]

UNSUPPORTED_MESSAGE = (
    "lvmLogicalVolume needs LVM on a real host; an emulated host supports "
    "sparseLoopDevice and rawBlockDevice"
)


async def _run(ctx: StorageContext, argv: list[str]) -> None:
    try:
        result = await ctx.tools.runner(argv, None)
    except HostError as exc:
        raise TaskFailed(FailureReason.COMMAND_FAILED, str(exc)) from None
    if result.returncode != 0:
        raise TaskFailed(FailureReason.COMMAND_FAILED, f"{render_argv(argv)}: {result.describe()}")


async def prepare_lvm(ctx: StorageContext, req: VolumeRequest) -> Prepared:
    """Create (and format) the logical volume (see the module docstring)."""
    backend = req.spec.lvm_logical_volume
    assert backend is not None
    if ctx.emulated:
        raise TaskFailed(FailureReason.UNSUPPORTED, UNSUPPORTED_MESSAGE)
    try:
        size = to_bytes(backend.size)
    except ValueError as exc:
        raise TaskFailed(FailureReason.INVALID_VOLUME, str(exc)) from None
    lv_path = f"/dev/{backend.vg_name}/{req.name}"
    try:
        device = ctx.host.resolve(lv_path)
    except HostError as exc:
        raise TaskFailed(FailureReason.INVALID_VOLUME, f"vgName: {exc}") from None
    records = TaskRecords(ctx.host)
    record = records.get(req.uid) or {}
    base = {"backend": "lvm", "devicePath": lv_path}
    if not device.exists():
        records.put(req.uid, {**base, "state": "creating"})
        await _run(ctx, ["lvcreate", "-n", req.name, "-L", f"{size}b", backend.vg_name])
    elif record.get("devicePath") != lv_path:
        raise TaskFailed(FailureReason.DEVICE_IN_USE,
                         f"logical volume {backend.vg_name}/{req.name} exists and was not "
                         "created for this Volume")
    if record.get("state") != "prepared":
        if req.formats:
            records.put(req.uid, {**base, "state": "formatting"})
            await ctx.tools.mkfs(req.fs_type, req.mkfs_options, device)
        records.put(req.uid, {**base, "state": "prepared"})
    uuid = await ctx.tools.uuid(device) if req.formats else None
    return Prepared(device_name(ctx, lv_path, device), device_size(device), uuid)


async def unprepare_lvm(ctx: StorageContext, req: VolumeRequest) -> None:
    """Remove the logical volume this volume created; idempotent."""
    backend = req.spec.lvm_logical_volume
    assert backend is not None
    records = TaskRecords(ctx.host)
    if ctx.emulated or records.get(req.uid) is None:
        return  # nothing of ours was ever created
    if ctx.host.resolve(f"/dev/{backend.vg_name}/{req.name}").exists():
        await _run(ctx, ["lvremove", "-y", f"{backend.vg_name}/{req.name}"])
    records.drop(req.uid)
