"""racksmith kubeconfig --merge (racksmith.app.kubeconfigs): the site's
contexts go into the user's kubeconfig, nothing else there changes, the file
stays 0600; and through the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from racksmith.app import kubeconfigs

SITE = {"apiVersion": "v1", "kind": "Config", "current-context": "racksmith",
        "clusters": [{"name": "racksmith", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "racksmith-admin", "user": {"token": "site-token"}}],
        "contexts": [{"name": "racksmith", "context": {"cluster": "racksmith",
                                                       "user": "racksmith-admin"}}]}
MINE = {"apiVersion": "v1", "kind": "Config", "current-context": "prod",
        "preferences": {"colors": True},
        "clusters": [{"name": "prod", "cluster": {"server": "https://prod:6443"}},
                     {"name": "racksmith", "cluster": {"server": "https://old:1"}}],
        "users": [{"name": "me", "user": {"token": "mine"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}]}


def test_merged_replaces_same_names_and_keeps_the_rest() -> None:
    out = kubeconfigs.merged(MINE, SITE)
    assert [c["name"] for c in out["clusters"]] == ["prod", "racksmith"]
    assert out["clusters"][1]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert [u["name"] for u in out["users"]] == ["me", "racksmith-admin"]
    assert [c["name"] for c in out["contexts"]] == ["prod", "racksmith"]
    assert out["current-context"] == "racksmith" and out["preferences"] == {"colors": True}
    assert MINE["current-context"] == "prod"  # inputs untouched
    assert kubeconfigs.merged(MINE, SITE, set_current=False)["current-context"] == "prod"
    assert kubeconfigs.merged({}, SITE)["contexts"] == SITE["contexts"]


def test_merge_file_writes_0600_and_makes_the_folder(tmp_path: Path) -> None:
    source = tmp_path / "site" / "kubeconfig"
    source.parent.mkdir()
    source.write_text(yaml.safe_dump(SITE))
    target = tmp_path / "home" / ".kube" / "config"
    assert kubeconfigs.merge_file(source, target) == ["racksmith"]
    assert target.stat().st_mode & 0o777 == 0o600
    assert target.parent.stat().st_mode & 0o777 == 0o700
    target.write_text(yaml.safe_dump(MINE))
    kubeconfigs.merge_file(source, target)
    out = yaml.safe_load(target.read_text())
    assert {c["name"] for c in out["contexts"]} == {"prod", "racksmith"}
    assert not list(target.parent.glob(".*racksmith-tmp"))


def test_merge_file_refuses_what_is_not_a_kubeconfig(tmp_path: Path) -> None:
    source = tmp_path / "kubeconfig"
    source.write_text(yaml.safe_dump(SITE))
    bad = tmp_path / "config"
    bad.write_text("- a list\n")
    with pytest.raises(kubeconfigs.KubeconfigError, match="not a kubeconfig"):
        kubeconfigs.merge_file(source, bad)
    assert bad.read_text() == "- a list\n"


def test_default_target_follows_kubeconfig(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    assert kubeconfigs.default_target() == tmp_path / "a"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfigs.default_target() == tmp_path / ".kube" / "config"


def test_the_cli_prints_or_merges(tmp_path: Path) -> None:
    data = tmp_path / "site"
    data.mkdir()
    (data / "kubeconfig").write_text(yaml.safe_dump(SITE))
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": ""}
    run = [sys.executable, "-m", "racksmith.cli.main", "kubeconfig", "--data-dir", str(data)]
    printed = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
    assert printed.returncode == 0 and yaml.safe_load(printed.stdout) == SITE
    merged = subprocess.run([*run, "--merge"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert merged.returncode == 0, merged.stderr
    assert "current context: racksmith" in merged.stdout
    assert yaml.safe_load((tmp_path / ".kube" / "config").read_text())["current-context"] \
        == "racksmith"
    missing = subprocess.run([*run[:-1], str(tmp_path / "nowhere")], capture_output=True,
                             text=True, env=env, timeout=60)
    assert missing.returncode == 2 and "start racksmith up first" in missing.stderr


def test_shell_completion_is_on(tmp_path: Path) -> None:
    """Typer's completion: the script for bash, and the completions it answers.
    The shell is named, not detected from the test's parent processes (under
    ``sh``, as make may run it, detection finds a shell Typer does not serve)."""
    env = {**os.environ, "HOME": str(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "--show-completion",
                            "bash"], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0 and "complete" in shown.stdout
    answer = subprocess.run([sys.executable, "-m", "racksmith.cli.main"], capture_output=True,
                            text=True, timeout=60, env={
                                **env, "_RACKSMITH_COMPLETE": "complete_bash",
                                "COMP_WORDS": "racksmith do", "COMP_CWORD": "1"})
    assert "down" in answer.stdout.split(), answer.stdout + answer.stderr
