"""Choosing disks for a profile's device entries.

Owns the match between ``BareMetalHostProfileSpec.devices`` (criteria:
minimum size, type, exact hints) and the inspected disks: every entry gets a
different disk, and among the assignments found the smallest fitting disks
are preferred. When no full assignment exists it explains which criteria
lack disks ("needs 2 disks of type ssd with at least 100Gi, host has 1").
Called by ``disklayout`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from racksmith.kinds.hardware import DiskType, HardwareDetails
from racksmith.kinds.hostprofile import DeviceLayout, DeviceSelector
from racksmith.planners.layout import ChosenDevice, FitError
from racksmith.planners.quantity import human, to_bytes


@dataclass(frozen=True)
class Disk:
    """An inspected disk, normalised."""

    name: str
    size_bytes: int
    type: str  # hdd | ssd | nvme
    names: frozenset[str]
    wwns: frozenset[str]
    serial: str | None


def disks_of(hardware: HardwareDetails) -> list[Disk]:
    """The usable disks of ``hardware`` (those with a name and a size), smallest first."""
    disks: list[Disk] = []
    for s in hardware.storage:
        if not s.name or not s.size_bytes:
            continue
        disks.append(
            Disk(
                name=s.name,
                size_bytes=s.size_bytes,
                type=_disk_type(s.type, s.rotational, s.name),
                names=frozenset([s.name, *s.alternate_names]),
                wwns=frozenset(w for w in (s.wwn, s.wwn_with_extension) if w),
                serial=s.serial_number,
            )
        )
    return sorted(disks, key=lambda d: (d.size_bytes, d.name))


def _disk_type(kind: DiskType | None, rotational: bool | None, name: str) -> str:
    if kind is not None:
        return kind.value.lower()
    if rotational:
        return "hdd"
    return "nvme" if "nvme" in name else "ssd"


def matches(selector: DeviceSelector, disk: Disk, min_bytes: int) -> bool:
    """``disk`` satisfies every criterion of ``selector``."""
    if disk.size_bytes < min_bytes:
        return False
    if selector.type is not None and disk.type != selector.type.value:
        return False
    hints = selector.hints
    if hints is not None:
        if hints.name is not None and hints.name not in disk.names:
            return False
        if hints.wwn is not None and hints.wwn not in disk.wwns:
            return False
        if hints.serial_number is not None and hints.serial_number != disk.serial:
            return False
    return True


def describe(selector: DeviceSelector, min_bytes: int) -> str:
    """The criteria in words, for fit errors."""
    parts: list[str] = []
    if selector.type is not None:
        parts.append(f"of type {selector.type.value}")
    if min_bytes:
        parts.append(f"with at least {human(min_bytes)}")
    hints = selector.hints
    if hints is not None:
        given = [
            f"{k}={v}"
            for k, v in (("name", hints.name), ("wwn", hints.wwn), ("serial", hints.serial_number))
            if v is not None
        ]
        if given:
            parts.append("matching " + ", ".join(given))
    return " ".join(parts) if parts else "of any kind"


def choose_disks(
    entries: Sequence[DeviceLayout], disks: Sequence[Disk]
) -> list[ChosenDevice] | list[FitError]:
    """One distinct disk per entry (smallest first), or why that is impossible."""
    errors: list[FitError] = []
    minimums: list[int] = []
    for i, entry in enumerate(entries):
        try:
            minimums.append(to_bytes(entry.device.min_size or 0))
        except ValueError as exc:
            errors.append(FitError(f"devices[{i}].device.minSize", str(exc)))
            minimums.append(0)
    if errors:
        return errors
    candidates = [
        [j for j, disk in enumerate(disks) if matches(entry.device, disk, minimums[i])]
        for i, entry in enumerate(entries)
    ]
    owner: dict[int, int] = {}  # disk index -> entry index

    def augment(i: int, seen: set[int]) -> bool:
        # Kuhn's augmenting path; candidates are smallest first, and a free
        # disk is taken before another entry is moved (profile order wins).
        for j in candidates[i]:
            if j not in owner:
                owner[j] = i
                return True
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(entries)):
        augment(i, set())
    if len(owner) == len(entries):
        by_entry = {i: j for j, i in owner.items()}
        return [
            ChosenDevice(
                entry=i,
                name=disks[by_entry[i]].name,
                size_bytes=disks[by_entry[i]].size_bytes,
                type=disks[by_entry[i]].type,
                wipe=entry.wipe,
            )
            for i, entry in enumerate(entries)
        ]
    return _explain(entries, candidates, minimums, len(owner))


def _explain(
    entries: Sequence[DeviceLayout],
    candidates: list[list[int]],
    minimums: list[int],
    assigned: int,
) -> list[FitError]:
    groups: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        groups.setdefault(describe(entry.device, minimums[i]), []).append(i)
    errors: list[FitError] = []
    for text, members in groups.items():
        have = len(candidates[members[0]])
        if have < len(members):
            noun = "disk" if len(members) == 1 else "disks"
            errors.append(
                FitError(
                    f"devices[{members[0]}].device",
                    f"needs {len(members)} {noun} {text}, host has {have}",
                )
            )
    if not errors:
        errors.append(
            FitError(
                "devices",
                f"needs {len(entries)} distinct disks for the device entries, "
                f"only {assigned} can be assigned at once",
            )
        )
    return errors
