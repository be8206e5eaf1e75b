"""Backups of a data dir: create, verify, restore.

Owns the archive format and the three operations behind ``racksmith backup
create``, ``racksmith backup verify`` and ``racksmith restore``.

A backup is one file (0600): a POSIX tar (not compressed, so a damaged byte
is found in the part that holds it) of

* ``manifest.json`` — format, the Racksmith version and store schema that
  wrote it, the store's resourceVersion and object count, the time, and the
  size and sha256 of every other part;
* ``store.db`` — the API store, copied with SQLite's online backup in one
  read transaction (a snapshot at one resourceVersion, taken while the
  server writes on; never a file copy, which could be torn);
* ``ironic/ironic.sqlite`` — Ironic's database, copied the same way right
  after the store (so the two are minutes-of-work apart at most: what Ironic
  did in between, the controllers see and reconcile, level-based);
* ``pki/`` (the CA, the serving certificate, the ServiceAccount signing
  key), ``tokens.csv``, ``users/`` and ``kubeconfig`` (who may log in), and
  ``ports.json`` (the ports that are written into stored state).

Not in it: the emulated datacenter (``emulator/``: the "hardware"), Ironic's
images and logs, the audit trail, other backups. With a key file the whole
tar is encrypted (:mod:`racksmith.backup.crypto`); the key is never written
into the backup or next to it.

Every file is written under a temporary name in the destination's folder
and renamed at the end, so an interrupted ``create`` leaves no file that
looks like a backup. ``verify`` decrypts and unpacks into a private
temporary folder, checks every part against the manifest (naming the part
whose checksum fails), refuses a backup of a newer format, Racksmith or
store schema (version skew), and opens the store read-only with SQLite's
integrity check, counting its objects; it changes nothing anywhere.
``restore`` refuses while a server (or the Ironic or virtual datacenter it
started) runs on the data dir, verifies first, builds the restored data dir
beside it — the backup's parts, plus everything else of the current data dir
(copied; large files hard-linked) — and swaps it in atomically
(``renameat2(RENAME_EXCHANGE)``), keeping the previous one as
``DATA.pre-restore-<time>``; a failure at any point before the swap leaves
the data dir exactly as it was. Hosts Ironic had deployed when the restore
ran but the backup knew as not deployed — provisioned after the backup — are
named in ``DATA/restore-report.json``; ``racksmith up`` detaches them at its
next start, with a condition saying why, so that nothing deploys over them
unnoticed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racksmith import __version__, datalock, filemodes
from racksmith.apiserver.store.sqlite import (
    SCHEMA_VERSION,
    inspect_file,
    online_copy,
    snapshot_file,
)
from racksmith.backup.crypto import CannotDecrypt, decrypt_file, encrypt_file, is_encrypted

FORMAT = 1
MANIFEST = "manifest.json"
STORE = "store.db"
IRONIC_DB = "ironic/ironic.sqlite"
COPIED = ("tokens.csv", "kubeconfig", "ports.json")
COPIED_DIRS = ("pki", "users")
RESTORED = (STORE, IRONIC_DB, *COPIED, *COPIED_DIRS)
"""What a restore replaces in the data dir (the rest is kept as it is)."""
HARDLINK_ABOVE = 64 << 20
"""Files of the data dir larger than this are hard-linked into the restored
one (disk images of the emulated hosts), not copied."""

Progress = Callable[[str], None]


class BackupError(Exception):
    """A backup cannot be made, read or restored (the message says why)."""


@dataclass(frozen=True)
class Part:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What a backup holds (``manifest.json``)."""

    format: int
    racksmith: str
    schema: int
    resource_version: int
    objects: int
    created: str
    encrypted: bool
    parts: tuple[Part, ...] = ()

    def to_json(self) -> bytes:
        return json.dumps({
            "format": self.format, "racksmith": self.racksmith, "schema": self.schema,
            "resourceVersion": self.resource_version, "objects": self.objects,
            "created": self.created, "encrypted": self.encrypted,
            "parts": [{"name": p.name, "size": p.size, "sha256": p.sha256}
                      for p in self.parts]}, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        try:
            raw = json.loads(data)
            return cls(format=int(raw["format"]), racksmith=str(raw["racksmith"]),
                       schema=int(raw["schema"]),
                       resource_version=int(raw["resourceVersion"]),
                       objects=int(raw["objects"]), created=str(raw["created"]),
                       encrypted=bool(raw.get("encrypted", False)),
                       parts=tuple(Part(str(p["name"]), int(p["size"]), str(p["sha256"]))
                                   for p in raw["parts"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BackupError(f"part {MANIFEST}: not a Racksmith backup manifest "
                              f"({type(exc).__name__})") from None


@dataclass(frozen=True)
class BackupInfo:
    """A backup file and what it holds."""

    path: Path
    size: int
    sha256: str
    manifest: Manifest


@dataclass
class Verified:
    """A verified backup, unpacked into ``folder`` (private; removed on close)."""

    info: BackupInfo
    folder: Path
    integrity: list[str] = field(default_factory=list)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _stamp(at: dt.datetime) -> str:
    return at.strftime("%Y%m%dT%H%M%SZ")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _version(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def default_name(at: dt.datetime, encrypted: bool) -> str:
    return f"racksmith-{_stamp(at)}.tar" + (".enc" if encrypted else "")


# ------------------------------------------------------------------ create


def create_backup(data_dir: Path, output: Path, *, key: bytes | None = None,
                  progress: Progress = lambda _step: None) -> BackupInfo:
    """Take a backup of ``data_dir`` into ``output`` (see the module doc)."""
    store = data_dir / STORE
    if not store.is_file():
        raise BackupError(f"{data_dir} holds no API store ({STORE}): nothing to back up")
    if output.exists():
        raise BackupError(f"{output} exists already")
    if not output.parent.exists():
        output.parent.mkdir(mode=0o700, parents=True)
    work = Path(tempfile.mkdtemp(dir=output.parent, prefix=".racksmith-backup-"))
    try:
        parts = work / "parts"
        parts.mkdir(mode=0o700)
        progress("snapshot of the API store")
        rv = snapshot_file(store, parts / STORE)
        facts = inspect_file(parts / STORE, check=False)
        ironic = data_dir / IRONIC_DB
        if ironic.is_file():
            progress("snapshot of Ironic's database")
            (parts / "ironic").mkdir(mode=0o700)
            online_copy(ironic, parts / IRONIC_DB)
        progress("PKI, tokens and settings")
        for name in COPIED:
            if (data_dir / name).is_file():
                shutil.copyfile(data_dir / name, parts / name)
        for name in COPIED_DIRS:
            if (data_dir / name).is_dir():
                shutil.copytree(data_dir / name, parts / name)
        listed = sorted(p for p in parts.rglob("*") if p.is_file())
        manifest = Manifest(
            format=FORMAT, racksmith=__version__, schema=facts.schema, resource_version=rv,
            objects=facts.objects, created=_now().isoformat(timespec="seconds"),
            encrypted=key is not None,
            parts=tuple(Part(str(p.relative_to(parts)), p.stat().st_size, sha256_of(p))
                        for p in listed))
        (parts / MANIFEST).write_bytes(manifest.to_json())
        progress("archive")
        tar_path = work / "backup.tar"
        with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(parts / MANIFEST, arcname=MANIFEST)
            for path in listed:
                tar.add(path, arcname=str(path.relative_to(parts)), recursive=False)
        partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                if key is not None:
                    progress("encryption")
                    encrypt_file(tar_path, out, key)
                else:
                    with tar_path.open("rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, output)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        with contextlib.suppress(OSError):
            dirfd = os.open(output.parent, os.O_RDONLY)
            os.fsync(dirfd)
            os.close(dirfd)
        return BackupInfo(output, output.stat().st_size, sha256_of(output), manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ verify


def _safe_members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    for member in tar.getmembers():
        name = Path(member.name)
        if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
            raise BackupError(f"part {member.name}: not allowed in a backup")
        yield member


def verify_backup(path: Path, *, key: bytes | None = None, scratch: Path | None = None,
                  progress: Progress = lambda _step: None) -> Verified:
    """Check the backup at ``path`` and unpack it (see the module doc); close
    the answer to remove the unpacked copy. Raises :class:`BackupError` (or
    :class:`racksmith.backup.crypto.CannotDecrypt`)."""
    if not path.is_file():
        raise BackupError(f"{path}: no such backup file")
    folder = Path(tempfile.mkdtemp(dir=scratch, prefix=".racksmith-verify-"))
    try:
        tar_path = path
        if is_encrypted(path):
            if key is None:
                raise CannotDecrypt(f"cannot decrypt {path}: it is encrypted and no key "
                                    "file was given (--key-file)")
            progress("decryption")
            tar_path = folder / "backup.tar"
            fd = os.open(tar_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                decrypt_file(path, out, key)
        progress("unpacking")
        parts = folder / "parts"
        parts.mkdir(mode=0o700)
        try:
            with tarfile.open(tar_path, "r:") as tar:
                members = list(_safe_members(tar))
                tar.extractall(parts, members=members, filter="data")
        except tarfile.TarError as exc:
            raise BackupError(f"{path} is not a readable backup archive: {exc}") from None
        if tar_path != path:
            tar_path.unlink()
        manifest_file = parts / MANIFEST
        if not manifest_file.is_file():
            raise BackupError(f"part {MANIFEST}: missing: not a Racksmith backup")
        manifest = Manifest.from_json(manifest_file.read_bytes())
        _check_versions(manifest)
        progress("checksums")
        listed = {p.name for p in manifest.parts}
        for part in manifest.parts:
            file = parts / part.name
            if not file.is_file():
                raise BackupError(f"part {part.name}: missing from the archive")
            if file.stat().st_size != part.size or sha256_of(file) != part.sha256:
                raise BackupError(f"part {part.name}: checksum mismatch (the file was "
                                  "damaged or changed)")
        extra = sorted(str(p.relative_to(parts)) for p in parts.rglob("*")
                       if p.is_file() and str(p.relative_to(parts)) not in listed
                       and p.name != MANIFEST)
        if extra:
            raise BackupError(f"part {extra[0]}: not in the manifest")
        if STORE not in listed:
            raise BackupError(f"part {STORE}: missing from the manifest")
        progress("integrity check of the store")
        try:
            facts = inspect_file(parts / STORE)
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"part {STORE}: not a readable store: {exc}") from None
        if facts.integrity != ["ok"]:
            raise BackupError(f"part {STORE}: integrity check failed: {facts.integrity[:3]}")
        if (facts.objects, facts.resource_version) != (manifest.objects,
                                                       manifest.resource_version):
            raise BackupError(f"part {STORE}: holds {facts.objects} objects at "
                              f"resourceVersion {facts.resource_version}, the manifest says "
                              f"{manifest.objects} at {manifest.resource_version}")
        info = BackupInfo(path, path.stat().st_size, sha256_of(path), manifest)
        return Verified(info, folder, facts.integrity)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _check_versions(manifest: Manifest) -> None:
    if manifest.format > FORMAT:
        raise BackupError(f"version skew: backup format {manifest.format} is newer than this "
                          f"Racksmith reads ({FORMAT}); restore it with Racksmith "
                          f"{manifest.racksmith} or newer")
    if _version(manifest.racksmith) > _version(__version__):
        raise BackupError(f"version skew: the backup was made by Racksmith "
                          f"{manifest.racksmith}, newer than this one ({__version__}); "
                          "upgrade Racksmith first")
    if manifest.schema > SCHEMA_VERSION:
        raise BackupError(f"version skew: the backup's store schema {manifest.schema} is "
                          f"newer than this Racksmith's ({SCHEMA_VERSION})")


# ------------------------------------------------------------------ restore


def running_here(data_dir: Path) -> str | None:
    """What runs on ``data_dir`` (a server, or the Ironic or virtual
    datacenter it started), or None."""
    pid = datalock.holder(data_dir)
    if pid is not None:
        return f"a Racksmith server runs on {data_dir}" + (f" (pid {pid})" if pid else "")
    for what, pid_file in (("Ironic", data_dir / "ironic" / "ironic.pid"),
                           ("the virtual datacenter", data_dir / "emulator" / "emulator.pid")):
        with contextlib.suppress(OSError, ValueError):
            pgid = int(pid_file.read_text().strip())
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, 0)
                return (f"{what} started by Racksmith still runs on {data_dir} (process "
                        f"group {pgid}); stop racksmith up cleanly (Ctrl-C) first")
    return None


def _restored(relative: Path) -> bool:
    text = str(relative)
    return any(text == r or text.startswith(f"{r}/") or text.startswith(f"{r}-")
               for r in RESTORED) or text in (datalock.LOCK_FILE, REPORT)


def _carry_over(old: Path, new: Path) -> None:
    """Everything of ``old`` the backup does not replace, into ``new``: files
    copied (large ones hard-linked), modes kept, symlinks as they are."""
    for root, dirs, files in os.walk(old):
        rel_root = Path(root).relative_to(old)
        for name in list(dirs):
            rel = rel_root / name
            src = Path(root) / name
            if _restored(rel):
                dirs.remove(name)
                continue
            if src.is_symlink():
                os.symlink(os.readlink(src), new / rel)
                dirs.remove(name)
                continue
            (new / rel).mkdir(mode=src.stat().st_mode & 0o7777)
        for name in files:
            rel = rel_root / name
            if _restored(rel):
                continue
            src, dst = Path(root) / name, new / rel
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif src.stat().st_size > HARDLINK_ABOVE:
                os.link(src, dst)
            else:
                shutil.copy2(src, dst)


_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically (Linux renameat2); False when the
    system cannot."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not supported here
            return False
        raise OSError(err, os.strerror(err))
    return True


REPORT = "restore-report.json"
"""Written into the restored data dir: what the restore found out of step
with the hardware (read by ``racksmith up`` at its next start)."""


@dataclass(frozen=True)
class Restored:
    data_dir: Path
    previous: Path | None
    manifest: Manifest
    deployed_since: tuple[str, ...] = ()
    """Hosts (``namespace/name``) deployed when the restore ran that the
    backup knew as not deployed: provisioned after the backup."""


def _deployed(ironic_db: Path) -> dict[str, str]:
    """Ironic's node names (``namespace~name``) and provision states."""
    if not ironic_db.is_file():
        return {}
    with contextlib.suppress(sqlite3.DatabaseError):
        conn = sqlite3.connect(f"file:{ironic_db}?mode=ro", uri=True, timeout=30.0)
        try:
            return {str(name): str(state) for name, state in
                    conn.execute("SELECT name, provision_state FROM nodes WHERE name IS NOT NULL")}
        finally:
            conn.close()
    return {}


def deployed_since(current: Path, restored: Path) -> list[str]:
    """Hosts deployed in Ironic's ``current`` database but not in the
    ``restored`` one, as ``namespace/name`` (their node names are
    ``namespace~name``)."""
    now, then = _deployed(current), _deployed(restored)
    return sorted(name.replace("~", "/", 1) for name, state in now.items()
                  if state == "active" and then.get(name) != "active")


def restore_backup(path: Path, data_dir: Path, *, key: bytes | None = None,
                   progress: Progress = lambda _step: None,
                   before_swap: Callable[[], None] = lambda: None) -> Restored:
    """Restore the backup at ``path`` into ``data_dir`` (see the module doc).
    ``before_swap``: called just before the swap (tests fail there)."""
    data_dir = data_dir.absolute()
    busy = running_here(data_dir) if data_dir.exists() else None
    if busy is not None:
        raise BackupError(f"refusing to restore: {busy}")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    stamp = _stamp(_now())
    verified = verify_backup(path, key=key, scratch=data_dir.parent, progress=progress)
    new = data_dir.parent / f".{data_dir.name}.restoring-{stamp}"
    try:
        progress("building the restored data dir")
        new.mkdir(mode=0o700)
        if data_dir.exists():
            _carry_over(data_dir, new)
        parts = verified.folder / "parts"
        for part in verified.info.manifest.parts:
            dst = new / part.name
            dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(parts / part.name, dst)
            os.chmod(dst, 0o600)
        since = deployed_since(data_dir / IRONIC_DB, new / IRONIC_DB)
        if since:
            filemodes.write_private(new / REPORT, json.dumps({
                "restoredAt": _now().isoformat(timespec="seconds"), "backup": str(path),
                "resourceVersion": verified.info.manifest.resource_version,
                "deployedSinceBackup": since}, indent=1))
        os.sync()
        busy = running_here(data_dir) if data_dir.exists() else None
        if busy is not None:
            raise BackupError(f"refusing to restore: {busy}")
        before_swap()
        progress("swapping it in")
        previous: Path | None = None
        if data_dir.exists():
            previous = data_dir.parent / f"{data_dir.name}.pre-restore-{stamp}"
            if _exchange(new, data_dir):
                os.rename(new, previous)
            else:
                os.rename(data_dir, previous)
                os.rename(new, data_dir)
        else:
            os.rename(new, data_dir)
        return Restored(data_dir, previous, verified.info.manifest, tuple(since))
    except BaseException:
        if new.exists():
            shutil.rmtree(new, ignore_errors=True)
        raise
    finally:
        verified.close()


def read_manifest(path: Path, key: bytes | None = None) -> Manifest | None:
    """The manifest of a backup without verifying it (None when it cannot be
    read): for listings."""
    with contextlib.suppress(OSError, tarfile.TarError, BackupError, CannotDecrypt):
        if is_encrypted(path):
            return None
        with tarfile.open(path, "r:") as tar:
            member = tar.extractfile(MANIFEST)
            if member is not None:
                return Manifest.from_json(member.read())
    return None


def describe(info: BackupInfo) -> dict[str, Any]:
    """A backup as the CLI prints it."""
    m = info.manifest
    return {"file": str(info.path), "size": info.size, "sha256": info.sha256,
            "resourceVersion": m.resource_version, "objects": m.objects,
            "created": m.created, "encrypted": m.encrypted, "racksmith": m.racksmith}
