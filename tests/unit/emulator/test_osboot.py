"""The emulated installed OS: a real config-2 ISO built as Ironic builds it
(genisoimage, gzip, base64) → files under the host root, hardware.json, the
racksmith process (a stand-in script) started, stopped, adopted; and the
agent's hooks (disk boot, power off, ramdisk boot, stop)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from racksmith.emulator.agent import AgentServer, AgentSettings, AgentState
from racksmith.emulator.configdrive import (
    ConfigDriveError,
    parse_user_data,
    read_configdrive,
)
from racksmith.emulator.disks import DiskStore
from racksmith.emulator.image_writer import ImageWriter
from racksmith.emulator.images import SAMPLE_IMAGE, ImageServer
from racksmith.emulator.inventory import EmulatedHost, generate_host, root_disk
from racksmith.emulator.osboot import (
    AGENT_LOG,
    BOOT_ID_FILE,
    CLOUD_INIT_LOG,
    DEFAULT_COMMAND,
    HARDWARE_FILE,
    PID_FILE,
    REBOOT_REQUIRED_FILE,
    BootOutcome,
    OSBoot,
    PathEscape,
    agent_argv,
    resolve_in_root,
)

pytestmark = pytest.mark.skipif(shutil.which("genisoimage") is None,
                                reason="genisoimage is not installed (make deps)")

FAKE_AGENT = """\
import json, os, signal, sys, time
from pathlib import Path
args = sys.argv[1:]
root = Path(args[args.index("--root") + 1])
if "--stubborn" in args:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
boot_id = root / "proc/sys/kernel/random/boot_id"
(root / "fake-agent.json").write_text(json.dumps({
    "argv": args, "pid": os.getpid(),
    "bootId": boot_id.read_text().strip() if boot_id.exists() else None,
    "rebootRequired": (root / "var/run/reboot-required").exists()}))
print("fake agent up", flush=True)
while True:
    time.sleep(0.05)
"""

USER_DATA = """\
#cloud-config
write_files:
  - path: /etc/racksmith/agent.yaml
    content: |
      lcmMachine: m1
    permissions: '0600'
  - path: /etc/motd
    encoding: b64
    content: {motd}
  - path: /../../escaped.txt
    content: nope
  - path: /opt/tool.sh
    content: "echo hi"
    permissions: 0755
runcmd:
  - [racksmith, agent, --config, /etc/racksmith/agent.yaml]
  - systemctl restart something
""".format(motd=base64.b64encode(b"welcome\n").decode())


def build_configdrive(work: Path, user_data: str | bytes | None,
                      meta: dict[str, Any] | None = None,
                      network: dict[str, Any] | None = None, label: str = "config-2") -> str:
    """What Ironic puts in the deploy args: base64(gzip(ISO)), built with
    openstacksdk's genisoimage flags."""
    tree = work / "cd-tree"
    shutil.rmtree(tree, ignore_errors=True)
    for version in ("2012-08-10", "latest"):
        d = tree / "openstack" / version
        d.mkdir(parents=True)
        (d / "meta_data.json").write_text(json.dumps(meta or {"uuid": "u-1", "hostname": "m1"}))
        if network:
            (d / "network_data.json").write_text(json.dumps(network))
        if user_data is not None:
            (d / "user_data").write_bytes(
                user_data.encode() if isinstance(user_data, str) else user_data)
    iso = work / "cd.iso"
    subprocess.run(
        ["genisoimage", "-o", str(iso), "-ldots", "-allow-lowercase", "-allow-multidot", "-l",
         "-publisher", "metalsmith", "-quiet", "-J", "-r", "-V", label, str(tree)],
        check=True, capture_output=True,
    )
    return base64.b64encode(gzip.compress(iso.read_bytes())).decode()


def stored(configdrive: str) -> bytes:
    """What image_writer stores next to the root disk."""
    return gzip.decompress(base64.b64decode(configdrive))


