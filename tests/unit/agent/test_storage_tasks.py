"""The agent's storage tasks on files in tmp dirs, with the real tools
(mkfs.ext4/xfs, blkid, wipefs, dumpe2fs): sparse files (created, formatted
with the StorageClass options, attached to a stable emulated loop device,
removed), raw devices (emulated /dev links to disk images: refused when they
hold a filesystem unless forced, missing, formatted, wiped), LVM (refused on
an emulated host; lvcreate on a real one with a stand-in runner), and crashes
at every step followed by a restart converging to one file, one loop, no
double formatting."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from racksmith.agent.host import CommandResult, EmulatedHost, RealHost, run_process
from racksmith.agent.storage import StorageContext
from racksmith.agent.storage.loops import LOOPS_FILE
from racksmith.agent.storage.tasks import recover, run_job
from racksmith.kinds.volumejobs import FORCE_ANNOTATION, Job, JobResult

MiB = 2**20
UID = "0b6f3c3e-1111-4222-8333-444455556666"
OTHER_UID = "9a9a9a9a-1111-4222-8333-444455556666"
EXT4_OPTIONS = json.dumps(["-m", "0", "-E", "lazy_itable_init=1"])


class Crash(BaseException):
    """The agent dies here (passes every ``except Exception``)."""


def volume(uid: str = UID, *, backend: dict[str, Any] | None = None, mode: str = "Filesystem",
           name: str = "vol-a", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": uid, "annotations": annotations or {}},
        "spec": {"nodeName": "n1", "storageClassName": "sc", "mode": mode,
                 **(backend or {"sparseLoopDevice": {"size": "64Mi"}})},
    }


def storage_class(fs_type: str = "ext4", options: str | None = EXT4_OPTIONS) -> dict[str, Any]:
    params = {"fsType": fs_type, **({"mkfsOptions": options} if options is not None else {})}
    return {"metadata": {"name": "sc"}, "parameters": params}


async def run(ctx: StorageContext, op: str, vol: dict[str, Any],
              sc: dict[str, Any] | None = None) -> JobResult:
    async def get_sc(name: str) -> dict[str, Any] | None:
        assert name == "sc"
        return sc if sc is not None else storage_class()

    job = Job.parse(f"{op}:abcd0123")
    assert job is not None
    return await run_job(ctx, job, vol, get_sc)


def blkid(path: Path) -> dict[str, str]:
    out = subprocess.run(["blkid", "-p", "-o", "export", str(path)], capture_output=True,
                         text=True, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def reserved_blocks(path: Path) -> int:
    out = subprocess.run(["dumpe2fs", "-h", str(path)], capture_output=True, text=True,
                         check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("Reserved block count:"))
    return int(line.split(":")[1])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An emulated host's root, beside its disk images (as the emulator lays them out)."""
    root = tmp_path / "hosts" / "h1" / "root"
    root.mkdir(parents=True)
    (tmp_path / "hosts" / "h1" / "disks").mkdir()
    return root


@pytest.fixture
def ctx(root: Path) -> StorageContext:
    return StorageContext.for_host(EmulatedHost(root))


def image(root: Path, uid: str = UID) -> Path:
    return root / "var/lib/racksmith/volumes" / f"{uid}.img"


def loops(root: Path) -> dict[str, str]:
    return dict(json.loads((root / LOOPS_FILE.lstrip("/")).read_text()))


def disk(root: Path, name: str = "sdb", size: int = 64 * MiB) -> Path:
    """A disk image linked as <root>/dev/<name>, as the emulated OS boot does."""
    target = root.parent / "disks" / f"{name}.img"
    with target.open("wb") as fh:
        fh.truncate(size)
    (root / "dev").mkdir(exist_ok=True)
    (root / "dev" / name).symlink_to(target)
    return target


# --- sparseLoopDevice ------------------------------------------------------------------


