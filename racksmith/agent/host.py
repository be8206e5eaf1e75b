"""The host seam: everything the agent reads or changes on the machine it runs on.

Owns the two implementations of :class:`Host`, which the executors
(``executors``) and the emulated kubelet (``kubelet``) call:

- :class:`RealHost` changes the real machine. Files are written for real
  (atomically, ``chmod``/``chown``); packages go through ``dpkg-query -W``
  and ``apt-get install -y name=version``; services through ``systemctl
  is-enabled|is-active`` and ``systemctl enable|disable|start|stop``; commands
  are run as given. Every process goes through one injectable
  :data:`Runner` (default :func:`run_process`, an asyncio subprocess with
  the default environment plus what the call adds), so tests replace it.
- :class:`EmulatedHost` never leaves ``root`` and never runs a process:
  files are written under ``root``; packages and services are JSON state in
  ``<root>/var/lib/racksmith/emulated/{packages,services}.json``; commands
  are appended to ``<root>/var/log/racksmith-commands.log`` (the journal).

Both resolve every path under ``root`` (``/`` for a real host by default):
a path must be absolute, and ``..`` may not climb out of the root. Every
method may be called repeatedly; the ``is_*``/``*_state`` methods only read.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import shlex
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "COMMAND_LOG",
    "EMULATED_STATE_DIR",
    "REBOOT_REQUIRED",
    "CommandResult",
    "EmulatedHost",
    "Host",
    "HostError",
    "RealHost",
    "Runner",
    "ServiceState",
    "render_argv",
    "run_process",
]

EMULATED_STATE_DIR = "/var/lib/racksmith/emulated"
COMMAND_LOG = "/var/log/racksmith-commands.log"
REBOOT_REQUIRED = "/var/run/reboot-required"
"""Exists while the host needs a reboot: touched when an item with
``requiresReboot`` changes the host (and by the distribution's own package
hooks); gone after a boot (tmpfs on a real host; the emulated boot deletes it)."""
_OUTPUT_LIMIT = 2000  # characters of stderr/stdout kept in an error message


class HostError(Exception):
    """A host operation failed; the message says what and why (shown in status)."""


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one process."""

    returncode: int
    stdout: str = ""
    stderr: str = ""

    def describe(self) -> str:
        """Exit code and the tail of the output, for error messages."""
        out = (self.stderr or self.stdout).strip()[-_OUTPUT_LIMIT:]
        return f"exit code {self.returncode}" + (f": {out}" if out else "")


@dataclass(frozen=True)
class ServiceState:
    """Whether a unit is enabled and running."""

    enabled: bool
    running: bool


#: Runs ``argv`` (no shell) with extra environment ``env``; never raises for a
#: nonzero exit, raises ``HostError`` when the program cannot be started.
Runner = Callable[[Sequence[str], Mapping[str, str] | None], Awaitable[CommandResult]]


async def run_process(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandResult:
    """The real :data:`Runner`: an asyncio subprocess, output captured."""
    environ = {**os.environ, **env} if env else None
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environ,
        )
    except OSError as exc:
        raise HostError(f"cannot run {render_argv(argv)}: {exc.strerror or exc}") from None
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    return CommandResult(
        proc.returncode if proc.returncode is not None else -1,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
    )