@dataclass
class Rig:
    tmp: Path
    disks: DiskStore
    os: OSBoot
    host: EmulatedHost
    script: Path

    @property
    def root(self) -> Path:
        return self.os.root(self.host)

    def install(self, user_data: str | bytes | None = USER_DATA, **kw: Any) -> None:
        """As a deploy leaves the disks: an image on the root disk, its config drive."""
        disk = root_disk(self.host.inventory)
        fd = self.disks.open_for_write(self.host, disk)
        try:
            os.pwrite(fd, b"RACKSMITH-SAMPLE-OS-IMAGE\n" + os.urandom(64), 0)
        finally:
            os.close(fd)
        self.disks.write_configdrive(self.host, disk,
                                     stored(build_configdrive(self.tmp, user_data, **kw)))

    async def boot(self, osboot: OSBoot | None = None) -> Any:
        osboot = osboot or self.os
        osboot.want(self.host, True)
        await osboot.settle(self.host)
        return osboot.last_boot(self.host)

    async def power_off(self, osboot: OSBoot | None = None) -> None:
        osboot = osboot or self.os
        osboot.want(self.host, False)
        await osboot.settle(self.host)

    def fake_agent(self) -> dict[str, Any]:
        for _ in range(200):
            path = self.root / "fake-agent.json"
            if path.exists():
                with contextlib.suppress(ValueError):
                    return dict(json.loads(path.read_text()))
            time.sleep(0.02)
        raise AssertionError("the fake agent never started")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids a test saw started; any still alive at the end are killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    disks = DiskStore(tmp_path / "hosts")
    host = generate_host(3, seed=7)
    disks.ensure(host)
    osboot = OSBoot(disks, command=(sys.executable, str(script)), stop_timeout=2.0)
    try:
        yield Rig(tmp_path, disks, osboot, host, script)
    finally:
        await osboot.stop_all()


# --- the config drive and cloud-config ------------------------------------------


def test_reads_the_config_drive_ironic_builds(tmp_path: Path) -> None:
    wire = build_configdrive(tmp_path, "#cloud-config\n{}\n", meta={"uuid": "abc"},
                             network={"links": [{"id": "eno1"}]})
    for form in (stored(wire), wire.encode(), base64.b64decode(wire)):
        drive = read_configdrive(form)
        assert drive.user_data == b"#cloud-config\n{}\n"
        assert drive.meta_data == {"uuid": "abc"}
        assert drive.network_data == {"links": [{"id": "eno1"}]}
    assert read_configdrive(stored(build_configdrive(tmp_path, None))).user_data is None
    with pytest.raises(ConfigDriveError, match="label"):
        read_configdrive(stored(build_configdrive(tmp_path, "x", label="OTHER")))
    with pytest.raises(ConfigDriveError):
        read_configdrive(b"hello")


def test_parses_cloud_config() -> None:
    config = parse_user_data(USER_DATA.encode())
    assert config is not None and not config.problems
    files = {f.path: f for f in config.write_files}
    assert files["/etc/racksmith/agent.yaml"].mode == 0o600
    assert files["/etc/motd"].content == b"welcome\n"
    assert files["/opt/tool.sh"].mode == 0o755
    assert config.runcmd == (
        ("racksmith", "agent", "--config", "/etc/racksmith/agent.yaml"),
        ("systemctl", "restart", "something"),
    )
    assert parse_user_data(b"#!/bin/sh\necho hi\n") is None
    bad = parse_user_data(b"#cloud-config\nwrite_files: [{content: x}, 3]\nruncmd: [{a: 1}]\n")
    assert bad is not None and len(bad.problems) == 3 and not bad.write_files
    assert parse_user_data(b"#cloud-config\n: [\n") is not None


def test_paths_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    assert resolve_in_root(root, "/etc/hosts") == root / "etc" / "hosts"
    assert resolve_in_root(root, "etc/hosts") == root / "etc" / "hosts"
    (root / "out").symlink_to(tmp_path)
    for bad in ("/../x", "/etc/../../x", "/", "/out/x"):
        with pytest.raises(PathEscape):
            resolve_in_root(root, bad)


