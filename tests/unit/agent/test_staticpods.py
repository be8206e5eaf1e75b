"""The emulated kubelet's static pods: manifests to argv, and their lifecycle
with a harmless program (``racksmith.agent.staticpods``)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from racksmith.agent import staticpods
from racksmith.agent.host import EmulatedHost
from racksmith.agent.staticpods import ManifestError, StaticPods, pod_argv


def _pod(command: list[str], args: list[str], paths: list[str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "p", "command": command, "args": args}],
                     "volumes": [{"name": f"v{i}", "hostPath": {"path": p}}
                                 for i, p in enumerate(paths)]}}


def test_paths_under_host_path_volumes_resolve_inside_the_root(tmp_path: Path) -> None:
    host = EmulatedHost(tmp_path)
    argv = pod_argv(_pod(["etcd"], ["--data-dir=/var/lib/etcd", "--cert-file=/etc/pki/a.crt",
                                    "--name=/not/mounted", "-f", "/etc/pki/b"],
                         ["/var/lib/etcd", "/etc/pki"]), host)
    assert argv == ["/usr/bin/etcd", f"--data-dir={tmp_path}/var/lib/etcd",
                    f"--cert-file={tmp_path}/etc/pki/a.crt", "--name=/not/mounted", "-f",
                    f"{tmp_path}/etc/pki/b"]


def test_a_program_this_emulation_does_not_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="must be one of racksmith, etcd, haproxy"):
        pod_argv(_pod(["kube-scheduler"], [], []), EmulatedHost(tmp_path))
    with pytest.raises(ManifestError, match="containers is empty"):
        pod_argv({"spec": {}}, EmulatedHost(tmp_path))


def test_pods_start_restart_change_and_stop(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in program: sleeps, its argv names the root (as the real ones do)
    monkeypatch.setitem(staticpods.PROGRAMS, "racksmith",
                        (sys.executable, "-c", "import time; time.sleep(60)"))
    host = EmulatedHost(tmp_path)
    pods = StaticPods(host, restart_backoff=0.0, stop_timeout=2.0)

    def write(arg: str) -> None:
        host.write_file("/etc/kubernetes/manifests/api.yaml", yaml.safe_dump(
            _pod(["racksmith"], [f"--data=/var/lib/{arg}"], ["/var/lib"])).encode(), 0o600)

    try:
        write("one")
        assert pods.sync() == ["started api"]
        first = pods.pid("api")
        assert first is not None
        assert pods.sync() == []  # up to date
        # a restarted kubelet adopts the live process instead of starting another
        again = StaticPods(host, restart_backoff=0.0)
        assert again.sync() == [] and again.pid("api") == first
        # a changed manifest restarts it
        write("two")
        assert pods.sync() == ["stopped api (its manifest changed)", "started api"]
        second = pods.pid("api")
        assert second not in (None, first)
        # a dead process is started again
        assert second is not None
        os.kill(second, signal.SIGKILL)
        for _ in range(50):
            if pods.pid("api") is None:
                break
            time.sleep(0.05)
        assert pods.sync() == ["started api"]
        # a removed manifest stops it
        (tmp_path / "etc/kubernetes/manifests/api.yaml").unlink()
        third = pods.pid("api")
        assert pods.sync() == ["stopped api"]
        assert third is not None and pods.pid("api") is None
        assert not (tmp_path / "run/static-pods/api.json").exists()
    finally:
        pods.stop_all()


def test_a_missing_program_is_reported_not_raised(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(staticpods.PROGRAMS, "haproxy", (str(tmp_path / "no-such-haproxy"),))
    host = EmulatedHost(tmp_path)
    host.write_file("/etc/kubernetes/manifests/haproxy.yaml",
                    yaml.safe_dump(_pod(["haproxy"], [], [])).encode(), 0o600)
    pods = StaticPods(host, restart_backoff=0.0)
    assert pods.sync() == [] and pods.pid("haproxy") is None
