"""The disk-layout planner: table-driven fits and misfits, and properties
(nothing used twice, nothing larger than its disk) checked with hypothesis."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racksmith.kinds.hardware import CPU, DiskType, HardwareDetails, Storage
from racksmith.kinds.hostprofile import BareMetalHostProfileSpec
from racksmith.planners.disklayout import FitError, RenderedLayout, render_layout
from racksmith.planners.quantity import GiB, MiB, human, to_bytes

GB = 10**9


def disk(name: str, size: int, kind: str = "SSD", **kw: Any) -> Storage:
    return Storage(name=name, size_bytes=size, type=DiskType(kind),
                   rotational=kind == "HDD", **kw)


def hw(*disks: Storage, ram_mib: int = 65536, flags: list[str] | None = None
       ) -> HardwareDetails:
    return HardwareDetails(storage=list(disks), ram_mebibytes=ram_mib,
                           cpu=CPU(count=8, flags=flags if flags is not None else ["pdpe1gb"]))


def profile(**spec: Any) -> BareMetalHostProfileSpec:
    return BareMetalHostProfileSpec.model_validate(spec)


def dev(type_: str | None = None, min_size: str | None = None, parts: Any = (),
        hints: dict[str, str] | None = None) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    if type_:
        selector["type"] = type_
    if min_size:
        selector["minSize"] = min_size
    if hints:
        selector["hints"] = hints
    return {"device": selector, "partitions": [
        {"name": p[0], **({"size": p[1]} if p[1] else {})} for p in parts]}


def ok(result: RenderedLayout | list[FitError]) -> RenderedLayout:
    assert isinstance(result, RenderedLayout), result
    return result


def errors(result: RenderedLayout | list[FitError]) -> list[str]:
    assert isinstance(result, list), result
    return [str(e) for e in result]


TWO_SSD_ONE_HDD = hw(disk("/dev/sda", 480 * GB), disk("/dev/sdb", 480 * GB),
                     disk("/dev/sdc", 2000 * GB, "HDD"))

FIT_CASES: list[tuple[str, dict[str, Any], HardwareDetails, dict[str, Any]]] = [
    ("single root", {"devices": [dev("ssd", None, [("esp", "512Mi"), ("root", None)])],
                     "fileSystems": [{"fileSystem": "vfat", "source": "esp",
                                      "mountPoint": "/boot/efi"},
                                     {"fileSystem": "ext4", "source": "root",
                                      "mountPoint": "/"}]},
     TWO_SSD_ONE_HDD, {"devices": ["/dev/sda"], "partitions": 2}),
    ("smallest disk that fits wins", {"devices": [dev(None, "1Ti")]}, TWO_SSD_ONE_HDD,
     {"devices": ["/dev/sdc"]}),
    ("hint by serial", {"devices": [dev(hints={"serialNumber": "B"})]},
     hw(disk("/dev/sda", 100 * GB, serial_number="A"),
        disk("/dev/sdb", 100 * GB, serial_number="B")), {"devices": ["/dev/sdb"]}),
    ("hint by alternate name", {"devices": [dev(hints={"name": "/dev/disk/by-id/x"})]},
     hw(disk("/dev/sda", 100 * GB, alternate_names=["/dev/disk/by-id/x"])),
     {"devices": ["/dev/sda"]}),
    ("constrained entry gets its disk even when listed last",
     {"devices": [dev(None, "100Gi"), dev("hdd")]},
     hw(disk("/dev/sdc", 2000 * GB, "HDD"), disk("/dev/sda", 480 * GB)),
     {"devices": ["/dev/sda", "/dev/sdc"]}),
    ("raid1 over two disks",
     {"devices": [dev("ssd", None, [("a", None)]), dev("ssd", None, [("b", None)])],
      "softRaidDevices": [{"name": "md0", "level": "raid1", "devices": ["a", "b"]}],
      "fileSystems": [{"fileSystem": "xfs", "source": "md0", "mountPoint": "/"}]},
     TWO_SSD_ONE_HDD, {"raids": 1}),
    ("raid10 over four disks with LVM",
     {"devices": [dev(None, None, [(f"p{i}", None)]) for i in range(4)],
      "softRaidDevices": [{"name": "md0", "level": "raid10",
                           "devices": ["p0", "p1", "p2", "p3"]}],
      "volumeGroups": [{"name": "vg0", "devices": ["md0"]}],
      "logicalVolumes": [{"name": "root", "vg": "vg0", "size": "50Gi"},
                         {"name": "data", "vg": "vg0"}],
      "fileSystems": [{"fileSystem": "ext4", "source": "root", "mountPoint": "/"},
                      {"fileSystem": "xfs", "source": "vg0/data", "mountPoint": "/data"}]},
     hw(*(disk(f"/dev/sd{c}", 100 * GB) for c in "abcd")), {"raids": 1, "lvs": 2}),
    ("kernel and huge pages",
     {"kernelParameters": {"cmdline": ["console=ttyS0"], "sysctl": {"vm.swappiness": "1"}},
      "hugePages": [{"size": "1G", "count": 8}]},
     TWO_SSD_ONE_HDD, {"cmdline": ["console=ttyS0", "hugepagesz=1G", "hugepages=8"]}),
]


@pytest.mark.parametrize(("name", "spec", "hardware", "expect"), FIT_CASES,
                         ids=[c[0] for c in FIT_CASES])
def test_fits(name: str, spec: dict[str, Any], hardware: HardwareDetails,
              expect: dict[str, Any]) -> None:
    layout = ok(render_layout(profile(**spec), hardware))
    if "devices" in expect:
        assert [d.name for d in layout.devices] == expect["devices"]
    if "partitions" in expect:
        assert len(layout.partitions) == expect["partitions"]
    if "raids" in expect:
        assert len(layout.soft_raid_devices) == expect["raids"]
    if "lvs" in expect:
        assert len(layout.logical_volumes) == expect["lvs"]
    if "cmdline" in expect:
        assert list(layout.kernel_cmdline) == expect["cmdline"]
    assert layout.to_dict()["devices"] == [
        {"name": d.name, "sizeBytes": d.size_bytes, "type": d.type, "wipe": d.wipe}
        for d in layout.devices]


MISFIT_CASES: list[tuple[str, dict[str, Any], HardwareDetails | None, str]] = [
    ("not enough ssds", {"devices": [dev("ssd", "100Gi"), dev("ssd", "100Gi")]},
     hw(disk("/dev/sda", 480 * GB), disk("/dev/sdb", 2000 * GB, "HDD")),
     "needs 2 disks of type ssd with at least 100Gi, host has 1"),
    ("too small", {"devices": [dev(None, "1Ti")]}, hw(disk("/dev/sda", 480 * GB)),
     "needs 1 disk with at least 1Ti, host has 0"),
    ("no such serial", {"devices": [dev(hints={"serialNumber": "Z"})]},
     hw(disk("/dev/sda", 100 * GB)), "needs 1 disk matching serial=Z, host has 0"),
    ("entries compete for one disk", {"devices": [dev(None, "10Gi"), dev("hdd")]},
     hw(disk("/dev/sdc", 2000 * GB, "HDD")), "needs 2 distinct disks"),
    ("partitions too large", {"devices": [dev(None, None, [("a", "400Gi"), ("b", "100Gi")])]},
     hw(disk("/dev/sda", 480 * GB)), "partitions of /dev/sda need"),
    ("size-less partition not last", {"devices": [dev(None, None, [("a", None), ("b", "1Gi")])]},
     hw(disk("/dev/sda", 480 * GB)), "only the last partition may omit its size"),
    ("raid10 needs four", {"devices": [dev(None, None, [("a", None)]),
                                       dev(None, None, [("b", None)])],
                           "softRaidDevices": [{"name": "md0", "level": "raid10",
                                                "devices": ["a", "b"]}]},
     TWO_SSD_ONE_HDD, "raid10 needs at least 4 devices"),
    ("raid members on one disk", {"devices": [dev(None, None, [("a", "1Gi"), ("b", "1Gi")])],
                                  "softRaidDevices": [{"name": "md0", "devices": ["a", "b"]}]},
     TWO_SSD_ONE_HDD, "must be on different disks"),
    ("used twice", {"devices": [dev(None, None, [("a", None)])],
                    "fileSystems": [{"fileSystem": "ext4", "source": "a", "mountPoint": "/"},
                                    {"fileSystem": "ext4", "source": "a",
                                     "mountPoint": "/x"}]},
     TWO_SSD_ONE_HDD, "'a' is already used by file system 0"),
    ("unknown source", {"fileSystems": [{"fileSystem": "ext4", "source": "nope",
                                         "mountPoint": "/"}]},
     TWO_SSD_ONE_HDD, "'nope' is not a partition, array or volume"),
    ("lvs overflow", {"devices": [dev(None, None, [("a", "10Gi")])],
                      "volumeGroups": [{"name": "vg", "devices": ["a"]}],
                      "logicalVolumes": [{"name": "x", "vg": "vg", "size": "20Gi"}]},
     TWO_SSD_ONE_HDD, "volumes of vg need"),
    ("huge pages exceed memory", {"hugePages": [{"size": "1G", "count": 64}]},
     hw(disk("/dev/sda", 100 * GB), ram_mib=32768),
     "huge pages need 64Gi of memory, host has 32Gi"),
    ("1G pages without pdpe1gb", {"hugePages": [{"size": "1G", "count": 1}]},
     hw(disk("/dev/sda", 100 * GB), flags=["sse4_2"]), "pdpe1gb"),
    ("not inspected", {"devices": [dev()]}, None, "no inspected hardware details"),
    ("duplicate names", {"devices": [dev(None, None, [("a", "1Gi"), ("a", "1Gi")])]},
     TWO_SSD_ONE_HDD, "name 'a' is used twice"),
]


@pytest.mark.parametrize(("name", "spec", "hardware", "message"), MISFIT_CASES,
                         ids=[c[0] for c in MISFIT_CASES])
def test_misfits(name: str, spec: dict[str, Any], hardware: HardwareDetails | None,
                 message: str) -> None:
    found = errors(render_layout(profile(**spec), hardware))
    assert any(message in e for e in found), found


def test_partition_geometry() -> None:
    layout = ok(render_layout(profile(devices=[dev(None, None, [("a", "1000Ki"),
                                                                 ("b", None)])]),
                              hw(disk("/dev/sda", 10 * GiB))))
    a, b = layout.partitions
    assert (a.start_bytes, a.size_bytes, a.number) == (MiB, MiB, 1)  # rounded up to a MiB
    assert b.start_bytes == 2 * MiB and b.number == 2
    assert b.start_bytes + b.size_bytes <= 10 * GiB - MiB


def test_quantities() -> None:
    assert to_bytes("100Gi") == 100 * GiB
    assert to_bytes("1G") == GB
    assert to_bytes(1024) == 1024
    assert to_bytes("1.5Ki") == 1536
    assert human(100 * GiB) == "100Gi" and human(1536 * MiB) == "1.5Gi"
    with pytest.raises(ValueError):
        to_bytes("lots")


# ------------------------------------------------------------------ properties

disk_sizes = st.integers(min_value=50, max_value=4000).map(lambda g: g * GB)
kinds = st.sampled_from(["HDD", "SSD", "NVME"])


@st.composite
def hardware_and_profile(draw: st.DrawFn) -> tuple[HardwareDetails, BareMetalHostProfileSpec]:
    """Mostly plausible profiles (so many fit), with some deliberate misfits."""
    n_disks = draw(st.integers(min_value=0, max_value=6))
    disks = [disk(f"/dev/sd{chr(97 + i)}", draw(disk_sizes), draw(kinds))
             for i in range(n_disks)]
    n_entries = draw(st.integers(min_value=0, max_value=5))
    devices: list[dict[str, Any]] = []
    names: list[str] = []
    firsts: list[str] = []
    for i in range(n_entries):
        parts = []
        n_parts = draw(st.integers(min_value=0, max_value=3))
        for j in range(n_parts):
            last = j == n_parts - 1
            size = draw(st.integers(min_value=1, max_value=200))
            rest = last and draw(st.booleans())
            parts.append((f"p{i}-{j}", None if rest else f"{size}Gi"))
            names.append(f"p{i}-{j}")
            if j == 0:
                firsts.append(f"p{i}-{j}")
        devices.append(dev(draw(st.one_of(st.none(), st.none(),
                                          st.sampled_from(["hdd", "ssd", "nvme"]))),
                           draw(st.one_of(st.none(), st.none(),
                                          st.sampled_from(["10Gi", "500Gi", "2Ti"]))), parts))
    raids = []
    if len(firsts) >= 2 and draw(st.booleans()):
        members = draw(st.lists(st.sampled_from(firsts), min_size=2, max_size=4, unique=True))
        raids.append({"name": "md0", "level": "raid10" if len(members) >= 4 else "raid1",
                      "devices": members})
    used = {m for r in raids for m in r["devices"]}
    sources = [*(n for n in names if n not in used), *(r["name"] for r in raids)]
    picked = draw(st.lists(st.sampled_from(sources), max_size=4, unique=True)) if sources \
        else []
    if sources and draw(st.integers(min_value=0, max_value=9)) == 0:
        picked.append(picked[0] if picked else sources[0])  # a deliberate double use
    fss = [{"fileSystem": "ext4", "source": src, "mountPoint": f"/m{k}"}
           for k, src in enumerate(picked)]
    spec = profile(devices=devices, softRaidDevices=raids, fileSystems=fss)
    return hw(*disks), spec


@settings(max_examples=300, deadline=None)
@given(hardware_and_profile())
def test_a_layout_never_uses_anything_twice_nor_exceeds_a_disk(
    case: tuple[HardwareDetails, BareMetalHostProfileSpec],
) -> None:
    hardware, spec = case
    result = render_layout(spec, hardware)
    assert render_layout(spec, hardware) == result  # deterministic
    if isinstance(result, list):
        assert result and all(isinstance(e, FitError) and e.message for e in result)
        return
    sizes = {s.name: s.size_bytes or 0 for s in hardware.storage}
    chosen = [d.name for d in result.devices]
    assert len(chosen) == len(set(chosen)) == len(spec.devices)
    for p in result.partitions:
        assert p.device in chosen
        assert p.size_bytes > 0 and p.start_bytes >= MiB
        assert p.start_bytes + p.size_bytes <= sizes[p.device]
    for name in chosen:
        parts = sorted((p for p in result.partitions if p.device == name),
                       key=lambda p: p.start_bytes)
        assert sum(p.size_bytes for p in parts) <= sizes[name]
        for before, after in itertools.pairwise(parts):
            assert before.start_bytes + before.size_bytes <= after.start_bytes
    consumers = [m for r in result.soft_raid_devices for m in r.members]
    consumers += [m for v in result.volume_groups for m in v.members]
    consumers += [f.source for f in result.file_systems]
    assert len(consumers) == len(set(consumers))
    for r in result.soft_raid_devices:
        member_disks = [p.device for p in result.partitions if p.name in r.members]
        assert len(member_disks) == len(set(member_disks)) == len(r.members)
        assert len(r.members) >= (4 if r.level == "raid10" else 2)
