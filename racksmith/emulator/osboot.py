"""The installed OS of emulated hosts: what "booting from disk" does.

Owns each host's OS root ``<hosts_dir>/<host>/root/`` and the processes
started in it. When a host powers on from its disk (boot device Hdd) and a
disk holds a written image, the OS "boots" the way cloud-init would on a
config-2 drive:

- the config drive ``<disk>-configdrive.img`` (the raw ISO 9660 Ironic
  built; ``image_writer`` stores it base64- and gzip-decoded) is read
  (``configdrive``): ``openstack/latest/{user_data,meta_data.json,
  network_data.json}``, saved under ``<root>/var/lib/cloud/instance/``;
- on the first boot of an install only (cloud-init's per-instance modules):
  a ``#cloud-config`` user data's ``write_files`` are written under the root
  (paths escaping it are refused), other ``runcmd`` entries are recorded in
  ``<root>/var/log/cloud-init-emulated.log``; user data that is not
  cloud-config is only saved and recorded;
- on every boot: ``<root>/proc/sys/kernel/random/boot_id`` gets a fresh
  uuid4 (the emulated kubelet reports it as the Node's ``bootID``, by which
  LCM sees that a reboot happened), ``<root>/var/run/reboot-required`` is
  deleted (tmpfs on a real host: a boot clears the agent's "needs a
  reboot"), ``<root>/etc/racksmith/hardware.json`` is written from the
  emulated inventory, each disk but the boot disk is linked as
  ``<root>/dev/<disk name>`` (a symlink to its disk file), and each
  ``runcmd`` entry whose argv[0] is ``racksmith`` starts as ``<python> -m
  racksmith.cli.main <args...> --root <root> --emulated`` (own session;
  output appended to ``<root>/var/log/racksmith-agent.log``; pids, one a line, in
  ``<root>/run/racksmith-agent.pid``; umask 0022 as on a real host, the
  root's parents being 0700: see ``racksmith.filemodes``). The path after
  ``--config`` is resolved inside the root. They run concurrently, not one after the other.

An *install* is identified by the disk and config drive files (their
mtimes and contents); a root made from another install, or found when no
disk holds an image any more, is wiped at the next disk boot (not at clean
time: the disks module knows nothing of roots, and nothing reads a root
while its host is off).

Power off (or a ramdisk boot) stops the processes: SIGTERM to their process
group, SIGKILL after ``stop_timeout``. A restarted emulator adopts processes
still alive from the pid file (checked by their ``--root`` argument) instead
of starting new ones.

Level-based: callers only say what they want (:meth:`OSBoot.want`); one
worker task per host converges, so quick on/off/on sequences end in the
last wish. Called by ``agent.AgentServer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

import structlog

from racksmith import procfs
from racksmith.emulator.configdrive import (
    CloudConfig,
    ConfigDrive,
    ConfigDriveError,
    parse_user_data,
    read_configdrive,
)
from racksmith.emulator.disks import METADATA_BYTES, DiskStore
from racksmith.emulator.inventory import DiskInfo, EmulatedHost
from racksmith.filemodes import HOST_UMASK
from racksmith.loopback import ENV as NETWORK_ENV

log = structlog.get_logger("racksmith.emulator.osboot")

DEFAULT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "racksmith.cli.main")
AGENT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "racksmith.cli.agent")
"""``racksmith agent`` alone (``racksmith.cli.agent``): what ``racksmith
agent ...`` starts as under :data:`DEFAULT_COMMAND`, without loading the
rest of the CLI in every host's agent."""
AGENT_LOG = "var/log/racksmith-agent.log"
CLOUD_INIT_LOG = "var/log/cloud-init-emulated.log"
PID_FILE = "run/racksmith-agent.pid"
STATIC_PODS_DIR = "run/static-pods"
"""The emulated kubelet's pid files of the host's static pods (``{"pid": N, ...}``)."""
HARDWARE_FILE = "etc/racksmith/hardware.json"
INSTANCE_DIR = "var/lib/cloud/instance"
INSTALL_ID_FILE = "var/lib/cloud/data/install-id"
BOOT_ID_FILE = "proc/sys/kernel/random/boot_id"
"""A new uuid4 at every boot (the agent's emulated kubelet reads it)."""
REBOOT_REQUIRED_FILE = "var/run/reboot-required"
"""Touched by the agent when an applied item needs a reboot; a boot deletes it.
(The same paths as the agent's; the emulator never imports the agent.)"""