def render_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """``argv`` as a shell-quoted line, prefixed with ``env`` assignments."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*prefix, *(shlex.quote(a) for a in argv)])


class Host(ABC):
    """What the executors may do to a host (see the module docstring)."""

    emulated: bool

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def resolve(self, path: str) -> Path:
        """``path`` (absolute, as on the host) under ``root``.

        Raises ``HostError`` for a relative path or one escaping the root.
        """
        if not isinstance(path, str) or not path.startswith("/"):
            raise HostError(f"path {path!r} must be absolute")
        parts = PurePosixPath(path).parts[1:]
        if ".." in parts:
            raise HostError(f"path {path!r} must not contain '..'")
        return self.root.joinpath(*parts)

    # --- files -------------------------------------------------------------------

    def read_file(self, path: str) -> bytes | None:
        """The file's content, None if it does not exist."""
        target = self.resolve(path)
        try:
            return target.read_bytes()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise HostError(f"{path} is a directory") from None

    def exists(self, path: str) -> bool:
        return self.resolve(path).exists()

    def file_mode(self, path: str) -> int | None:
        """Permission bits of the file, None if it does not exist."""
        try:
            return self.resolve(path).stat().st_mode & 0o7777
        except FileNotFoundError:
            return None

    def write_file(self, path: str, content: bytes, mode: int) -> None:
        """Write ``content`` atomically (temp file in the same directory, rename)."""
        target = self.resolve(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, mode)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise HostError(f"cannot write {path}: {exc.strerror or exc}") from None

    def set_mode(self, path: str, mode: int) -> None:
        try:
            os.chmod(self.resolve(path), mode)
        except OSError as exc:
            raise HostError(f"cannot chmod {path}: {exc.strerror or exc}") from None

    def touch(self, path: str) -> None:
        """Create an empty file (and its directory) if missing."""
        target = self.resolve(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        except OSError as exc:
            raise HostError(f"cannot create {path}: {exc.strerror or exc}") from None

    @abstractmethod
    def file_owner(self, path: str) -> str | None:
        """``user:group`` of the file as this host tracks ownership (None: not tracked)."""

    @abstractmethod
    def set_owner(self, path: str, owner: str) -> None:
        """Make ``owner`` (``user`` or ``user:group``) own the file."""

    # --- packages and services -----------------------------------------------------

    @abstractmethod
    async def package_version(self, name: str) -> str | None:
        """Installed version of package ``name``, None if not installed."""

    @abstractmethod
    def install_package_argv(self, name: str, version: str | None) -> str:
        """The exact action installing the package (for plans and dry runs)."""

    @abstractmethod
    async def install_package(self, name: str, version: str | None) -> None:
        """Install ``name`` at ``version`` (any version when None)."""

    @abstractmethod
    async def service_state(self, name: str) -> ServiceState:
        """Whether unit ``name`` is enabled and running."""

    @abstractmethod
    def service_action(self, name: str, verb: str) -> str:
        """The exact action for ``verb`` (enable, disable, start, stop)."""

    @abstractmethod
    async def change_service(self, name: str, verb: str) -> None:
        """Do ``verb`` (enable, disable, start, stop) on unit ``name``."""

    # --- commands ------------------------------------------------------------------

    @abstractmethod
    def command_action(self, argv: Sequence[str]) -> str:
        """The exact action ``run_command(argv)`` takes (for plans and dry runs)."""

    @abstractmethod
    async def run_command(self, argv: Sequence[str]) -> CommandResult:
        """Run (real) or journal (emulated) ``argv``."""

    @abstractmethod
    async def guard_passes(self, unless: Sequence[str], command: Sequence[str]) -> bool:
        """The ``unless`` guard of ``command``: True means skip the command."""


class RealHost(Host):
    """The machine itself: real files, dpkg/apt, systemd and processes."""

    emulated = False
    APT_ENV: Mapping[str, str] = {"DEBIAN_FRONTEND": "noninteractive"}

    def __init__(self, root: Path = Path("/"), runner: Runner = run_process) -> None:
        super().__init__(root)
        self.runner = runner

    def file_owner(self, path: str) -> str | None:
        try:
            st = self.resolve(path).stat()
        except FileNotFoundError:
            return None
        return f"{_user_name(st.st_uid)}:{_group_name(st.st_gid)}"

    def set_owner(self, path: str, owner: str) -> None:
        user, _, group = owner.partition(":")
        try:
            os.chown(self.resolve(path), _uid(user), _gid(group) if group else -1)
        except (OSError, KeyError) as exc:
            raise HostError(f"cannot chown {path} to {owner}: {exc}") from None

    async def package_version(self, name: str) -> str | None:
        result = await self.runner(
            ["dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", name], None
        )
        if result.returncode != 0:
            return None
        status, _, version = result.stdout.strip().partition(" ")
        return version if status == "installed" else None

    def _apt_argv(self, name: str, version: str | None) -> list[str]:
        return ["apt-get", "install", "-y", f"{name}={version}" if version else name]

    def install_package_argv(self, name: str, version: str | None) -> str:
        return render_argv(self._apt_argv(name, version), self.APT_ENV)

    async def install_package(self, name: str, version: str | None) -> None:
        result = await self.runner(self._apt_argv(name, version), self.APT_ENV)
        if result.returncode != 0:
            raise HostError(f"{self.install_package_argv(name, version)}: {result.describe()}")

    async def service_state(self, name: str) -> ServiceState:
        enabled = await self.runner(["systemctl", "is-enabled", "--quiet", name], None)
        active = await self.runner(["systemctl", "is-active", "--quiet", name], None)
        return ServiceState(enabled.returncode == 0, active.returncode == 0)

    def service_action(self, name: str, verb: str) -> str:
        return render_argv(["systemctl", verb, name])

    async def change_service(self, name: str, verb: str) -> None:
        result = await self.runner(["systemctl", verb, name], None)
        if result.returncode != 0:
            raise HostError(f"{self.service_action(name, verb)}: {result.describe()}")

    def command_action(self, argv: Sequence[str]) -> str:
        return f"run {render_argv(argv)}"

    async def run_command(self, argv: Sequence[str]) -> CommandResult:
        return await self.runner(argv, None)

    async def guard_passes(self, unless: Sequence[str], command: Sequence[str]) -> bool:
        return (await self.runner(unless, None)).returncode == 0


class EmulatedHost(Host):
    """An emulated host: state under ``root`` only, no process is ever started."""

    emulated = True

    def resolve(self, path: str) -> Path:
        """As :meth:`Host.resolve`, and a symlink may not lead out of the root either."""
        target = super().resolve(path)
        if not target.resolve().is_relative_to(self.root):
            raise HostError(f"path {path!r} leads outside the emulated host's root")
        return target

    def file_owner(self, path: str) -> str | None:
        return None  # ownership is not emulated (the agent runs unprivileged)

    def set_owner(self, path: str, owner: str) -> None:
        return None

    # JSON state ------------------------------------------------------------------

    def _load(self, kind: str) -> dict[str, Any]:
        raw = self.read_file(f"{EMULATED_STATE_DIR}/{kind}.json")
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise HostError(f"{EMULATED_STATE_DIR}/{kind}.json is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HostError(f"{EMULATED_STATE_DIR}/{kind}.json must hold an object")
        return data

    def _save(self, kind: str, data: dict[str, Any]) -> None:
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        self.write_file(f"{EMULATED_STATE_DIR}/{kind}.json", text.encode(), 0o644)

    async def package_version(self, name: str) -> str | None:
        entry = self._load("packages").get(name)
        if entry is None:
            return None
        return str(entry.get("version") or "") if isinstance(entry, dict) else str(entry)

    def install_package_argv(self, name: str, version: str | None) -> str:
        return (
            f"record package {name}={version or '(any)'} in "
            f"{EMULATED_STATE_DIR}/packages.json"
        )

    async def install_package(self, name: str, version: str | None) -> None:
        packages = self._load("packages")
        packages[name] = {"version": version or ""}
        self._save("packages", packages)

    async def service_state(self, name: str) -> ServiceState:
        entry = self._load("services").get(name) or {}
        return ServiceState(bool(entry.get("enabled")), bool(entry.get("running")))

    def service_action(self, name: str, verb: str) -> str:
        return f"record service {name} {verb} in {EMULATED_STATE_DIR}/services.json"

    async def change_service(self, name: str, verb: str) -> None:
        services = self._load("services")
        entry = dict(services.get(name) or {"enabled": False, "running": False})
        field, value = _SERVICE_VERBS[verb]
        entry[field] = value
        services[name] = entry
        self._save("services", services)

    def command_action(self, argv: Sequence[str]) -> str:
        return f"journal {render_argv(argv)} to {COMMAND_LOG}"

    async def run_command(self, argv: Sequence[str]) -> CommandResult:
        target = self.resolve(COMMAND_LOG)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="utf-8") as fh:
                fh.write(render_argv(argv) + "\n")
        except OSError as exc:
            raise HostError(f"cannot write {COMMAND_LOG}: {exc.strerror or exc}") from None
        return CommandResult(0)

    async def guard_passes(self, unless: Sequence[str], command: Sequence[str]) -> bool:
        # The guard cannot run here; a journaled command counts as having taken effect.
        journal = self.read_file(COMMAND_LOG)
        if journal is None:
            return False
        return render_argv(command) in journal.decode(errors="replace").splitlines()


_SERVICE_VERBS = {
    "enable": ("enabled", True),
    "disable": ("enabled", False),
    "start": ("running", True),
    "stop": ("running", False),
    "reload-or-restart": ("running", True),
}


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _uid(user: str) -> int:
    return int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid


def _gid(group: str) -> int:
    return int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
