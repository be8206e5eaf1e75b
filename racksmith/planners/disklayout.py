"""The disk-layout planner: BareMetalHostProfileSpec + HardwareDetails → layout.

Owns the rules that turn a profile into the concrete layout of one host, or
into the list of reasons it does not fit. Pure: no I/O, no clock; the same
inputs always give the same output. Called by the BareMetalHost controller
before provisioning (and by whoever renders a profile's status).

Rules:

- each device entry gets its own disk (see ``devices``), smallest fit first;
- partitions start at 1 MiB, are rounded up to whole MiB, and 1 MiB is kept
  at the end of the disk for the backup GPT; only the last partition of a
  disk may omit its size (it takes the rest);
- a partition, array or logical volume is used by at most one consumer (an
  array, a volume group or a file system): nothing is used twice;
- ``raid1`` needs ≥ 2 members, ``raid10`` ≥ 4, each on a different disk; an
  array is as large as its smallest member (raid10: times members / 2);
- a volume group is the sum of its members less 1 MiB of metadata each,
  rounded down to 4 MiB extents; at most one logical volume per group may
  omit its size (it takes what is left);
- huge pages must fit in memory (≤ 90 %), and 1G pages need the ``pdpe1gb``
  CPU flag when the flags were inspected.
"""

from __future__ import annotations

from dataclasses import dataclass

from racksmith.kinds.hardware import HardwareDetails
from racksmith.kinds.hostprofile import BareMetalHostProfileSpec, FileSystemType, RAIDLevel
from racksmith.planners.devices import choose_disks, disks_of
from racksmith.planners.layout import (
    ChosenDevice,
    FitError,
    PlannedFileSystem,
    PlannedHugePages,
    PlannedLogicalVolume,
    PlannedPartition,
    PlannedRAID,
    PlannedVolumeGroup,
    RenderedLayout,
)
from racksmith.planners.quantity import MiB, human, to_bytes

__all__ = ["FitError", "RenderedLayout", "render_layout"]

GPT_HEAD = MiB
GPT_TAIL = MiB
PV_METADATA = MiB
EXTENT = 4 * MiB
HUGE_PAGE_SIZES = {"2M": 2 * MiB, "1G": 1024 * MiB}
MIN_MEMBERS = {RAIDLevel.RAID1: 2, RAIDLevel.RAID10: 4}
MAX_HUGE_PAGE_SHARE = 0.9


@dataclass
class _Block:
    """A block device the layout defines (partition, array or logical volume)."""

    size: int
    disks: frozenset[str]


def render_layout(
    spec: BareMetalHostProfileSpec, hardware: HardwareDetails | None
) -> RenderedLayout | list[FitError]:
    """The layout of ``spec`` on ``hardware``, or every reason it does not fit."""
    errors: list[FitError] = []
    needs_hardware = bool(spec.devices or spec.huge_pages)
    if hardware is None:
        if needs_hardware:
            return [FitError("", "the host has no inspected hardware details")]
        hardware = HardwareDetails()
    chosen = choose_disks(spec.devices, disks_of(hardware))
    if chosen and isinstance(chosen[0], FitError):
        return [e for e in chosen if isinstance(e, FitError)]
    devices = [d for d in chosen if isinstance(d, ChosenDevice)]
    blocks: dict[str, _Block] = {}
    partitions = _partitions(spec, devices, blocks, errors)
    used: dict[str, str] = {}
    raids = _raids(spec, blocks, used, errors)
    vgs = _volume_groups(spec, blocks, used, errors)
    lvs = _logical_volumes(spec, vgs, blocks, errors)
    file_systems = _file_systems(spec, blocks, used, errors)
    huge = _huge_pages(spec, hardware, errors)
    if errors:
        return errors
    kernel = spec.kernel_parameters
    cmdline = list(kernel.cmdline) if kernel else []
    for h in huge:
        cmdline += [f"hugepagesz={h.size}", f"hugepages={h.count}"]
    return RenderedLayout(
        devices=tuple(devices),
        partitions=tuple(partitions),
        soft_raid_devices=tuple(raids),
        volume_groups=tuple(vgs.values()),
        logical_volumes=tuple(lvs),
        file_systems=tuple(file_systems),
        kernel_cmdline=tuple(cmdline),
        sysctl=dict(kernel.sysctl) if kernel else {},
        modules=tuple(kernel.modules) if kernel else (),
        huge_pages=tuple(huge),
    )