class PathEscape(ValueError):
    """A path from user data points outside the host root."""


class BootOutcome(StrEnum):
    """What a disk boot found and did."""

    NO_OS = "no os"
    """No disk holds an image: nothing boots (the old root is wiped)."""
    BOOTED = "booted"
    """The OS booted; its racksmith processes (if any) were started."""
    ADOPTED = "adopted"
    """Processes of this install were still alive: taken over, not restarted."""
    ALREADY_RUNNING = "already running"
    """This emulator's processes for the host are alive: nothing to do."""
    FAILED = "failed"
    """The boot raised (see the notes); nothing was started."""


@dataclass(frozen=True)
class BootReport:
    """The result of one disk boot: ``outcome``, pids running, notes."""

    outcome: BootOutcome
    pids: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def resolve_in_root(root: Path, path: str) -> Path:
    """``path`` (absolute in the host's view) as a path under ``root``.

    Raises :class:`PathEscape` for ``..`` components, the root itself, or a
    symlink inside the root leading out of it.
    """
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".")]
    if ".." in parts:
        raise PathEscape(f"{path}: '..' is not allowed")
    if not parts:
        raise PathEscape(f"{path!r} names the root itself")
    target = root.joinpath(*parts)
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(target))
    if real != real_root and real_root not in real.parents:
        raise PathEscape(f"{path}: leads outside the host root")
    return target


def is_racksmith_command(argv: Sequence[str]) -> bool:
    """Whether a runcmd entry runs racksmith (``racksmith`` or a path to it)."""
    return bool(argv) and PurePosixPath(argv[0]).name == "racksmith"


def agent_argv(command: Sequence[str], root: Path, argv: Sequence[str]) -> list[str]:
    """The process to start for runcmd ``argv`` (``argv[0]`` is racksmith):
    ``command`` + the arguments, the ``--config`` path resolved inside
    ``root``, then ``--root <root> --emulated``; ``racksmith agent`` under
    :data:`DEFAULT_COMMAND` is :data:`AGENT_COMMAND`. Raises :class:`PathEscape`."""
    args = list(argv[1:])
    if tuple(command) == DEFAULT_COMMAND and args[:1] == ["agent"]:
        command, args = AGENT_COMMAND, args[1:]
    out: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--config" and index + 1 < len(args):
            out += [arg, str(resolve_in_root(root, args[index + 1]))]
            index += 2
            continue
        if arg.startswith("--config="):
            arg = "--config=" + str(resolve_in_root(root, arg.partition("=")[2]))
        out.append(arg)
        index += 1
    return [*command, *out, "--root", str(root), "--emulated"]


def hardware_document(host: EmulatedHost) -> dict[str, Any]:
    """``/etc/racksmith/hardware.json``: what the OS sees of its hardware."""
    inv = host.inventory
    return {
        "cpus": inv.cpu.count,
        "memoryBytes": inv.memory_mib * 1024 * 1024,
        "disks": [
            {"name": d.name, "sizeBytes": d.size_bytes, "rotational": d.rotational,
             "vendor": d.vendor, "model": d.model, "serial": d.serial, "wwn": d.wwn}
            for d in inv.disks
        ],
        "nics": [
            {"name": n.name, "mac": n.mac, "speedMbps": n.speed_mbps, "model": n.model}
            for n in inv.nics
        ],
    }


# --- processes -------------------------------------------------------------------


@dataclass
class _Process:
    pid: int
    popen: subprocess.Popen[bytes] | None = None
    """None when adopted from an earlier emulator (not our child)."""

    def is_alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return procfs.alive(self.pid)


def _runs_in(pid: int, root: Path) -> bool:
    """Whether ``pid`` is alive and was started with ``--root <root>``."""
    args = procfs.argv(pid, settle=procfs.SETTLE_SECONDS)
    wanted = os.fsencode(str(root))
    pairs = itertools.pairwise(args)
    return procfs.alive(pid) and any(a == b"--root" and b == wanted for a, b in pairs)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# --- the OS of all hosts ---------------------------------------------------------


@dataclass
class _HostOS:
    host: EmulatedHost
    want_on: bool = False
    processes: list[_Process] = field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    last: BootReport | None = None


