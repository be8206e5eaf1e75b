"""Options of the command line that are wrong are usage errors (exit 2)
naming the valid values, before anything starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


def racksmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("command", "option", "value"), [
    ("apiserver", "--log-level", "chatty"),
    ("up", "--log-level", "verbose"),
    ("controllers", "--log-format", "xml"),
])
def test_an_unknown_log_level_or_format_is_refused(tmp_path: Path, command: str,
                                                   option: str, value: str) -> None:
    extra = ["--data-dir", str(tmp_path / "data")] if command != "controllers" else []
    res = racksmith(command, option, value, *extra)
    assert res.returncode == 2, res.stderr
    assert value in res.stderr and "must be one of" in res.stderr
    assert not (tmp_path / "data").exists()  # nothing started, nothing written


def test_up_refuses_a_bad_backup_interval_and_keep(tmp_path: Path) -> None:
    res = racksmith("up", "--backup-every", "often", "--data-dir", str(tmp_path / "d"))
    assert res.returncode == 2 and "not a duration" in res.stderr
    res = racksmith("up", "--backup-keep", "0", "--data-dir", str(tmp_path / "d"))
    assert res.returncode == 2 and "1 or more" in res.stderr
    assert not (tmp_path / "d").exists()


def test_status_exits_non_zero_and_says_why(server_process: object, tmp_path: Path) -> None:
    from tests.harness.process import ServerProc

    assert isinstance(server_process, ServerProc)
    res = racksmith("status", "--data-dir", str(server_process.data_dir))
    assert res.returncode == 1 and "no Cluster yet" in res.stdout
    res = racksmith("status", "--data-dir", str(server_process.data_dir), "--wait",
                    "--timeout", "1s")
    assert res.returncode == 1
    res = racksmith("status", "--timeout", "soon", "--wait")
    assert res.returncode == 2 and "not a duration" in res.stderr


def test_a_second_server_on_a_data_dir_in_use_is_refused(server_process: object) -> None:
    from tests.harness.process import ServerProc

    assert isinstance(server_process, ServerProc)
    res = racksmith("apiserver", "--data-dir", str(server_process.data_dir), "--port", "0")
    assert res.returncode == 1
    assert f"a Racksmith server runs on {server_process.data_dir}" in res.stderr
    assert str(server_process.proc.pid) in res.stderr


def _said(res: subprocess.CompletedProcess[str]) -> str:
    """stderr without the usage box's frame and line breaks."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", res.stderr).split())


def test_store_options_are_checked_before_anything_starts(tmp_path: Path) -> None:
    res = racksmith("up", "--apiserver-replicas", "2", "--data-dir", str(tmp_path / "d"))
    assert res.returncode == 2 and "add --store etcd" in _said(res)
    res = racksmith("up", "--store", "etcd", "--etcd-members", "2", "--data-dir",
                    str(tmp_path / "d"))
    assert res.returncode == 2 and "1, 3 or 5" in _said(res)
    res = racksmith("up", "--store", "etcd", "--backup-every", "1h", "--data-dir",
                    str(tmp_path / "d"))
    assert res.returncode == 2 and "etcdctl snapshot save" in _said(res)
    assert not (tmp_path / "d").exists()


def test_a_data_dir_keeps_the_store_it_was_made_with(tmp_path: Path) -> None:
    """Starting a SQLite site on etcd (or the reverse) would serve an empty
    site beside the real one: refused, naming what the data dir holds."""
    sqlite_site = tmp_path / "sqlite-site"
    sqlite_site.mkdir(mode=0o700)
    (sqlite_site / "store.db").write_bytes(b"")
    res = racksmith("up", "--store", "etcd", "--no-ironic", "--port", "0", "--data-dir",
                    str(sqlite_site))
    assert res.returncode == 1 and "holds a SQLite store" in res.stderr, res.stderr
    assert not (sqlite_site / "etcd").exists()
    etcd_site = tmp_path / "etcd-site"
    (etcd_site / "etcd").mkdir(parents=True, mode=0o700)
    (etcd_site / "etcd" / "cluster.json").write_text("{}")
    res = racksmith("up", "--no-ironic", "--port", "0", "--data-dir", str(etcd_site))
    assert res.returncode == 1 and "holds a local etcd cluster" in res.stderr, res.stderr
    assert not (etcd_site / "store.db").exists()