async def test_sparse_ext4_uses_the_mkfs_options_and_a_stable_loop(
        ctx: StorageContext, root: Path) -> None:
    result = await run(ctx, "prepare", volume())
    assert result.ok, result
    assert (result.job, result.device_name, result.size_bytes) == (
        "prepare:abcd0123", "loop0", 64 * MiB)
    file = image(root)
    found = blkid(file)
    assert found["TYPE"] == "ext4"
    assert result.uuid == found["UUID"]
    assert reserved_blocks(file) == 0  # the StorageClass's "-m 0"
    assert file.stat().st_blocks * 512 < 64 * MiB  # sparse
    assert loops(root) == {f"/var/lib/racksmith/volumes/{UID}.img": "loop0"}

    # A second volume gets the next loop; the first, prepared again, is unchanged.
    other = await run(ctx, "prepare", volume(OTHER_UID), storage_class(options=None))
    assert other.ok and other.device_name == "loop1"
    assert reserved_blocks(image(root, OTHER_UID)) > 0  # mke2fs' default 5%
    again = await run(ctx, "prepare", volume())
    assert (again.device_name, again.uuid) == ("loop0", result.uuid)
    assert sorted(p.name for p in file.parent.iterdir()) == sorted(
        [f"{UID}.img", f"{OTHER_UID}.img", "loops.json"])


async def test_sparse_xfs_and_block_mode(ctx: StorageContext, root: Path) -> None:
    xfs = await run(ctx, "prepare", volume(backend={"sparseLoopDevice": {"size": "320Mi"}}),
                    storage_class("xfs", options="[]"))
    assert xfs.ok, xfs
    assert blkid(image(root))["TYPE"] == "xfs"
    assert xfs.size_bytes == 320 * MiB
    block = await run(ctx, "prepare", volume(OTHER_UID, mode="Block"), {"parameters": {}})
    assert block.ok and block.uuid is None
    assert blkid(image(root, OTHER_UID)) == {}  # no filesystem in Block mode


async def test_bad_storage_class_and_size_fail_with_a_reason(ctx: StorageContext) -> None:
    bad = await run(ctx, "prepare", volume(), storage_class(options="-m 0"))
    assert (bad.ok, bad.reason) == (False, "InvalidStorageClass")
    assert "JSON list" in (bad.error or "")
    fs = await run(ctx, "prepare", volume(), storage_class("btrfs"))
    assert (fs.ok, fs.reason) == (False, "Unsupported")


async def test_sparse_unprepare_is_idempotent(ctx: StorageContext, root: Path) -> None:
    assert (await run(ctx, "prepare", volume())).ok
    for _ in range(2):
        result = await run(ctx, "unprepare", volume())
        assert result.ok and result.job == "unprepare:abcd0123"
        assert not image(root).exists()
        assert loops(root) == {}
    # Never prepared: nothing to do, success.
    assert (await run(ctx, "unprepare", volume(OTHER_UID))).ok


async def test_crash_while_formatting_leaves_a_tmp_removed_at_start(
        root: Path) -> None:
    async def crashing(argv: Sequence[str], env: Mapping[str, str] | None) -> CommandResult:
        result = await run_process(argv, env)
        if argv[0].startswith("mkfs."):
            raise Crash
        return result

    ctx = StorageContext.for_host(EmulatedHost(root), crashing)
    with pytest.raises(Crash):
        await run(ctx, "prepare", volume())
    folder = image(root).parent
    assert [p.name for p in folder.iterdir()] == [f"{UID}.img.tmp"]

    restarted = StorageContext.for_host(EmulatedHost(root))
    assert await recover(restarted) == []
    assert list(folder.iterdir()) == []
    result = await run(restarted, "prepare", volume())
    assert result.ok and result.device_name == "loop0"
    assert blkid(image(root))["TYPE"] == "ext4"