def test_agent_argv_passes_arguments_through(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert DEFAULT_COMMAND == (sys.executable, "-m", "racksmith.cli.main")
    # ``racksmith agent`` starts as the agent's command alone (racksmith.cli.agent)
    assert agent_argv(DEFAULT_COMMAND, root, ["racksmith", "agent", "--config", "/a.yaml",
                                              "--once"]) == [
        sys.executable, "-m", "racksmith.cli.agent", "--config", str(root / "a.yaml"),
        "--once", "--root", str(root), "--emulated"]
    assert agent_argv(DEFAULT_COMMAND, root, ["racksmith", "version"]) == [
        *DEFAULT_COMMAND, "version", "--root", str(root), "--emulated"]
    assert agent_argv(("rs",), root, ["racksmith", "--config=/b/c.yaml"])[1] == (
        f"--config={root / 'b' / 'c.yaml'}")
    with pytest.raises(PathEscape):
        agent_argv(("rs",), root, ["racksmith", "agent", "--config", "/../../etc/passwd"])


# --- booting ---------------------------------------------------------------------


async def test_boot_applies_cloud_config_and_starts_the_agent(
    rig: Rig, started: list[int]
) -> None:
    rig.install()
    report = await rig.boot()
    started.extend(report.pids)
    assert report.outcome is BootOutcome.BOOTED and len(report.pids) == 1
    root = rig.root
    agent_yaml = root / "etc/racksmith/agent.yaml"
    assert agent_yaml.read_text() == "lcmMachine: m1\n"
    assert agent_yaml.stat().st_mode & 0o777 == 0o600
    assert (root / "etc/motd").read_bytes() == b"welcome\n"
    assert (root / "opt/tool.sh").stat().st_mode & 0o777 == 0o755
    assert not (rig.tmp / "escaped.txt").exists()
    assert not list(rig.tmp.rglob("escaped.txt"))
    assert (root / "etc/hostname").read_text() == "m1\n"
    assert (root / "var/lib/cloud/instance/user-data.txt").read_text() == USER_DATA

    hardware = json.loads((root / HARDWARE_FILE).read_text())
    inv = rig.host.inventory
    assert hardware["cpus"] == inv.cpu.count
    assert hardware["memoryBytes"] == inv.memory_mib * 1024 * 1024
    assert [d["name"] for d in hardware["disks"]] == [d.name for d in inv.disks]
    assert [d["sizeBytes"] for d in hardware["disks"]] == [d.size_bytes for d in inv.disks]
    assert [n["mac"] for n in hardware["nics"]] == [n.mac for n in inv.nics]

    agent = rig.fake_agent()
    assert agent["pid"] == report.pids[0]
    assert agent["argv"] == ["agent", "--config", str(root / "etc/racksmith/agent.yaml"),
                             "--root", str(root), "--emulated"]
    assert (root / PID_FILE).read_text().split() == [str(report.pids[0])]
    cloud_log = (root / CLOUD_INIT_LOG).read_text()
    assert "runcmd (not run): systemctl restart something" in cloud_log
    assert "escaped.txt: refused" in cloud_log
    for _ in range(100):
        if "fake agent up" in (root / AGENT_LOG).read_text():
            break
        await asyncio.sleep(0.02)
    assert "fake agent up" in (root / AGENT_LOG).read_text()

    # The same wish again does nothing.
    again = await rig.boot()
    assert again.outcome is BootOutcome.ALREADY_RUNNING and again.pids == report.pids

    await rig.power_off()
    assert not _alive(report.pids[0])
    assert rig.os.pids(rig.host) == []
    assert not (root / PID_FILE).exists()


async def test_reboot_keeps_the_root_and_restarts_the_agent(
    rig: Rig, started: list[int]
) -> None:
    rig.install()
    first = await rig.boot()
    started.extend(first.pids)
    (rig.root / "etc/racksmith/agent.yaml").write_text("changed by the OS\n")
    (rig.root / "var/lib/state").mkdir(parents=True)
    await rig.power_off()
    second = await rig.boot()
    started.extend(second.pids)
    assert second.outcome is BootOutcome.BOOTED and second.pids != first.pids
    # write_files is once per install, like cloud-init's per-instance modules.
    assert (rig.root / "etc/racksmith/agent.yaml").read_text() == "changed by the OS\n"
    assert (rig.root / "var/lib/state").is_dir()
    assert rig.fake_agent()["pid"] == second.pids[0]

    # A new deploy is a new install: a fresh root.
    await rig.power_off()
    rig.install()
    third = await rig.boot()
    started.extend(third.pids)
    assert (rig.root / "etc/racksmith/agent.yaml").read_text() == "lcmMachine: m1\n"
    assert not (rig.root / "var/lib/state").exists()


async def test_every_boot_has_a_new_boot_id_and_clears_reboot_required(
    rig: Rig, started: list[int]
) -> None:
    rig.install()

    async def boot_seen_by_agent() -> tuple[str, dict[str, Any]]:
        report = await rig.boot()
        started.extend(report.pids)
        assert report.outcome is BootOutcome.BOOTED
        for _ in range(200):
            seen = rig.fake_agent()
            if seen["pid"] == report.pids[0]:
                break
            time.sleep(0.02)
        assert seen["pid"] == report.pids[0]
        return (rig.root / BOOT_ID_FILE).read_text().strip(), seen

    first, seen = await boot_seen_by_agent()
    assert str(uuid.UUID(first)) == first and uuid.UUID(first).version == 4
    assert seen["bootId"] == first and seen["rebootRequired"] is False
    # The agent installs a kernel: it asks for a reboot.
    flag = rig.root / REBOOT_REQUIRED_FILE
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.touch()
    await rig.power_off()
    assert flag.exists()  # nothing clears it while the host is off
    second, seen = await boot_seen_by_agent()
    assert second != first
    # Already new and already cleared when the agent started.
    assert seen["bootId"] == second and seen["rebootRequired"] is False
    assert not flag.exists()
    # An emulator restarted while the agent runs adopts it: the same boot.
    again = OSBoot(rig.disks, command=rig.os.command, stop_timeout=2.0)
    try:
        assert (await rig.boot(again)).outcome is BootOutcome.ADOPTED
        assert (rig.root / BOOT_ID_FILE).read_text().strip() == second
    finally:
        await again.stop_all()


async def test_a_stubborn_agent_is_killed(rig: Rig, started: list[int]) -> None:
    rig.os.stop_timeout = 0.3
    rig.install(USER_DATA.replace("/etc/racksmith/agent.yaml]", "/etc/racksmith/agent.yaml, "
                                  "--stubborn]"))
    report = await rig.boot()
    started.extend(report.pids)
    assert "--stubborn" in rig.fake_agent()["argv"]  # SIGTERM is ignored from here on
    await rig.power_off()
    assert not _alive(report.pids[0])


async def test_user_data_that_is_not_cloud_config_is_only_recorded(
    rig: Rig, started: list[int]
) -> None:
    rig.install("#!/bin/sh\nracksmith agent\n")
    report = await rig.boot()
    started.extend(report.pids)
    assert report.outcome is BootOutcome.BOOTED and report.pids == ()
    assert (rig.root / "var/lib/cloud/instance/user-data.txt").read_text().startswith("#!")
    assert "not #cloud-config" in (rig.root / CLOUD_INIT_LOG).read_text()
    assert (rig.root / HARDWARE_FILE).exists()


async def test_a_config_drive_that_is_not_an_iso_boots_without_datasource(
    rig: Rig, started: list[int]
) -> None:
    rig.install()
    rig.disks.write_configdrive(rig.host, root_disk(rig.host.inventory), b"hello")
    report = await rig.boot()
    started.extend(report.pids)
    assert report.outcome is BootOutcome.BOOTED and report.pids == ()
    assert "config drive not usable" in (rig.root / CLOUD_INIT_LOG).read_text()


async def test_cleaned_disks_boot_nothing_and_wipe_the_old_root(
    rig: Rig, started: list[int]
) -> None:
    report = await rig.boot()
    assert report.outcome is BootOutcome.NO_OS and not rig.root.exists()
    rig.install()
    started.extend((await rig.boot()).pids)
    await rig.power_off()
    rig.disks.erase_metadata(rig.host)
    report = await rig.boot()
    assert report.outcome is BootOutcome.NO_OS and report.pids == ()
    assert not rig.root.exists()


async def test_a_restarted_emulator_adopts_or_restarts_agents(
    rig: Rig, started: list[int]
) -> None:
    rig.install()
    first = await rig.boot()
    started.extend(first.pids)
    # The emulator dies without stopping anything; a new one comes up.
    reborn = OSBoot(rig.disks, command=rig.os.command, stop_timeout=2.0)
    try:
        adopted = await rig.boot(reborn)
        assert adopted.outcome is BootOutcome.ADOPTED and adopted.pids == first.pids
        assert reborn.pids(rig.host) == list(first.pids)
        await rig.power_off(reborn)
        assert not _alive(first.pids[0])

        # Powered on again by a BMC whose host kept running, agent dead: restart.
        second = await rig.boot(reborn)
        started.extend(second.pids)
        os.killpg(second.pids[0], signal.SIGKILL)
        for _ in range(100):
            if not _alive(second.pids[0]):
                break
            await asyncio.sleep(0.02)
        third_os = OSBoot(rig.disks, command=rig.os.command, stop_timeout=2.0)
        try:
            third = await rig.boot(third_os)
            started.extend(third.pids)
            assert third.outcome is BootOutcome.BOOTED and third.pids != second.pids
            assert _alive(third.pids[0])
        finally:
            await third_os.stop_all()
        assert not _alive(third.pids[0])
    finally:
        await reborn.stop_all()


async def test_quick_power_cycles_end_in_the_last_wish(rig: Rig, started: list[int]) -> None:
    rig.install()
    for _ in range(3):
        rig.os.want(rig.host, True)
        rig.os.want(rig.host, False)
    rig.os.want(rig.host, True)
    await rig.os.settle(rig.host)
    pids = rig.os.pids(rig.host)
    started.extend(pids)
    assert len(pids) == 1
    rig.os.want(rig.host, True)
    rig.os.want(rig.host, False)
    await rig.os.settle(rig.host)
    assert rig.os.pids(rig.host) == [] and not _alive(pids[0])
    await rig.os.stop_all()
    rig.os.want(rig.host, True)  # refused once stopped
    await rig.os.settle(rig.host)
    assert rig.os.pids(rig.host) == []


# --- the agent's hooks ---------------------------------------------------------------


async def test_agent_boots_the_os_on_disk_boots_and_stops_it(
    rig: Rig, started: list[int]
) -> None:
    """image_writer's real path (base64+gzip config drive) → disk boot → agent."""
    images = ImageServer(rig.tmp / "http")
    await images.start()

    async def no_power_off(host: EmulatedHost) -> None:
        return None

    server = AgentServer([rig.host], rig.disks,
                         AgentSettings(ironic_url="http://127.0.0.1:9", boot_delay=0.0),
                         power_off=no_power_off, os_boot=rig.os)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            image = images.describe(SAMPLE_IMAGE)
            await ImageWriter(rig.disks, lambda: session).write(
                rig.host,
                {"image_info": {"urls": [image.url], "os_hash_algo": "sha256",
                                "os_hash_value": image.sha256},
                 "configdrive": build_configdrive(rig.tmp, USER_DATA)},
                {},
            )

        def notify(power: str, device: str = "Hdd") -> None:
            server.on_system_change({"uuid": rig.host.uuid, "power_state": power,
                                     "boot_device": device, "boot_image": {}})

        notify("On")
        assert server.agents[rig.host.name].state is AgentState.OS
        for _ in range(100):
            if rig.os.pids(rig.host):
                break
            await asyncio.sleep(0.02)
        await rig.os.settle(rig.host)
        pids = rig.os.pids(rig.host)
        started.extend(pids)
        assert len(pids) == 1
        assert rig.fake_agent()["pid"] == pids[0]
        notify("On")  # a repeated notification changes nothing
        await rig.os.settle(rig.host)
        assert rig.os.pids(rig.host) == pids

        notify("Off")
        await rig.os.settle(rig.host)
        assert rig.os.pids(rig.host) == [] and not _alive(pids[0])

        notify("On")
        for _ in range(100):
            if rig.os.pids(rig.host):
                break
            await asyncio.sleep(0.02)
        await rig.os.settle(rig.host)
        pids = rig.os.pids(rig.host)
        started.extend(pids)
        assert len(pids) == 1
    finally:
        await server.stop()  # stops the OS processes too
        await images.stop()
    assert not any(_alive(p) for p in pids)


def test_a_process_still_in_execve_is_recognised_once_its_arguments_show(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Popen returns once the child's execve passed the point of no return, but
    /proc/<pid>/cmdline stays empty until the new image's arguments are mapped
    (seen under load: a restarted emulator booted a second agent instead of
    adopting the first). An empty cmdline is read again."""
    from racksmith import procfs
    from racksmith.emulator import osboot as module

    root = tmp_path / "root"
    reads = iter([b"", b"", f"python\0agent\0--root\0{root}\0".encode()])
    monkeypatch.setattr(procfs, "read_cmdline", lambda _pid: next(reads))
    monkeypatch.setattr(procfs, "alive", lambda _pid: True)
    assert module._runs_in(12345, root)