def _claim_name(name: str, where: str, blocks: dict[str, _Block], errors: list[FitError]) -> bool:
    if name in blocks:
        errors.append(FitError(where, f"name {name!r} is used twice in the profile"))
        return False
    return True


def _size(value: int | str | None, where: str, errors: list[FitError]) -> int | None:
    if value is None:
        return None
    try:
        return to_bytes(value)
    except ValueError as exc:
        errors.append(FitError(where, str(exc)))
        return 0


def _partitions(
    spec: BareMetalHostProfileSpec,
    devices: list[ChosenDevice],
    blocks: dict[str, _Block],
    errors: list[FitError],
) -> list[PlannedPartition]:
    out: list[PlannedPartition] = []
    for device, entry in zip(devices, spec.devices, strict=True):
        offset = GPT_HEAD
        end = device.size_bytes - GPT_TAIL
        for n, part in enumerate(entry.partitions):
            where = f"devices[{device.entry}].partitions[{n}]"
            size = _size(part.size, where + ".size", errors)
            if size is None:
                if n != len(entry.partitions) - 1:
                    errors.append(FitError(where, "only the last partition may omit its size"))
                    continue
                size = (end - offset) // MiB * MiB
                if size < MiB:
                    errors.append(
                        FitError(where, f"no space left on {device.name} for {part.name!r}")
                    )
                    continue
            else:
                size = -(-size // MiB) * MiB  # round up to whole MiB
            if size == 0:
                errors.append(FitError(where + ".size", "a partition cannot be empty"))
                continue
            if offset + size > end:
                errors.append(
                    FitError(
                        where,
                        f"partitions of {device.name} need {human(offset + size - GPT_HEAD)}, "
                        f"the disk has {human(end - GPT_HEAD)} usable",
                    )
                )
                break
            if _claim_name(part.name, where + ".name", blocks, errors):
                blocks[part.name] = _Block(size, frozenset([device.name]))
            out.append(
                PlannedPartition(part.name, device.name, n + 1, offset, size, tuple(part.flags))
            )
            offset += size
    return out


def _use(
    name: str, consumer: str, where: str, blocks: dict[str, _Block],
    used: dict[str, str], errors: list[FitError],
) -> _Block | None:
    block = blocks.get(name)
    if block is None:
        errors.append(FitError(where, f"{name!r} is not a partition, array or volume"))
        return None
    if name in used:
        errors.append(FitError(where, f"{name!r} is already used by {used[name]}"))
        return None
    used[name] = consumer
    return block


def _raids(
    spec: BareMetalHostProfileSpec, blocks: dict[str, _Block],
    used: dict[str, str], errors: list[FitError],
) -> list[PlannedRAID]:
    out: list[PlannedRAID] = []
    for i, raid in enumerate(spec.soft_raid_devices):
        where = f"softRaidDevices[{i}]"
        need = MIN_MEMBERS[raid.level]
        if len(raid.devices) < need:
            errors.append(
                FitError(where, f"{raid.level.value} needs at least {need} devices, "
                                f"{raid.name} has {len(raid.devices)}")
            )
            continue
        members = [
            _use(m, f"array {raid.name}", f"{where}.devices", blocks, used, errors)
            for m in raid.devices
        ]
        found = [m for m in members if m is not None]
        if len(found) != len(members):
            continue
        disks = [d for m in found for d in m.disks]
        if len(set(disks)) != len(disks):
            errors.append(FitError(where, f"members of {raid.name} must be on different disks"))
            continue
        smallest = min(m.size for m in found)
        size = smallest if raid.level is RAIDLevel.RAID1 else smallest * len(found) // 2
        if _claim_name(raid.name, where + ".name", blocks, errors):
            blocks[raid.name] = _Block(size, frozenset(disks))
        out.append(PlannedRAID(raid.name, raid.level.value, tuple(raid.devices), size))
    return out


def _volume_groups(
    spec: BareMetalHostProfileSpec, blocks: dict[str, _Block],
    used: dict[str, str], errors: list[FitError],
) -> dict[str, PlannedVolumeGroup]:
    out: dict[str, PlannedVolumeGroup] = {}
    for i, vg in enumerate(spec.volume_groups):
        where = f"volumeGroups[{i}]"
        if vg.name in out:
            errors.append(FitError(where + ".name", f"volume group {vg.name!r} is defined twice"))
            continue
        members = [
            _use(m, f"volume group {vg.name}", f"{where}.devices", blocks, used, errors)
            for m in vg.devices
        ]
        size = sum(max(0, (m.size - PV_METADATA) // EXTENT * EXTENT) for m in members if m)
        out[vg.name] = PlannedVolumeGroup(vg.name, tuple(vg.devices), size)
    return out


def _logical_volumes(
    spec: BareMetalHostProfileSpec, vgs: dict[str, PlannedVolumeGroup],
    blocks: dict[str, _Block], errors: list[FitError],
) -> list[PlannedLogicalVolume]:
    out: list[PlannedLogicalVolume] = []
    free = {name: vg.size_bytes for name, vg in vgs.items()}
    rest: dict[str, int] = {}
    sizes: list[int | None] = []
    for i, lv in enumerate(spec.logical_volumes):
        where = f"logicalVolumes[{i}]"
        size = _size(lv.size, where + ".size", errors)
        sizes.append(size)
        if lv.vg not in vgs:
            errors.append(FitError(where + ".vg", f"volume group {lv.vg!r} is not defined"))
            continue
        if size is None:
            if lv.vg in rest:
                errors.append(FitError(where, f"only one volume of {lv.vg} may omit its size"))
            rest[lv.vg] = i
            continue
        size = -(-size // EXTENT) * EXTENT
        sizes[i] = size
        free[lv.vg] -= size
    for name, left in free.items():
        if left < 0:
            errors.append(
                FitError("logicalVolumes", f"volumes of {name} need "
                         f"{human(vgs[name].size_bytes - left)}, "
                         f"the group has {human(vgs[name].size_bytes)}")
            )
    for vg, i in rest.items():
        if free.get(vg, 0) < EXTENT:
            errors.append(FitError(f"logicalVolumes[{i}]", f"no space left in {vg}"))
        sizes[i] = max(0, free.get(vg, 0))
    for i, lv in enumerate(spec.logical_volumes):
        size = sizes[i]
        if lv.vg not in vgs or size is None:
            continue
        for alias in (f"{lv.vg}/{lv.name}", lv.name):
            if alias == lv.name and alias in blocks:
                continue  # the short name is ambiguous; "vg/lv" still works
            if _claim_name(alias, f"logicalVolumes[{i}].name", blocks, errors):
                blocks[alias] = _Block(size, frozenset())
        out.append(PlannedLogicalVolume(lv.name, lv.vg, size))
    return out


def _file_systems(
    spec: BareMetalHostProfileSpec, blocks: dict[str, _Block],
    used: dict[str, str], errors: list[FitError],
) -> list[PlannedFileSystem]:
    out: list[PlannedFileSystem] = []
    mounts: set[str] = set()
    for i, fs in enumerate(spec.file_systems):
        where = f"fileSystems[{i}]"
        block = _use(fs.source, f"file system {i}", where + ".source", blocks, used, errors)
        if fs.file_system is FileSystemType.SWAP:
            if fs.mount_point:
                errors.append(FitError(where + ".mountPoint", "swap has no mount point"))
        elif fs.mount_point:
            if not fs.mount_point.startswith("/"):
                errors.append(FitError(where + ".mountPoint", "must be an absolute path"))
            elif fs.mount_point in mounts:
                errors.append(FitError(where + ".mountPoint", f"{fs.mount_point} mounted twice"))
            mounts.add(fs.mount_point)
        if block is not None:
            out.append(
                PlannedFileSystem(
                    fs.file_system.value, fs.source, fs.mount_point, fs.mount_opts, block.size
                )
            )
    return out


def _huge_pages(
    spec: BareMetalHostProfileSpec, hardware: HardwareDetails, errors: list[FitError]
) -> list[PlannedHugePages]:
    out: list[PlannedHugePages] = []
    for i, h in enumerate(spec.huge_pages):
        page = HUGE_PAGE_SIZES.get(h.size)
        if page is None:
            errors.append(FitError(f"hugePages[{i}].size", f"{h.size!r} is not 2M or 1G"))
            continue
        flags = hardware.cpu.flags if hardware.cpu else []
        if h.size == "1G" and flags and "pdpe1gb" not in flags:
            errors.append(FitError(f"hugePages[{i}]", "1G pages need a CPU with pdpe1gb"))
        out.append(PlannedHugePages(h.size, h.count, h.count * page))
    total = sum(h.bytes_total for h in out)
    if total and hardware.ram_mebibytes is not None:
        ram = hardware.ram_mebibytes * MiB
        if total > ram * MAX_HUGE_PAGE_SHARE:
            errors.append(
                FitError("hugePages", f"huge pages need {human(total)} of memory, "
                                      f"host has {human(ram)}")
            )
    return out