async def test_crash_before_attaching_is_reattached_and_not_formatted_again(
        ctx: StorageContext, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def crash(path: str) -> str:
        raise Crash

    monkeypatch.setattr(ctx.loops, "attach", crash)
    with pytest.raises(Crash):
        await run(ctx, "prepare", volume())
    uuid = blkid(image(root))["UUID"]
    # A stray atomic-write leftover of loops.json, as a crash mid-write leaves it.
    (image(root).parent / ".loops.json.x1y2").write_text("{")

    restarted = StorageContext.for_host(EmulatedHost(root))
    assert await recover(restarted) == [f"/var/lib/racksmith/volumes/{UID}.img"]
    assert loops(root) == {f"/var/lib/racksmith/volumes/{UID}.img": "loop0"}
    assert sorted(p.name for p in image(root).parent.iterdir()) == [f"{UID}.img", "loops.json"]
    result = await run(restarted, "prepare", volume())
    assert (result.ok, result.device_name, result.uuid) == (True, "loop0", uuid)


async def test_crash_during_unprepare_converges(
        ctx: StorageContext, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (await run(ctx, "prepare", volume())).ok
    detach = ctx.loops.detach

    async def detach_then_crash(path: str) -> None:
        await detach(path)
        raise Crash

    monkeypatch.setattr(ctx.loops, "detach", detach_then_crash)
    with pytest.raises(Crash):
        await run(ctx, "unprepare", volume())
    assert image(root).exists() and loops(root) == {}

    restarted = StorageContext.for_host(EmulatedHost(root))
    await recover(restarted)  # the file still exists: attached again
    assert (await run(restarted, "unprepare", volume())).ok
    assert not image(root).exists() and loops(root) == {}


async def test_real_mode_attaches_with_losetup(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    attached: dict[str, str] = {}

    async def runner(argv: Sequence[str], env: Mapping[str, str] | None) -> CommandResult:
        if argv[0] != "losetup":
            return await run_process(argv, env)
        calls.append(list(argv))
        if argv[1] == "-l":
            dev = attached.get(argv[-1])
            return CommandResult(0, f"{dev}\n" if dev else "")
        if argv[1] == "--find":
            attached[argv[-1]] = "/dev/loop7"
            return CommandResult(0, "/dev/loop7\n")
        attached.clear()
        return CommandResult(0)

    ctx = StorageContext.for_host(RealHost(tmp_path, runner), runner)
    result = await run(ctx, "prepare", volume())
    assert (result.ok, result.device_name) == (True, "loop7")
    file = str(image(tmp_path))
    assert calls == [["losetup", "-l", "-n", "-O", "NAME", "-j", file],
                     ["losetup", "--find", "--show", file]]
    # An agent start after a reboot: nothing attached → attached again.
    attached.clear()
    calls.clear()
    await recover(ctx)
    assert calls[-1] == ["losetup", "--find", "--show", file]
    assert (await run(ctx, "unprepare", volume())).ok
    assert calls[-1] == ["losetup", "-d", "/dev/loop7"]
    assert not image(tmp_path).exists()


# --- rawBlockDevice --------------------------------------------------------------------


def raw(path: str = "/dev/sdb", **kw: Any) -> dict[str, Any]:
    return volume(backend={"rawBlockDevice": {"devicePath": path}}, **kw)


async def test_raw_device_is_formatted_through_the_dev_link(
        ctx: StorageContext, root: Path) -> None:
    target = disk(root, size=96 * MiB)
    result = await run(ctx, "prepare", raw())
    assert result.ok, result
    assert (result.device_name, result.size_bytes) == ("sdb", 96 * MiB)  # the image's size
    assert blkid(target)["TYPE"] == "ext4"
    assert result.uuid == blkid(target)["UUID"]
    # Prepared again (a lost result): the device is ours, nothing is redone.
    again = await run(ctx, "prepare", raw())
    assert (again.ok, again.uuid) == (True, result.uuid)


async def test_raw_device_holding_a_filesystem_is_refused_unless_forced(
        ctx: StorageContext, root: Path) -> None:
    target = disk(root, size=320 * MiB)  # mkfs.xfs wants 300 MB at least
    subprocess.run(["mkfs.ext4", "-q", "-F", str(target)], check=True)
    before = blkid(target)["UUID"]
    refused = await run(ctx, "prepare", raw())
    assert (refused.ok, refused.reason) == (False, "DeviceInUse")
    assert "ext4" in (refused.error or "") and FORCE_ANNOTATION in (refused.error or "")
    assert blkid(target)["UUID"] == before
    # Deleting the refused Volume must not wipe the stranger's filesystem.
    assert (await run(ctx, "unprepare", raw())).ok
    assert blkid(target)["UUID"] == before

    forced = await run(ctx, "prepare", raw(annotations={FORCE_ANNOTATION: "true"}),
                       storage_class("xfs", options=None))
    assert forced.ok, forced
    assert blkid(target)["TYPE"] == "xfs"


async def test_raw_block_mode_refuses_signatures_and_leaves_the_device(
        ctx: StorageContext, root: Path) -> None:
    target = disk(root)
    assert (await run(ctx, "prepare", raw(mode="Block"))).ok
    assert blkid(target) == {}
    subprocess.run(["mkfs.ext4", "-q", "-F", str(target)], check=True)
    refused = await run(ctx, "prepare", raw(uid=OTHER_UID, mode="Block"))
    assert refused.reason == "DeviceInUse"


async def test_missing_or_escaping_raw_device(ctx: StorageContext, root: Path,
                                              tmp_path: Path) -> None:
    missing = await run(ctx, "prepare", raw("/dev/sdz"))
    assert (missing.ok, missing.reason) == (False, "DeviceNotFound")
    assert "/dev/sdz" in (missing.error or "")
    outside = tmp_path / "precious.img"
    with outside.open("wb") as fh:
        fh.truncate(64 * MiB)
    (root / "dev").mkdir()
    (root / "dev" / "evil").symlink_to(outside)
    escaped = await run(ctx, "prepare", raw("/dev/evil"))
    assert (escaped.ok, escaped.reason) == (False, "InvalidVolume")
    assert blkid(outside) == {}


async def test_raw_unprepare_wipes_and_is_idempotent(ctx: StorageContext, root: Path) -> None:
    target = disk(root)
    assert (await run(ctx, "prepare", raw())).ok
    for _ in range(2):
        assert (await run(ctx, "unprepare", raw())).ok
        assert blkid(target) == {}
    assert not (root / "var/lib/racksmith/volumes/records").joinpath(f"{UID}.json").exists()


async def test_raw_crash_mid_format_is_formatted_again_not_refused(root: Path) -> None:
    target = disk(root)

    async def crashing(argv: Sequence[str], env: Mapping[str, str] | None) -> CommandResult:
        result = await run_process(argv, env)
        if argv[0].startswith("mkfs."):
            raise Crash  # the signature is on the device, the record says "formatting"
        return result

    with pytest.raises(Crash):
        await run(StorageContext.for_host(EmulatedHost(root), crashing), "prepare", raw())
    assert blkid(target)["TYPE"] == "ext4"
    restarted = StorageContext.for_host(EmulatedHost(root))
    result = await run(restarted, "prepare", raw())
    assert result.ok, result
    assert result.uuid == blkid(target)["UUID"]


# --- lvmLogicalVolume ------------------------------------------------------------------


def lvm(**kw: Any) -> dict[str, Any]:
    return volume(backend={"lvmLogicalVolume": {"vgName": "vg0", "size": "64Mi"}}, **kw)


async def test_lvm_is_unsupported_on_an_emulated_host(ctx: StorageContext, root: Path) -> None:
    result = await run(ctx, "prepare", lvm())
    assert (result.ok, result.reason) == (False, "Unsupported")
    assert "emulated" in (result.error or "")
    assert (await run(ctx, "unprepare", lvm())).ok
    assert not (root / "var").exists()


async def test_lvm_real_mode_creates_formats_and_removes(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    lv = tmp_path / "dev/vg0/vol-a"

    async def runner(argv: Sequence[str], env: Mapping[str, str] | None) -> CommandResult:
        if argv[0] == "lvcreate":
            calls.append(list(argv))
            lv.parent.mkdir(parents=True, exist_ok=True)
            with lv.open("wb") as fh:
                fh.truncate(64 * MiB)
            return CommandResult(0)
        if argv[0] == "lvremove":
            calls.append(list(argv))
            lv.unlink()
            return CommandResult(0)
        return await run_process(argv, env)

    ctx = StorageContext.for_host(RealHost(tmp_path, runner), runner)
    result = await run(ctx, "prepare", lvm())
    assert result.ok, result
    assert calls == [["lvcreate", "-n", "vol-a", "-L", f"{64 * MiB}b", "vg0"]]
    assert blkid(lv)["TYPE"] == "ext4" and result.size_bytes == 64 * MiB
    assert (await run(ctx, "prepare", lvm())).uuid == result.uuid  # not created/formatted again
    assert len(calls) == 1
    for _ in range(2):
        assert (await run(ctx, "unprepare", lvm())).ok
    assert calls[1:] == [["lvremove", "-y", "vg0/vol-a"]]
