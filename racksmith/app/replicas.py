"""The control plane beyond one process, on one machine: ``racksmith up
--store etcd --etcd-members N --apiserver-replicas M``.

Owns: starting and stopping the local etcd cluster (racksmith.etcdcluster,
``DATA/etcd/``) and the API server replicas after the first (each a
``racksmith apiserver`` process with its own data dir
``DATA/replicas/rK`` and port, sharing ``DATA``'s CA, ServiceAccount key and
token file through ``--shared-dir``; logs in ``DATA/logs/apiserver-rK.log``,
pid in ``DATA/replicas/rK.pid``), and the kubeconfig contexts naming every
replica (``racksmith`` is the first, ``racksmith-rK`` the others).

The first replica runs inside ``racksmith up`` (it serves the console and
the controllers' clients); killing a replica process leaves the others
serving; the controllers reach the API through the first replica and
elect a leader through a Lease, as on any cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml

from racksmith import filemodes
from racksmith.apiserver.store.etcd import EtcdConfig
from racksmith.etcdcluster import LocalEtcdCluster

log = logging.getLogger("racksmith.app.replicas")


def start_etcd(data_dir: Path, members: int, timeout: float = 60.0
               ) -> tuple[LocalEtcdCluster, EtcdConfig]:
    """Start (or restart) the local etcd cluster of ``data_dir``."""
    cluster = LocalEtcdCluster(data_dir, members)
    cluster.start(timeout=timeout)
    tls = cluster.tls
    config = EtcdConfig(endpoints=tuple(cluster.endpoints),
                        ca_file=tls.ca_file if tls else None,
                        cert_file=tls.cert_file if tls else None,
                        key_file=tls.key_file if tls else None)
    return cluster, config


@dataclass
class Replica:
    index: int
    proc: subprocess.Popen[bytes]
    data_dir: Path
    pid_file: Path
    url: str = ""


class Replicas:
    """API server replicas 1..M-1 as processes of their own."""

    def __init__(self, data_dir: Path, etcd: EtcdConfig, count: int, host: str, *,
                 host_restriction: bool = True) -> None:
        self.data_dir = data_dir
        self.host_restriction = host_restriction
        self.etcd = etcd
        self.count = count
        self.host = host
        self.replicas: list[Replica] = []

    def _args(self, index: int, replica_dir: Path) -> list[str]:
        etcd = self.etcd
        args = [sys.executable, "-m", "racksmith.cli.main", "apiserver",
                "--data-dir", str(replica_dir), "--shared-dir", str(self.data_dir),
                "--host", self.host, "--port", "0",
                "--etcd-endpoints", ",".join(etcd.endpoints), "--etcd-prefix", etcd.prefix]
        if not self.host_restriction:
            args.append("--no-host-restriction")
        for flag, path in (("--etcd-cafile", etcd.ca_file), ("--etcd-certfile", etcd.cert_file),
                           ("--etcd-keyfile", etcd.key_file)):
            if path is not None:
                args += [flag, str(path)]
        return args

    async def start(self, timeout: float = 90.0) -> None:
        logs = self.data_dir / "logs"
        filemodes.private_dir(logs)
        root = self.data_dir / "replicas"
        filemodes.private_dir(root)
        for index in range(1, self.count):
            replica_dir = root / f"r{index}"
            filemodes.private_dir(replica_dir)
            kubeconfig = replica_dir / "kubeconfig"
            with contextlib.suppress(FileNotFoundError):
                kubeconfig.unlink()
            proc = _spawn(self._args(index, replica_dir), logs / f"apiserver-r{index}.log")
            pid_file = root / f"r{index}.pid"
            filemodes.write_private(pid_file, f"{proc.pid}\n".encode())
            self.replicas.append(Replica(index, proc, replica_dir, pid_file))
        for replica in self.replicas:
            replica.url = await self._ready(replica, timeout)
            log.info("API server replica r%d on %s (pid %d)", replica.index, replica.url,
                     replica.proc.pid)

    async def _ready(self, replica: Replica, timeout: float) -> str:
        kubeconfig = replica.data_dir / "kubeconfig"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if replica.proc.poll() is not None:
                raise RuntimeError(f"API server replica r{replica.index} exited with "
                                   f"{replica.proc.returncode}; see "
                                   f"{self.data_dir / 'logs' / f'apiserver-r{replica.index}.log'}")
            if kubeconfig.exists():
                cfg = yaml.safe_load(kubeconfig.read_text())
                url = str(cfg["clusters"][0]["cluster"]["server"])
                if await _answers(url):
                    return url
            await asyncio.sleep(0.1)
        raise RuntimeError(f"API server replica r{replica.index} not ready in {timeout:.0f}s")

    def add_contexts(self, kubeconfig: Path) -> None:
        """Name every replica in ``kubeconfig`` (the first replica's context is
        kept as it is, and stays the current one)."""
        cfg = yaml.safe_load(kubeconfig.read_text())
        first = cfg["clusters"][0]["cluster"]
        user = cfg["contexts"][0]["context"]["user"]
        for replica in self.replicas:
            name = f"racksmith-r{replica.index}"
            cfg["clusters"] = [c for c in cfg["clusters"] if c["name"] != name] + [
                {"name": name, "cluster": {**first, "server": replica.url}}]
            cfg["contexts"] = [c for c in cfg["contexts"] if c["name"] != name] + [
                {"name": name, "context": {"cluster": name, "user": user}}]
        filemodes.write_private(kubeconfig, yaml.safe_dump(cfg, sort_keys=False).encode())

    async def stop(self, grace: float = 10.0) -> None:
        for replica in self.replicas:
            if replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for replica in self.replicas:
            try:
                await asyncio.to_thread(replica.proc.wait, max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(replica.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(replica.proc.wait)
            with contextlib.suppress(FileNotFoundError):
                replica.pid_file.unlink()
        self.replicas = []


def _spawn(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start one replica in its own session, its output appended to ``log_path`` (0600)."""
    filemodes.private_file(log_path, create=True)
    with log_path.open("ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


async def _answers(url: str) -> bool:
    """Whether the replica at ``url`` answers /readyz (TLS unverified: this is
    only a liveness probe of a process we started; clients verify)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http, \
                http.get(f"{url}/readyz", ssl=False) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False
