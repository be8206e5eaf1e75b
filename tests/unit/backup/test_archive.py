"""Backups of a data dir (racksmith.backup): create, verify, restore, and
every refusal with nothing changed. Real files, a real SQLite store."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from racksmith import datalock
from racksmith.apiserver.store.base import Key
from racksmith.apiserver.store.sqlite import SqliteStore, inspect_file
from racksmith.backup import archive, crypto
from racksmith.backup.archive import (
    BackupError,
    create_backup,
    read_manifest,
    restore_backup,
    verify_backup,
)
from racksmith.backup.crypto import CannotDecrypt, KeyFileError, load_key

KEY = b"k" * 32


async def make_data_dir(path: Path, objects: int = 20) -> Path:
    _folder(path)
    store = SqliteStore(path / "store.db")
    await store.open()
    for i in range(objects):
        await store.create(Key("core/configmaps", "default", f"cm-{i}"),
                           {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": f"cm-{i}", "namespace": "default"}})
    await store.close()
    return _files(path)


def _folder(path: Path) -> None:
    path.mkdir(mode=0o700)


def _files(path: Path) -> Path:
    (path / "pki").mkdir(mode=0o700)
    (path / "pki" / "ca.key").write_text("CA KEY")
    (path / "tokens.csv").write_text("tok,racksmith-admin,uid,\"system:masters\"\n")
    (path / "ironic").mkdir(mode=0o700)
    (path / "ironic" / "ironic.log").write_text("ironic's log\n")
    (path / "emulator").mkdir(mode=0o700)
    (path / "emulator" / "disk.img").write_bytes(b"\0" * 4096)
    (path / "audit").mkdir(mode=0o700)
    (path / "audit" / "audit.log").write_text("{}\n")
    return path


def tree(path: Path) -> dict[str, str]:
    """Every file of ``path`` and a digest of its content (what "unchanged"
    means; the lock file is the holder's, not data)."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and p.name != datalock.LOCK_FILE}


@pytest.fixture
async def data(tmp_path: Path) -> Path:
    return await make_data_dir(tmp_path / "data")


def test_a_backup_holds_the_store_at_one_resource_version_and_verifies(
        data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "b.tar"
    info = create_backup(data, out)
    assert info.path == out and out.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o700
    m = info.manifest
    assert (m.objects, m.resource_version, m.encrypted) == (20, 20, False)
    assert {p.name for p in m.parts} == {"store.db", "pki/ca.key", "tokens.csv"}
    assert info.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    verified = verify_backup(out)
    try:
        assert verified.integrity == ["ok"]
        assert verified.info.manifest == m
    finally:
        verified.close()
    assert not verified.folder.exists()
    assert read_manifest(out) == m
    assert list((tmp_path / "out").iterdir()) == [out]  # no temporary left


def test_an_encrypted_backup_needs_its_key(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.tar.enc"
    create_backup(data, out, key=KEY)
    assert crypto.is_encrypted(out) and b"CA KEY" not in out.read_bytes()
    verify_backup(out, key=KEY).close()
    with pytest.raises(CannotDecrypt, match="no key file"):
        verify_backup(out)
    with pytest.raises(CannotDecrypt, match="cannot decrypt"):
        verify_backup(out, key=b"x" * 32)
    cut = tmp_path / "cut.tar.enc"
    cut.write_bytes(out.read_bytes()[:-100])
    with pytest.raises(CannotDecrypt):
        verify_backup(cut, key=KEY)
    assert read_manifest(out) is None


def test_the_stream_cipher_refuses_reordered_or_dropped_chunks(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(os.urandom(crypto.CHUNK * 2 + 10))
    sealed = io.BytesIO()
    crypto.encrypt_file(plain, sealed, KEY)
    data = sealed.getvalue()
    head, body = data[:24], data[24:]
    size = crypto.CHUNK + crypto.TAG
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    assert len(chunks) == 3
    for damaged in (head + chunks[1] + chunks[0] + chunks[2], head + chunks[0] + chunks[1]):
        (tmp_path / "x").write_bytes(damaged)
        with pytest.raises(CannotDecrypt):
            crypto.decrypt_file(tmp_path / "x", io.BytesIO(), KEY)
    (tmp_path / "x").write_bytes(data)
    out = io.BytesIO()
    crypto.decrypt_file(tmp_path / "x", out, KEY)
    assert out.getvalue() == plain.read_bytes()


def test_a_key_file_too_short_or_missing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "short").write_bytes(b"x" * 31)
    with pytest.raises(KeyFileError, match="at least 32"):
        load_key(tmp_path / "short")
    with pytest.raises(KeyFileError, match="cannot read"):
        load_key(tmp_path / "missing")


def test_a_flipped_byte_names_the_damaged_part(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    create_backup(data, out)
    with tarfile.open(out) as tar:
        member = tar.getmember("store.db")
        offset = member.offset_data + 100
    raw = bytearray(out.read_bytes())
    raw[offset] ^= 0xFF
    out.write_bytes(bytes(raw))
    with pytest.raises(BackupError, match=r"part store\.db: checksum mismatch"):
        verify_backup(out)


def _rewrite_manifest(path: Path, **changes: Any) -> None:
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
                   for m in tar.getmembers()]
    with tarfile.open(path, "w") as tar:
        for member, content in members:
            if member.name == "manifest.json" and content is not None:
                manifest = json.loads(content)
                manifest.update(changes)
                content = json.dumps(manifest).encode()
                member.size = len(content)
            tar.addfile(member, io.BytesIO(content) if content is not None else None)


@pytest.mark.parametrize("changes", [{"racksmith": "99.0.0"}, {"format": 2}, {"schema": 9}])
def test_a_backup_from_a_newer_racksmith_is_refused(data: Path, tmp_path: Path,
                                                    changes: dict[str, Any]) -> None:
    out = tmp_path / "b.tar"
    create_backup(data, out)
    _rewrite_manifest(out, **changes)
    with pytest.raises(BackupError, match="version skew"):
        verify_backup(out)


def test_create_interrupted_leaves_no_file(data: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: Any) -> None:
        raise KeyboardInterrupt  # killed while writing

    monkeypatch.setattr(archive, "encrypt_file", boom)
    with pytest.raises(KeyboardInterrupt):
        create_backup(data, tmp_path / "b.tar.enc", key=KEY)
    assert list(tmp_path.iterdir()) == [data]
    with pytest.raises(BackupError, match="exists already"):
        create_backup(data, data / "store.db")
    with pytest.raises(BackupError, match="no API store"):
        create_backup(tmp_path / "nothing", tmp_path / "x.tar")


async def test_restore_swaps_in_the_backup_and_keeps_the_rest(data: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    create_backup(data, out)
    store = SqliteStore(data / "store.db")
    await store.open()
    await store.create(Key("core/configmaps", "default", "marker"),
                       {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "marker", "namespace": "default"}})
    await store.close()
    (data / "tokens.csv").write_text("changed later\n")
    (data / "emulator" / "disk.img").write_bytes(b"\1" * 4096)  # the hardware moved on
    before = tree(data)
    done = restore_backup(out, data)
    assert done.previous is not None and tree(done.previous) == before
    facts = inspect_file(data / "store.db")
    assert (facts.objects, facts.resource_version) == (20, 20)  # the marker is gone
    assert (data / "tokens.csv").read_text().startswith("tok,")
    _check_kept(data)


def _check_kept(data: Path) -> None:
    assert (data / "emulator" / "disk.img").read_bytes() == b"\1" * 4096  # kept
    assert (data / "audit" / "audit.log").exists() and (data / "ironic" / "ironic.log").exists()
    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "store.db").stat().st_mode & 0o777 == 0o600


def test_a_restore_that_fails_or_is_refused_changes_nothing(data: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    create_backup(data, out)
    before = tree(data)
    siblings = sorted(p.name for p in tmp_path.iterdir())

    def fail() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        restore_backup(out, data, before_swap=fail)
    assert tree(data) == before and sorted(p.name for p in tmp_path.iterdir()) == siblings
    fd = datalock.hold(data)  # a server runs on it
    try:
        with pytest.raises(BackupError, match="a Racksmith server runs on"):
            restore_backup(out, data)
    finally:
        os.close(fd)
    bad = tmp_path / "bad.tar"
    raw = bytearray(out.read_bytes())
    raw[len(raw) // 2] ^= 1
    bad.write_bytes(bytes(raw))
    with pytest.raises(BackupError):
        restore_backup(bad, data)
    assert tree(data) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*siblings, "bad.tar"])


def test_restore_into_a_new_machine_makes_the_data_dir(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.tar.enc"
    create_backup(data, out, key=KEY)
    fresh = tmp_path / "new-seed" / "data"
    done = restore_backup(out, fresh, key=KEY)
    assert done.previous is None
    assert inspect_file(fresh / "store.db").objects == 20
    assert (fresh / "pki" / "ca.key").read_text() == "CA KEY"


def test_the_data_dir_lock_names_its_holder(tmp_path: Path) -> None:
    assert datalock.holder(tmp_path) is None
    fd = datalock.hold(tmp_path)
    try:
        assert datalock.holder(tmp_path) == os.getpid()
        with pytest.raises(datalock.DataDirBusy, match=str(os.getpid())):
            datalock.hold(tmp_path)
    finally:
        os.close(fd)
    assert datalock.holder(tmp_path) is None


def _ironic(path: Path, nodes: dict[str, str]) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS nodes (name TEXT, provision_state TEXT)")
    conn.execute("DELETE FROM nodes")
    conn.executemany("INSERT INTO nodes VALUES (?, ?)", list(nodes.items()))
    conn.commit()
    conn.close()


def test_a_restore_names_the_hosts_deployed_after_the_backup(data: Path,
                                                             tmp_path: Path) -> None:
    _ironic(data / "ironic" / "ironic.sqlite",
            {"default~h1": "active", "default~h2": "available", "default~h3": "available"})
    out = tmp_path / "b.tar"
    info = create_backup(data, out)
    assert "ironic/ironic.sqlite" in {p.name for p in info.manifest.parts}
    # after the backup: h2 deployed, h1 undeployed
    _ironic(data / "ironic" / "ironic.sqlite",
            {"default~h1": "available", "default~h2": "active", "default~h3": "available"})
    done = restore_backup(out, data)
    assert done.deployed_since == ("default/h2",)
    report = json.loads((data / archive.REPORT).read_text())
    assert report["deployedSinceBackup"] == ["default/h2"]
    assert (data / archive.REPORT).stat().st_mode & 0o777 == 0o600
    assert done.previous is not None and not (done.previous / archive.REPORT).exists()
