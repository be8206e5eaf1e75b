"""The emulated kubelet's static pods: the manifests of ``/etc/kubernetes/manifests``
run as processes of the emulated host.

Owns, in emulated mode only, turning each Pod manifest (``*.yaml``) in the
host's manifests directory into one running process, as kubelet runs
kubeadm's static pods (kube-apiserver, etcd, and the HAProxy of the API
endpoint) without asking any API server:

- the process is the first container's ``command`` + ``args``; ``command[0]``
  must be a program this emulation runs (:data:`PROGRAMS`: ``racksmith``
  standing in for kube-apiserver, Debian's ``etcd`` and ``haproxy``);
  a manifest naming any other is reported and skipped;
- an argument (or the value after ``=`` of a ``--flag=value``) under one
  of the pod's ``hostPath`` volumes is resolved inside the host's root, as
  the volume would mount it;
- its pid and the manifest's sha256 are kept in
  ``/run/static-pods/<file stem>.json``, its output appended to
  ``/var/log/pods/<file stem>.log``; it runs in the agent's process group,
  so powering the host off stops it, and a restarted agent adopts a live one
  (its ``/proc/<pid>/cmdline`` names the root) instead of starting it twice;
- a process that died is started again (kubelet's restart policy Always),
  at most once every ``restart_backoff`` seconds; a changed manifest stops
  the old process (SIGTERM, SIGKILL after ``stop_timeout``) and starts the
  new one; a removed manifest stops its process.

Level-based: :meth:`StaticPods.sync` looks at the directory and the pid
files each time. Started by ``main`` (a task beside the kubelet's); the
emulated kubeadm (``clusterplane``) writes the manifests.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml

from racksmith import procfs
from racksmith.agent.host import Host

__all__ = ["MANIFESTS_DIR", "PROGRAMS", "StaticPods", "pod_argv"]

log = structlog.get_logger("racksmith.agent.staticpods")

MANIFESTS_DIR = "/etc/kubernetes/manifests"
PID_DIR = "/run/static-pods"
LOG_DIR = "/var/log/pods"
#: Programs a static pod may run here: the name in the manifest → argv prefix.
PROGRAMS: Mapping[str, tuple[str, ...]] = {
    "racksmith": (sys.executable, "-m", "racksmith.cli.main"),
    "etcd": ("/usr/bin/etcd",),
    "haproxy": ("/usr/sbin/haproxy",),
}


class ManifestError(ValueError):
    """A manifest this emulation cannot run (the message says why)."""


def pod_argv(manifest: Mapping[str, Any], host: Host) -> list[str]:
    """The argv of a static pod manifest on ``host`` (module docstring)."""
    spec = manifest.get("spec") or {}
    containers = spec.get("containers") or []
    if not containers or not isinstance(containers[0], dict):
        raise ManifestError("spec.containers is empty")
    container = containers[0]
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if not command or command[0] not in PROGRAMS:
        raise ManifestError(f"spec.containers[0].command[0] must be one of "
                            f"{', '.join(PROGRAMS)} here")
    mounts = [str((v.get("hostPath") or {}).get("path") or "")
              for v in spec.get("volumes") or [] if isinstance(v, dict)]
    mounts = [m.rstrip("/") for m in mounts if m.startswith("/")]

    def resolve(value: str) -> str:
        if value.startswith("/") and any(value == m or value.startswith(m + "/")
                                         for m in mounts):
            return str(host.resolve(value))
        return value

    out = list(PROGRAMS[command[0]])
    for word in [*command[1:], *args]:
        if word.startswith("--") and "=" in word:
            flag, _, value = word.partition("=")
            out.append(f"{flag}={resolve(value)}")
        else:
            out.append(resolve(word))
    return out


@dataclass
class _Running:
    pid: int
    digest: str
    popen: subprocess.Popen[bytes] | None = None


class StaticPods:
    """Runs one emulated host's static pods (module docstring)."""

    def __init__(self, host: Host, *, restart_backoff: float = 2.0,
                 stop_timeout: float = 10.0) -> None:
        self.host = host
        self.restart_backoff = restart_backoff
        self.stop_timeout = stop_timeout
        self._running: dict[str, _Running] = {}
        self._last_start: dict[str, float] = {}
        self._problems: dict[str, str] = {}

    # --- looking -----------------------------------------------------------------
    def manifests(self) -> dict[str, bytes]:
        directory = self.host.resolve(MANIFESTS_DIR)
        if not directory.is_dir():
            return {}
        return {p.stem: p.read_bytes() for p in sorted(directory.glob("*.yaml")) if p.is_file()}

    def pid(self, name: str) -> int | None:
        """The live pid of static pod ``name`` (as its pid file says), if any."""
        recorded = self._recorded(name)
        if recorded is not None and procfs.alive(recorded.pid) and str(self.host.root) \
                in procfs.cmdline_text(recorded.pid, settle=procfs.SETTLE_SECONDS):
            return recorded.pid
        return None

    def _pid_path(self, name: str) -> Path:
        return self.host.resolve(f"{PID_DIR}/{name}.json")

    def _recorded(self, name: str) -> _Running | None:
        if name in self._running:
            return self._running[name]
        try:
            data = json.loads(self._pid_path(name).read_text())
            return _Running(pid=int(data["pid"]), digest=str(data["digest"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # --- converging --------------------------------------------------------------
    def sync(self) -> list[str]:
        """Converge every static pod once; what was done, in words."""
        done: list[str] = []
        manifests = self.manifests()
        pid_dir = self.host.resolve(PID_DIR)
        known = set(manifests)
        if pid_dir.is_dir():
            known |= {p.stem for p in pid_dir.glob("*.json")}
        for name in sorted(known):
            content = manifests.get(name)
            current = self._recorded(name)
            live = current is not None and self.pid(name) is not None
            if content is None:
                if current is not None:
                    if live:
                        self._stop(current)
                        done.append(f"stopped {name}")
                    self._forget(name)
                continue
            digest = hashlib.sha256(content).hexdigest()
            if live and current is not None and current.digest == digest:
                self._running[name] = current
                continue
            if live and current is not None:
                self._stop(current)
                done.append(f"stopped {name} (its manifest changed)")
                self._forget(name)
            elif current is not None and current.popen is not None:
                current.popen.poll()  # reap
            now = time.monotonic()
            if now - self._last_start.get(name, -1e9) < self.restart_backoff:
                continue
            try:
                manifest = yaml.safe_load(content)
                if not isinstance(manifest, dict):
                    raise ManifestError("not a Pod manifest")
                argv = pod_argv(manifest, self.host)
            except (ManifestError, yaml.YAMLError) as exc:
                if self._problems.get(name) != str(exc):
                    log.warning("static pod not run", pod=name, error=str(exc))
                self._problems[name] = str(exc)
                continue
            self._last_start[name] = now
            try:
                self._start(name, argv, digest)
            except OSError as exc:  # e.g. the program is not installed: said once
                problem = f"cannot start {argv[0]}: {exc.strerror or exc}"
                if self._problems.get(name) != problem:
                    log.warning("static pod not run", pod=name, error=problem)
                self._problems[name] = problem
                continue
            self._problems.pop(name, None)
            done.append(f"started {name}")
        return done

    def _start(self, name: str, argv: Sequence[str], digest: str) -> None:
        log_path = self.host.resolve(f"{LOG_DIR}/{name}.log")
        log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
            popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.host.root)
        running = _Running(pid=popen.pid, digest=digest, popen=popen)
        self._running[name] = running
        path = self._pid_path(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump({"pid": popen.pid, "digest": digest}, f)
        os.replace(tmp, path)
        log.info("static pod started", pod=name, pid=popen.pid)

    def _stop(self, running: _Running) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while procfs.alive(running.pid) and time.monotonic() < deadline:
            if running.popen is not None and running.popen.poll() is not None:
                break
            time.sleep(0.05)
        if procfs.alive(running.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.pid, signal.SIGKILL)
        if running.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                running.popen.wait(5.0)

    def _forget(self, name: str) -> None:
        self._running.pop(name, None)
        self._pid_path(name).unlink(missing_ok=True)

    def stop_all(self) -> None:
        """Stop every static pod (the host is being wiped; not on agent exit)."""
        for name in list(self.manifests()) + list(self._running):
            current = self._recorded(name)
            if current is not None and self.pid(name) is not None:
                self._stop(current)
            self._forget(name)

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        """Sync every ``interval`` seconds until ``stop`` (errors are logged, retried)."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.sync)
            except Exception as exc:  # the next tick retries
                log.warning("static pods sync failed", error=f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