class OSBoot:
    """The installed OS of every host whose disks live in ``disks``.

    ``command`` is what ``racksmith`` means on a host (tests pass a stand-in);
    ``stop_timeout`` is the grace between SIGTERM and SIGKILL.
    """

    def __init__(
        self,
        disks: DiskStore,
        *,
        command: Sequence[str] = DEFAULT_COMMAND,
        stop_timeout: float = 5.0,
        network_file: Path | None = None,
    ) -> None:
        self.disks = disks
        self.command = tuple(command)
        self.stop_timeout = stop_timeout
        self.network_file = network_file
        self._hosts: dict[str, _HostOS] = {}
        self._closed = False

    def root(self, host: EmulatedHost | str) -> Path:
        """The host's OS root, ``<hosts_dir>/<host>/root``."""
        name = host if isinstance(host, str) else host.name
        return self.disks.hosts_dir / name / "root"

    def pids(self, host: EmulatedHost | str) -> list[int]:
        """Pids of the host's racksmith processes that are alive now."""
        name = host if isinstance(host, str) else host.name
        state = self._hosts.get(name)
        return [p.pid for p in state.processes if p.is_alive()] if state else []

    def last_boot(self, host: EmulatedHost | str) -> BootReport | None:
        """What the latest disk boot of ``host`` did (None before any)."""
        name = host if isinstance(host, str) else host.name
        state = self._hosts.get(name)
        return state.last if state else None

    def want(self, host: EmulatedHost, running: bool) -> None:
        """Ask for the host's OS to be running (booted from disk) or not.

        Returns at once; the host's worker converges in the background (see
        :meth:`settle`). May be called repeatedly; after :meth:`stop_all`
        only ``running=False`` is honoured.
        """
        if running and self._closed:
            return
        state = self._hosts.get(host.name)
        if state is None:
            state = self._hosts[host.name] = _HostOS(host)
        if not running and not state.want_on and not state.processes and not (
            self.root(host) / PID_FILE
        ).exists():
            return  # nothing runs: skip the worker
        state.want_on = running
        if state.worker is None or state.worker.done():
            state.worker = asyncio.ensure_future(self._converge(host, state))

    async def settle(self, host: EmulatedHost | None = None) -> None:
        """Wait until the worker of ``host`` (or of every host) is idle."""
        if host is None:
            states = list(self._hosts.values())
        else:
            states = [self._hosts[host.name]] if host.name in self._hosts else []
        workers = [s.worker for s in states if s.worker is not None]
        await asyncio.gather(*workers, return_exceptions=True)

    def reopen(self) -> None:
        """Accept boots again after :meth:`stop_all` (a restarted server)."""
        self._closed = False

    async def stop_all(self) -> None:
        """Stop every process started or adopted; refuse boots until
        :meth:`reopen`."""
        self._closed = True
        for state in list(self._hosts.values()):
            self.want(state.host, False)
        await self.settle()
        # A worker cancelled by a closing loop could leave processes behind.
        for state in self._hosts.values():
            if any(p.is_alive() for p in state.processes):
                await self._stop_processes(state.processes)
                state.processes = []

    async def _converge(self, host: EmulatedHost, state: _HostOS) -> None:
        while True:
            wanted = state.want_on
            try:
                if wanted:
                    state.last = await asyncio.to_thread(self._boot, host, state)
                    log.info("host os booted", host=host.name, outcome=state.last.outcome.value,
                             pids=list(state.last.pids))
                else:
                    await self._shutdown(host, state)
            except Exception as exc:  # one broken host must not kill the worker silently
                log.error("host os boot failed", host=host.name, error=str(exc))
                state.last = BootReport(BootOutcome.FAILED, notes=(f"boot failed: {exc}",))
            if state.want_on == wanted:
                return

    # --- shutdown ------------------------------------------------------------

    async def _shutdown(self, host: EmulatedHost, state: _HostOS) -> None:
        root = self.root(host)
        known = {p.pid for p in state.processes}
        leftovers = [_Process(pid) for pid in _read_pids(root) if pid not in known
                     and _runs_in(pid, root)]
        processes = [*state.processes, *leftovers]
        if processes:
            log.info("host os shutting down", host=host.name, pids=[p.pid for p in processes])
        await self._stop_processes(processes)
        await self._stop_static_pods(root)
        state.processes = []
        (root / PID_FILE).unlink(missing_ok=True)

    async def _stop_static_pods(self, root: Path) -> None:
        """Stop what the host's kubelet started (``run/static-pods/*.json``) and
        outlived its agent: each process alone (it is no group leader)."""
        pids: list[int] = []
        for path in sorted((root / STATIC_PODS_DIR).glob("*.json")):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                pid = int(json.loads(path.read_text())["pid"])
                if procfs.alive(pid) and os.fsencode(str(root)) in procfs.cmdline(pid):
                    pids.append(pid)
            path.unlink(missing_ok=True)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while any(procfs.alive(p) for p in pids) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls pids
            await asyncio.sleep(0.05)
        for pid in pids:
            if procfs.alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    async def _stop_processes(self, processes: list[_Process]) -> None:
        for proc in processes:
            if proc.is_alive():
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls pids
            await asyncio.sleep(0.05)
        for proc in processes:
            # Only live leaders: a dead one's pid (= its group id) may be reused.
            if proc.is_alive():
                _signal_group(proc.pid, signal.SIGKILL)
        for proc in processes:
            if proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    await asyncio.to_thread(proc.popen.wait, 5.0)

    # --- boot (blocking; runs in a thread) -------------------------------------

    def _boot(self, host: EmulatedHost, state: _HostOS) -> BootReport:
        alive = [p for p in state.processes if p.is_alive()]
        if alive:
            return BootReport(BootOutcome.ALREADY_RUNNING, tuple(p.pid for p in alive))
        state.processes = []
        root = self.root(host)
        install = self._find_install(host)
        if install is None:
            self._wipe(root)
            return BootReport(BootOutcome.NO_OS, notes=("no disk holds an image",))
        disk, install_id = install
        fresh = _read_text(root / INSTALL_ID_FILE) != install_id
        if fresh:
            self._wipe(root)
        else:
            adopted = [_Process(pid) for pid in _read_pids(root) if _runs_in(pid, root)]
            if adopted:
                state.processes = adopted
                return BootReport(BootOutcome.ADOPTED, tuple(p.pid for p in adopted))
        root.mkdir(parents=True, exist_ok=True)
        self._link_disks(host, disk, root)
        cloud_log = _Journal(root / CLOUD_INIT_LOG)
        cloud_log.add(f"boot from {disk.name}" + (" (first boot)" if fresh else ""))
        drive = self._read_drive(host, disk, cloud_log)
        config = parse_user_data(drive.user_data) if drive and drive.user_data else None
        if fresh:
            self._first_boot(root, drive, config, cloud_log)
            _write_atomic(root / INSTALL_ID_FILE, install_id.encode(), 0o644)
        boot_id = str(uuid.uuid4())
        _write_atomic(root / BOOT_ID_FILE, f"{boot_id}\n".encode(), 0o644)
        with contextlib.suppress(FileNotFoundError):
            (root / REBOOT_REQUIRED_FILE).unlink()
        cloud_log.add(f"boot id {boot_id}")
        _write_atomic(root / HARDWARE_FILE,
                      json.dumps(hardware_document(host), indent=2).encode() + b"\n", 0o644)
        for argv in config.runcmd if config else ():
            if not is_racksmith_command(argv):
                continue
            try:
                state.processes.append(self._start(root, argv, cloud_log))
            except (PathEscape, OSError) as exc:
                cloud_log.add(f"runcmd {shlex.join(argv)}: not started: {exc}")
        pid_text = "".join(f"{p.pid}\n" for p in state.processes)
        _write_atomic(root / PID_FILE, pid_text.encode(), 0o644)
        return BootReport(BootOutcome.BOOTED, tuple(p.pid for p in state.processes),
                          tuple(cloud_log.lines))

    def _find_install(self, host: EmulatedHost) -> tuple[DiskInfo, str] | None:
        """The disk booted from and an id of its install: the first disk
        with a config drive and an image, else the first with an image."""
        with_image = [d for d in host.inventory.disks if self._has_image(host, d)]
        if not with_image:
            return None
        with_drive = [d for d in with_image if self.disks.configdrive_path(host, d).exists()]
        disk = (with_drive or with_image)[0]
        digest = hashlib.sha256(disk.name.encode())
        path = self.disks.disk_path(host, disk)
        digest.update(str(path.stat().st_mtime_ns).encode())
        with path.open("rb") as f:
            digest.update(f.read(METADATA_BYTES))
        drive = self.disks.configdrive_path(host, disk)
        if with_drive:
            digest.update(str(drive.stat().st_mtime_ns).encode())
            digest.update(drive.read_bytes())
        return disk, digest.hexdigest()

    def _link_disks(self, host: EmulatedHost, boot_disk: DiskInfo, root: Path) -> None:
        """``<root>/dev/<disk>`` → the disk file, for every disk but the one
        booted from (the OS's devices, e.g. for a rawBlockDevice Volume)."""
        self.disks.ensure(host)
        for disk in host.inventory.disks:
            if disk.name == boot_disk.name:
                continue
            link = root / "dev" / disk.short_name
            target = self.disks.disk_path(host, disk).resolve()
            if link.is_symlink() and Path(os.readlink(link)) == target:
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f".{link.name}.tmp")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            os.replace(tmp, link)

    def _has_image(self, host: EmulatedHost, disk: DiskInfo) -> bool:
        # Cleaning zeroes the first MiB; a fresh disk is all zeros.
        try:
            with self.disks.disk_path(host, disk).open("rb") as f:
                head = f.read(METADATA_BYTES)
        except FileNotFoundError:
            return False
        return head.count(0) != len(head)

    def _read_drive(self, host: EmulatedHost, disk: DiskInfo,
                    cloud_log: _Journal) -> ConfigDrive | None:
        path = self.disks.configdrive_path(host, disk)
        try:
            return read_configdrive(path.read_bytes())
        except FileNotFoundError:
            cloud_log.add("no config drive: no datasource")
        except ConfigDriveError as exc:
            cloud_log.add(f"config drive not usable: {exc}")
        return None

    def _first_boot(self, root: Path, drive: ConfigDrive | None, config: CloudConfig | None,
                    cloud_log: _Journal) -> None:
        """cloud-init's once-per-instance work."""
        if drive is None:
            return
        instance = root / INSTANCE_DIR
        if drive.user_data is not None:
            _write_atomic(instance / "user-data.txt", drive.user_data, 0o600)
        _write_atomic(instance / "meta_data.json", json.dumps(drive.meta_data).encode(), 0o644)
        _write_atomic(instance / "network_data.json",
                      json.dumps(drive.network_data).encode(), 0o644)
        hostname = drive.meta_data.get("hostname") or drive.meta_data.get("name")
        if isinstance(hostname, str) and hostname:
            _write_atomic(root / "etc/hostname", f"{hostname}\n".encode(), 0o644)
        if drive.user_data is None:
            cloud_log.add("no user data")
            return
        if config is None:
            cloud_log.add("user data is not #cloud-config: saved, not run")
            return
        for problem in config.problems:
            cloud_log.add(f"cloud-config: {problem}")
        for item in config.write_files:
            try:
                target = resolve_in_root(root, item.path)
                if item.append:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with target.open("ab") as f:
                        f.write(item.content)
                    target.chmod(item.mode)
                else:
                    _write_atomic(target, item.content, item.mode)
                cloud_log.add(f"write_files: {item.path} ({oct(item.mode)})")
            except (PathEscape, OSError) as exc:
                cloud_log.add(f"write_files: {item.path}: refused: {exc}")
        for argv in config.runcmd:
            if not is_racksmith_command(argv):
                cloud_log.add(f"runcmd (not run): {shlex.join(argv)}")

    def _start(self, root: Path, runcmd: Sequence[str], cloud_log: _Journal) -> _Process:
        argv = agent_argv(self.command, root, runcmd)
        log_path = root / AGENT_LOG
        log_path.parent.mkdir(parents=True, exist_ok=True)
        (root / PID_FILE).parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            env = None
            if self.network_file is not None:
                env = {**os.environ, NETWORK_ENV: str(self.network_file)}
            popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=root, start_new_session=True, env=env,
                # A real host's umask, not the emulator's private one: the
                # root reproduces a host (racksmith.filemodes).
                umask=HOST_UMASK,
            )
        cloud_log.add(f"runcmd started (pid {popen.pid}): {shlex.join(runcmd)}")
        return _Process(popen.pid, popen)

    def _wipe(self, root: Path) -> None:
        if root.exists():
            # Processes of a gone install must not write into the new root.
            for pid in _read_pids(root):
                if _runs_in(pid, root):
                    _signal_group(pid, signal.SIGKILL)
            shutil.rmtree(root)
            log.info("host os root wiped", root=str(root))


class _Journal:
    """Lines appended to a log file under the root, also kept for the report."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_pids(root: Path) -> list[int]:
    text = _read_text(root / PID_FILE) or ""
    return [int(word) for word in text.split() if word.isdigit()]


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)  # O_CREAT's mode is filtered by the umask
    os.replace(tmp, path)
