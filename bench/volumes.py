"""Benchmark of local volumes: sparse Volumes from apply to Available, against a plain script.

Owns the volumes part of ``make bench``. Measures, in one run, N sparse
volumes (``sparseLoopDevice``, 1Gi each, ext4 with ``mkfsOptions: ["-m",
"0"]``) spread evenly over M emulated nodes (volume i on node i mod M):

* **direct script** (the reference): the same host work with nothing
  around it. M worker threads in this process, one per node, each doing its
  node's volumes one after the other (as one agent does): truncate a sparse
  file to the size, ``mkfs.ext4 -q -F -m 0`` on it (the agent's exact
  command), ``blkid -p -o export`` for the UUID. Per-volume latency is
  measured from the start of the run (every volume "applied" at once);
* **Racksmith**, as ``racksmith up`` wires it: the management API server
  in this process (``racksmith.apiserver`` with Racksmith's CRDs) with the
  Volume controller (``VOLUME_WORKERS`` workers) and the pre-bound claim
  binder (1 worker) under a ``Manager``; the cluster's own API, a second
  ``racksmith apiserver`` process on a cluster CA (``bench/clusterapi.py``)
  holding the StorageClass ``bench-local``, the Nodes, the Volumes and their
  PersistentVolumes; the controllers reach it through a RemotePlane with
  identities of their own there (their Secrets and the Cluster's
  ``status.controlPlaneEndpoint`` in the management API, their roles in the
  cluster, as the Cluster controller leaves them); and M real ``racksmith
  agent --emulated --root <dir>`` processes, one per node, each with its
  LCMMachine (no state items: its LCM loop idles) in the management API and,
  on its root, what the user data and the emulated kubeadm leave on a host
  (the cluster CA, the kubelet's client certificate, kubelet.conf naming the
  cluster's endpoint), so each agent takes its node's Volume jobs from the
  cluster's API. ``--one-api``: no cluster API process, everything in the
  management API (the topology before each cluster had its own API). The N
  Volumes are created (16 concurrent creates) and watched in the cluster's
  API: per volume, when ``status.job`` appeared (job started), when the
  agent's result annotation appeared (host work done) and when
  ``status.phase`` became ``Available``. The agent also fsyncs the file,
  renames it into place and records an emulated loop device; that is part
  of Racksmith's cost here. The creates and the watch run in a bench client
  process of their own (``BenchClient``), as ``kubectl`` would: the
  benchmark process holds what the management process of ``racksmith up``
  holds (API server and controllers), nothing more.

The pair (direct, then Racksmith, each from scratch) runs ``--repeat``
times (3), one after the other; the pair with the median ratio is
reported in full and every pair's ratio is listed, since one short run on a
shared 2-core machine moves by ±30%.

Reported: wall time of both sides and the ratio Racksmith ÷ direct (shown,
not enforced: this is a benchmark, not a test), per-volume latency
p50/p90/max (Racksmith also split into apply → job started → host work done
→ Available), and CPU seconds: this process (the direct script with its
mkfs/blkid children; or management API server + controllers), the agents
(with their mkfs/blkid children), the cluster's API server, the bench
client (creates and watch) and everything else on the machine; and, for
each side, its CPU floor — the CPU seconds of its own processes divided
by the cores, the shortest wall time that work allows — with Racksmith's
wall time over its floor (target ≤ 1.25: no waiting beyond the work
itself) and the CPU per volume. Afterwards it
checks the Racksmith side: every Volume Available with a deviceName, one
PersistentVolume per Volume, one ext4 image file per Volume under its
node's root. Exit status 1 if a check failed or a side
failed or timed out.

Only 127.0.0.1 is contacted. Every agent is stopped by PID (SIGTERM, then
SIGKILL) and dies with us (PR_SET_PDEATHSIG); the API server is stopped and
the temporary directory removed; so is the cluster's API server.

    .venv/bin/python bench/volumes.py [--quick] [--volumes N] [--nodes M] [--repeat K]
                                      [--one-api] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ctypes
import datetime as dt
import json
import logging
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from apiserver import Server
from clusterapi import start_cluster_api, write_kubeconfig
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi, StorageV1Api
from provisioning import machine_busy_seconds, quantile

from racksmith.agent import kubeadm
from racksmith.apiserver.server import ApiServer, ApiServerConfig
from racksmith.app.clusterplanes import planes
from racksmith.app.logs import configure_logging
from racksmith.controllers import VOLUME_WORKERS, in_cluster_access
from racksmith.controllers.volume import (
    JOB_RESULT_ANNOTATION,
    claim_binder_controller,
    volume_controller,
)
from racksmith.controlplane.identities import cluster_rbac, identity_secret
from racksmith.controlplane.pki import KeyPair, issue_kubelet_client
from racksmith.filemodes import write_private
from racksmith.kinds.crdgen import all_crds
from racksmith.runtime.client import as_client
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.hostaccess import issue_host_token
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from racksmith.runtime.manager import Manager
from racksmith.runtime.planes import ClusterPlane
from racksmith.runtime.resource import Resource
from racksmith.runtime.resources import CLUSTERS, SECRETS

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "storage.racksmith.io", "v1alpha1"
VOLUMES_PATH = f"/apis/{GROUP}/{VERSION}/volumes"
LCM_GROUP, LCM_VERSION, NS = "lcm.racksmith.io", "v1alpha1", "default"
STORAGE_CLASS = "bench-local"
FS_TYPE, MKFS_OPTIONS = "ext4", ["-m", "0"]
SIZE, SIZE_BYTES = "1Gi", 2**30
CREATE_CONCURRENCY = 16
AGENT_START_TIMEOUT = 120.0
CLUSTER = "bench"
IDENTITIES = ("volume", "claim-binder")
"""The controllers' identities inside the cluster (``CLUSTER_IDENTITIES``)."""
AGENT_STOP_TIMEOUT = 15.0


# --------------------------------------------------------------------------- helpers


def node_names(nodes: int) -> list[str]:
    return [f"node-{k:02d}" for k in range(nodes)]


def volume_names(volumes: int) -> list[str]:
    return [f"vol-{i:04d}" for i in range(volumes)]


def node_of(i: int, nodes: int) -> int:
    return i % nodes


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (mkfs, blkid)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def pid_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (its reaped children included); 0 if gone."""
    try:
        rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(x) for x in rest[11:15]) / os.sysconf("SC_CLK_TCK")


def latency(values: list[float]) -> Obj:
    return {"p50_s": round(quantile(values, 0.5), 3), "p90_s": round(quantile(values, 0.9), 3),
            "max_s": round(max(values, default=0.0), 3), "n": len(values)}


def _die_with_parent() -> None:
    """In the child: SIGTERM it when the benchmark process dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class CpuMeter:
    """Wall time and CPU seconds of one side: this process, its reaped children,
    the agent processes and the rest of the machine."""

    agent_pids: list[int] = field(default_factory=list)
    client_pids: list[int] = field(default_factory=list)
    server_pids: list[int] = field(default_factory=list)

    def __enter__(self) -> CpuMeter:
        self.t0 = time.perf_counter()
        self.s0, self.c0 = self_cpu(), children_cpu()
        self.a0 = sum(pid_cpu(p) for p in self.agent_pids)
        self.k0 = sum(pid_cpu(p) for p in self.client_pids)
        self.v0 = sum(pid_cpu(p) for p in self.server_pids)
        self.m0 = machine_busy_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.self_s = self_cpu() - self.s0
        self.children_s = children_cpu() - self.c0
        self.agents_s = sum(pid_cpu(p) for p in self.agent_pids) - self.a0
        self.client_s = sum(pid_cpu(p) for p in self.client_pids) - self.k0
        self.servers_s = sum(pid_cpu(p) for p in self.server_pids) - self.v0
        self.other_s = max(0.0, machine_busy_seconds() - self.m0 - self.self_s
                           - self.children_s - self.agents_s - self.client_s - self.servers_s)

    def as_dict(self) -> Obj:
        return {"seconds": round(self.seconds, 3), "cpu_self_s": round(self.self_s, 2),
                "cpu_children_s": round(self.children_s, 2),
                "cpu_agents_s": round(self.agents_s, 2), "cpu_client_s": round(self.client_s, 2),
                "cpu_cluster_api_s": round(self.servers_s, 2),
                "cpu_other_s": round(self.other_s, 2)}


# --------------------------------------------------------------------------- direct script


def direct_volume(path: Path) -> str:
    """The host work of one sparse volume, plainly; returns the UUID."""
    with path.open("wb") as fh:
        fh.truncate(SIZE_BYTES)
    subprocess.run([f"mkfs.{FS_TYPE}", "-q", "-F", *MKFS_OPTIONS, str(path)], check=True,
                   capture_output=True)
    out = subprocess.run(["blkid", "-p", "-o", "export", str(path)], check=True,
                         capture_output=True, text=True).stdout
    found = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return found["UUID"]


def run_direct(volumes: int, nodes: int, workdir: Path, out: Obj) -> None:
    """One worker thread per node, each doing its node's volumes in order."""
    names = volume_names(volumes)
    dirs = [workdir / name for name in node_names(nodes)]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    done: dict[str, float] = {}
    uuids: dict[str, str] = {}
    lock = threading.Lock()

    def worker(k: int, t0: float) -> None:
        for i, name in enumerate(names):
            if node_of(i, nodes) != k:
                continue
            uuid = direct_volume(dirs[k] / f"{name}.img")
            with lock:
                done[name] = time.perf_counter() - t0
                uuids[name] = uuid

    with CpuMeter() as meter, ThreadPoolExecutor(max_workers=nodes) as pool:
        t0 = time.perf_counter()
        for f in [pool.submit(worker, k, t0) for k in range(nodes)]:
            f.result()
    out.update(meter.as_dict())
    out["latency"] = latency(list(done.values()))
    out["done"] = len(done)
    out["distinct_uuids"] = len(set(uuids.values()))


# --------------------------------------------------------------------------- Racksmith


@dataclass
class Agent:
    node: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    root: Path

    terminated: bool = False

    def terminate(self) -> None:
        """SIGTERM, once (a second one could hit the default handler while it stops)."""
        if not self.terminated and self.proc.poll() is None:
            self.terminated = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after AGENT_STOP_TIMEOUT; the exit code."""
        self.terminate()
        if self.proc.poll() is None:
            try:
                self.proc.wait(AGENT_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
        return self.proc.returncode

    def log_problems(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line.strip()[:300] for line in text.splitlines()
                if "Traceback" in line or "[error" in line or "[critical" in line][:5]


async def agent_token(client: ApiClient, node: str) -> str:
    """The node's own agent token, as the Machine controller asks for it:
    ServiceAccount ``racksmith-host-<node>`` with its Role, bound to its
    user-data Secret."""
    return await issue_host_token(as_client(client), NS, node)


def start_agent(server: ApiServer, node: str, base: Path, token: str,
                cluster: tuple[Server, KeyPair] | None = None) -> Agent:
    """``racksmith agent --emulated --root <base>/root`` for ``node``, as a process.

    ``cluster``: the cluster's own API and CA. The host then holds what its
    user data and the emulated kubeadm leave on it: the cluster CA, the
    kubelet's client certificate (``system:node:<node>``) and a kubelet.conf
    naming the cluster's endpoint, so its node side (the node's Volumes)
    goes there, and only the LCMMachine to the management API."""
    assert server.ca_pem is not None
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    if cluster is not None:
        api, ca = cluster
        port = int(api.url.rsplit(":", 1)[1].rstrip("/"))
        for rel, data in ((kubeadm.CLUSTER_CA, ca.cert_pem),
                          (kubeadm.KUBELET_CLIENT, issue_kubelet_client(ca, node)),
                          (kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
                              {"name": CLUSTER, "apiServerVIP": "127.0.0.1",
                               "apiServerPort": port}, node, server.url,
                              credentials=True).encode())):
            target = root / rel.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            write_private(target, data)
    config = base / "agent.yaml"
    config.write_text(yaml.safe_dump({
        "server": server.url,
        "certificateAuthorityData": base64.b64encode(server.ca_pem).decode(),
        "token": token, "namespace": NS, "lcmMachine": node, "nodeName": node}))
    log_path = base / "agent.log"
    args = [sys.executable, "-m", "racksmith.cli.main", "agent", "--config", str(config),
            "--root", str(root), "--emulated"]
    with log_path.open("wb") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                preexec_fn=_die_with_parent)
    return Agent(node, proc, log_path, root)


class VolumeWatch:
    """When each Volume first reached each milestone (list, then watch from its
    resourceVersion, resumed when a watch ends)."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.reached: dict[str, dict[str, float]] = {"job": {}, "result": {}, "available": {},
                                                     "failed": {}}
        self.messages: dict[str, str] = {}
        self.changed = asyncio.Event()
        self.listed = asyncio.Event()

    def _see(self, obj: Obj) -> None:
        now = time.perf_counter()
        name = str((obj.get("metadata") or {}).get("name") or "")
        status = obj.get("status") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if status.get("job"):
            self.reached["job"].setdefault(name, now)
        if annotations.get(JOB_RESULT_ANNOTATION):
            self.reached["job"].setdefault(name, now)
            self.reached["result"].setdefault(name, now)
        phase = status.get("phase")
        if phase == "Available":
            self.reached["available"].setdefault(name, now)
        elif phase == "Failed":
            self.reached["failed"].setdefault(name, now)
            ready: dict[str, Any] = next((c for c in status.get("conditions") or []
                                          if c.get("type") == "Ready"), {})
            self.messages[name] = f"{ready.get('reason')}: {ready.get('message')}"
        self.changed.set()

    async def _get(self, query: list[tuple[str, str]], timeout: float) -> aiohttp.ClientResponse:
        resp: aiohttp.ClientResponse = await self.client.call_api(
            VOLUMES_PATH, "GET", query_params=query, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(connect=10, sock_read=timeout))
        if resp.status != 200:
            text = (await resp.read()).decode(errors="replace")
            resp.release()
            raise RuntimeError(f"GET {VOLUMES_PATH}: {resp.status} {text[:300]}")
        return resp

    async def run(self) -> None:
        rv = ""
        while True:
            if not rv:
                resp = await self._get([], 60)
                body = orjson.loads(await resp.read())
                resp.release()
                for obj in body.get("items") or []:
                    self._see(obj)
                rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
                self.listed.set()
            resp = await self._get([("watch", "true"), ("allowWatchBookmarks", "true"),
                                    ("timeoutSeconds", "300"), ("resourceVersion", rv)], 330)
            try:
                async for line in _lines(resp.content):
                    event = orjson.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        rv = ""  # 410 Gone or another error: list again
                        break
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj)
            finally:
                resp.close()

    async def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while True:
            available, failed = self.reached["available"], self.reached["failed"]
            if failed:
                name = sorted(failed)[0]
                raise RuntimeError(f"{len(failed)} Volume(s) Failed, e.g. {name}: "
                                   f"{self.messages.get(name)}")
            if all(n in available for n in names):
                return
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{len(names) - len(available)} of {len(names)} Volumes "
                                   f"not Available after {timeout:.0f} s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    buf = bytearray()
    while chunk := await content.readany():
        buf.extend(chunk)
        while (i := buf.find(b"\n")) >= 0:
            line = bytes(buf[:i]).strip()
            del buf[: i + 1]
            if line:
                yield line


async def setup_objects(client: ApiClient, node_api: ApiClient, nodes: list[str]) -> None:
    """The StorageClass and the Nodes in ``node_api`` (the cluster's API, or
    the management API with ``--one-api``); the LCMMachines in the
    management API (``client``)."""
    custom = CustomObjectsApi(client)
    node_core, storage = CoreV1Api(node_api), StorageV1Api(node_api)
    body: Any = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"fsType": FS_TYPE, "mkfsOptions": json.dumps(MKFS_OPTIONS)}}
    await storage.create_storage_class(body)
    for node in nodes:
        node_body: Any = {"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}}
        await node_core.create_node(node_body)
        await custom.create_namespaced_custom_object(LCM_GROUP, LCM_VERSION, NS, "lcmmachines", {
            "apiVersion": f"{LCM_GROUP}/{LCM_VERSION}", "kind": "LCMMachine",
            "metadata": {"name": node, "namespace": NS},
            "spec": {"machineRef": {"name": node}, "clusterName": CLUSTER,
                     "release": "bench-1.0.0", "stateItems": []}})


async def open_cluster(client: ApiClient, inside: ApiClient, cluster: Server,
                       ca: KeyPair) -> None:
    """What the Cluster controller does for the Volume controller and the
    claim binder: the Cluster with its endpoint and each identity's Secret in
    the management API, each identity's role inside the cluster."""
    mgmt, node_api = as_client(client), as_client(inside)
    await mgmt.create(CLUSTERS, {
        "apiVersion": f"{CLUSTERS.group}/{CLUSTERS.version}", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS}, "spec": {"release": "bench-1.0.0"}})
    port = int(cluster.url.rsplit(":", 1)[1].rstrip("/"))
    await mgmt.patch(CLUSTERS, NS, CLUSTER, {"status": {
        "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port}}}, status=True)
    for identity in IDENTITIES:
        await mgmt.create(SECRETS, identity_secret(NS, CLUSTER, identity, ca))
    access = in_cluster_access()
    for obj in cluster_rbac({i: access[i].policy_rules() for i in IDENTITIES}):
        plural = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        await node_api.create(Resource("rbac.authorization.k8s.io", "v1", plural), obj)


async def wait_planes(plane_of: dict[str, ClusterPlane], timeout: float) -> None:
    """Until every controller's plane has opened the cluster (its watches run there)."""
    key = ObjectKey(NS, CLUSTER)
    deadline = time.perf_counter() + timeout
    while not all(key in p.clusters() for p in plane_of.values()):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the controllers did not reach the cluster in {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def wait_agents_ready(client: ApiClient, agents: list[Agent], timeout: float) -> None:
    """Until every agent has reported its (empty) LCMMachine Ready: it runs and reaches the API."""
    custom = CustomObjectsApi(client)
    deadline = time.perf_counter() + timeout
    waiting = {a.node for a in agents}
    while waiting:
        for a in agents:
            if a.proc.poll() is not None:
                tail = a.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"agent {a.node} exited with {a.proc.returncode}:\n{tail}")
        for node in sorted(waiting):
            obj = await custom.get_namespaced_custom_object(LCM_GROUP, LCM_VERSION, NS,
                                                            "lcmmachines", node)
            if (obj.get("status") or {}).get("phase") == "Ready":
                waiting.discard(node)
        if waiting and time.perf_counter() > deadline:
            raise TimeoutError(f"agents of {sorted(waiting)} not Ready after {timeout:.0f} s")
        await asyncio.sleep(0.5)


async def apply_volumes(client: ApiClient, volumes: int, nodes: list[str]) -> dict[str, float]:
    """Create the Volumes (CREATE_CONCURRENCY at a time); when each create was sent."""
    custom = CustomObjectsApi(client)
    sem = asyncio.Semaphore(CREATE_CONCURRENCY)
    applied: dict[str, float] = {}

    async def create(i: int, name: str) -> None:
        async with sem:
            applied[name] = time.perf_counter()
            await custom.create_cluster_custom_object(GROUP, VERSION, "volumes", {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "Volume",
                "metadata": {"name": name},
                "spec": {"nodeName": nodes[node_of(i, len(nodes))],
                         "storageClassName": STORAGE_CLASS, "mode": "Filesystem",
                         "sparseLoopDevice": {"size": SIZE}}})

    await asyncio.gather(*(create(i, n) for i, n in enumerate(volume_names(volumes))))
    return applied


class BenchClient:
    """The user's side — the Volumes applied and watched — in a process of its
    own, as ``kubectl`` would be (``python bench/volumes.py --client ...``):
    its CPU is not the API server's, and is reported apart.

    Protocol on its stdin/stdout, one line each: it prints ``ready`` once its
    Volume watch has listed; ``go`` makes it apply the Volumes and wait until
    every one is Available; it prints one JSON line (``applied``/``reached``
    perf_counter times, the clock being the machine's monotonic one, or
    ``error``) and exits on ``bye`` or end of input."""

    def __init__(self, kubeconfig: Path, volumes: int, nodes: list[str], timeout: float,
                 log_path: Path) -> None:
        args = [sys.executable, str(Path(__file__).resolve()), "--client", str(kubeconfig),
                "--volumes", str(volumes), "--nodes", str(len(nodes)),
                "--timeout", str(timeout)]
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, cwd=ROOT, preexec_fn=_die_with_parent)

    async def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), timeout)
        if not line:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"bench client exited with {self.proc.poll()}:\n{tail}")
        return line.decode().strip()

    def _send(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word.encode() + b"\n")
        self.proc.stdin.flush()

    async def ready(self, timeout: float) -> None:
        line = await self._line(timeout)
        if line != "ready":
            raise RuntimeError(f"bench client said {line!r}, not ready")

    async def run(self, timeout: float) -> Obj:
        self._send("go")
        out: Obj = orjson.loads(await self._line(timeout))
        return out

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._send("bye")
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


async def client_main(kubeconfig: Path, volumes: int, nodes: int, timeout: float) -> None:
    """The bench client process (see ``BenchClient``)."""
    client = await api_client_from_kubeconfig(kubeconfig)
    watch = VolumeWatch(client)
    task = asyncio.create_task(watch.run(), name="volume-watch")
    try:
        await asyncio.wait_for(watch.listed.wait(), 30)  # events from here on are replayed
        print("ready", flush=True)
        if (await asyncio.to_thread(sys.stdin.readline)).strip() != "go":
            return
        out: Obj = {}
        try:
            applied = await apply_volumes(client, volumes, node_names(nodes))
            await watch.wait(volume_names(volumes), timeout)
            out = {"applied": applied, "reached": watch.reached}
        except Exception as exc:  # reported by the parent
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(orjson.dumps(out).decode(), flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # bye (or EOF)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def check_racksmith(client: ApiClient, volumes: int, agents: list[Agent]) -> list[str]:
    """The Racksmith side's result: Volumes, PVs, image files."""
    problems: list[str] = []
    custom, core = CustomObjectsApi(client), CoreV1Api(client)
    vols = (await custom.list_cluster_custom_object(GROUP, VERSION, "volumes"))["items"]
    bad = [v["metadata"]["name"] for v in vols
           if (v.get("status") or {}).get("phase") != "Available"
           or not (v.get("status") or {}).get("deviceName")]
    if len(vols) != volumes or bad:
        problems.append(f"{len(vols)} Volumes, {len(bad)} not Available with a deviceName "
                        f"(e.g. {bad[:3]})")
    pvs = [p for p in (await core.list_persistent_volume()).items
           if (p.metadata.labels or {}).get("storage.racksmith.io/volume")]
    if len(pvs) != volumes:
        problems.append(f"{len(pvs)} PersistentVolumes, expected {volumes}")
    files = [f for a in agents
             for f in (a.root / "var/lib/racksmith/volumes").glob("*.img")]
    if len(files) != volumes:
        problems.append(f"{len(files)} volume image files, expected {volumes}")
    elif files:
        sample = files[0]
        out = subprocess.run(["blkid", "-p", "-o", "export", str(sample)], capture_output=True,
                             text=True, check=False).stdout
        if f"TYPE={FS_TYPE}" not in out or sample.stat().st_size != SIZE_BYTES:
            problems.append(f"{sample} is not a {SIZE} {FS_TYPE} image: {out.strip()!r}")
    return problems


async def run_racksmith(volumes: int, nodes: int, workdir: Path, timeout: float,
                        out: Obj, *, one_api: bool = False) -> None:
    names, node_list = volume_names(volumes), node_names(nodes)
    server = ApiServer(ApiServerConfig(data_dir=workdir / "server", port=0))
    agents: list[Agent] = []
    manager: Manager | None = None
    manager_task: asyncio.Task[None] | None = None
    clients: list[ApiClient] = []
    bench_client: BenchClient | None = None
    cluster: tuple[Server, KeyPair] | None = None
    tracker: ClusterClients | None = None
    try:
        print("  [racksmith] starting the API server ...", flush=True)
        await server.start(bootstrap=all_crds())
        ctrl_client = await api_client_from_kubeconfig(server.kubeconfig_path)
        clients.append(ctrl_client)
        client = await api_client_from_kubeconfig(server.kubeconfig_path)
        clients.append(client)
        node_api, user_kubeconfig = client, server.kubeconfig_path
        plane_of: dict[str, ClusterPlane] = {}
        if not one_api:
            print("  [racksmith] starting the cluster's own API ...", flush=True)
            cluster = await asyncio.to_thread(start_cluster_api, workdir / "cluster")
            user_kubeconfig = write_kubeconfig(cluster[0], workdir / "cluster-kubeconfig")
            node_api = await api_client_from_kubeconfig(user_kubeconfig)
            clients.append(node_api)
            await open_cluster(client, node_api, *cluster)
            tracker = ClusterClients(workdir / "clusters")
            plane_of = planes(lambda _n: as_client(ctrl_client), IDENTITIES, tracker, None)
        print("  [racksmith] starting the controllers ...", flush=True)
        manager = Manager(ctrl_client, [
            volume_controller(ctrl_client, workers=VOLUME_WORKERS, plane=plane_of.get("volume")),
            claim_binder_controller(ctrl_client, workers=1, plane=plane_of.get("claim-binder"))])
        manager_task = asyncio.create_task(manager.run(), name="manager")
        for _ in range(600):
            if manager.ready or manager_task.done():
                break
            await asyncio.sleep(0.05)
        if manager_task.done():
            manager_task.result()
        if not manager.ready:
            raise RuntimeError("controllers not ready after 30 s")
        await wait_planes(plane_of, 30)
        await setup_objects(client, node_api, node_list)
        print(f"  [racksmith] starting {nodes} agents (emulated) ...", flush=True)
        agents = [start_agent(server, node, workdir / node, await agent_token(client, node),
                              cluster) for node in node_list]
        await wait_agents_ready(client, agents, AGENT_START_TIMEOUT)
        out["agent_pids"] = [a.proc.pid for a in agents]
        bench_client = BenchClient(user_kubeconfig, volumes, node_list, timeout,
                                   workdir / "client.log")
        await bench_client.ready(60)
        print(f"  [racksmith] applying {volumes} Volumes ...", flush=True)
        servers = [cluster[0].proc.pid] if cluster is not None else []
        with CpuMeter([a.proc.pid for a in agents], [bench_client.proc.pid], servers) as meter:
            t0 = time.perf_counter()
            seen = await bench_client.run(timeout + 60)
        if "error" in seen:
            raise RuntimeError(seen["error"])
        out.update(meter.as_dict())
        out["topology"] = "one API" if one_api else "management API + the cluster's own API"
        applied, r = seen["applied"], seen["reached"]
        out["apply_s"] = round(max(applied.values()) - t0, 3)
        out["latency"] = latency([r["available"][n] - applied[n] for n in names])
        out["to_job"] = latency([r["job"][n] - applied[n] for n in names if n in r["job"]])
        # when each stage was reached, from the first create: the last
        # volume's job, result and Available show where the run's tail went
        out["timeline_s"] = {
            what: [round(min(r[what].values()) - t0, 3), round(max(r[what].values()) - t0, 3)]
            for what in ("job", "result", "available") if r.get(what)}
        out["timeline_s"]["applied"] = [round(min(applied.values()) - t0, 3),
                                        round(max(applied.values()) - t0, 3)]
        out["job_to_result"] = latency([r["result"][n] - r["job"][n] for n in names
                                        if n in r["result"] and n in r["job"]])
        out["result_to_available"] = latency([r["available"][n] - r["result"][n] for n in names
                                              if n in r["result"]])
        out["problems"] = await check_racksmith(node_api, volumes, agents)
        print(f"  [racksmith] done in {meter.seconds:.1f} s", flush=True)
    except Exception as exc:  # reported in the table, and the exit status
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  [racksmith] FAILED: {out['error']}", flush=True)
    finally:
        if bench_client is not None:
            bench_client.stop()
        for a in agents:  # all at once, then wait for each
            a.terminate()
        out["agent_exit_codes"] = [a.stop() for a in agents]
        out["agent_log_problems"] = [f"{a.node}: {p}" for a in agents for p in a.log_problems()]
        if manager is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(manager.stop(), 30)
        if manager_task is not None:
            manager_task.cancel()
            await asyncio.gather(manager_task, return_exceptions=True)
        for c in clients:
            await c.close()
        if tracker is not None:
            await tracker.close()
        if cluster is not None:
            out["cluster_api_exit_code"] = cluster[0].stop()
        with contextlib.suppress(Exception):
            await server.stop()


# --------------------------------------------------------------------------- report


def rows(res: Obj) -> list[tuple[str, str, str]]:
    d, r = res["direct"], res["racksmith"]
    ok_d, ok_r = "error" not in d, "error" not in r

    def lat(x: Obj) -> str:
        return f"{x['p50_s']:.2f} / {x['p90_s']:.2f} / {x['max_s']:.2f} s"

    def cpu(x: Obj) -> str:
        return (f"{x['cpu_self_s']:.1f} / {x['cpu_children_s']:.1f} / {x['cpu_agents_s']:.1f} "
                f"/ {x.get('cpu_cluster_api_s', 0.0):.1f} / {x['cpu_client_s']:.1f} "
                f"/ {x['cpu_other_s']:.1f}")

    out = [("apply → every volume Available (wall)",
            f"{r['seconds']:.2f} s" if ok_r else "error",
            f"{d['seconds']:.2f} s" if ok_d else "error")]
    if ok_r and ok_d:
        out.append(("ratio Racksmith ÷ direct (the median pair)",
                    f"{r['seconds'] / d['seconds']:.2f}", ""))
    pairs = res.get("pairs", [])
    if len(pairs) > 1:
        out.append(("ratio of each pair, in run order", " ".join(
            f"{x['ratio']:.2f}" if x["ratio"] is not None else "error" for x in pairs), ""))
    out.append(("per volume p50 / p90 / max", lat(r["latency"]) if ok_r else "",
                lat(d["latency"]) if ok_d else ""))
    if ok_r:
        out += [("  apply → status.job (controller starts the job)", lat(r["to_job"]), ""),
                ("  status.job → result annotation (agent)", lat(r["job_to_result"]), ""),
                ("  result → Available (controller: PV, status)",
                 lat(r["result_to_available"]), "")]
        t = r.get("timeline_s") or {}
        if t:
            out.append(("from the first create: applied / job / result / Available, "
                        "first to last", "  ".join(f"{t[k][0]:.2f}..{t[k][1]:.2f}" for k in
                                                ("applied", "job", "result", "available")
                                                if k in t), ""))
    if ok_r and r.get("topology"):
        out.append(("topology", str(r["topology"]), ""))
    out.append(("CPU s: bench process / its children / agents / cluster API / bench client "
                "/ other",
                cpu(r) if ok_r else "", cpu(d) if ok_d else ""))
    cores = res["machine"]["nproc"] or 1
    volumes = res["params"]["volumes"]
    for side, x, ok in (("Racksmith", r, ok_r), ("direct", d, ok_d)):
        if not ok:
            continue
        floor = cpu_floor(x, cores)
        out.append((f"{side}: CPU floor (its processes' CPU s ÷ {cores} cores)",
                    f"{floor:.2f} s" if side == "Racksmith" else "",
                    f"{floor:.2f} s" if side == "direct" else ""))
    if ok_r:
        floor = cpu_floor(r, cores)
        out.append(("Racksmith: wall ÷ its CPU floor (target ≤ 1.25)",
                    f"{r['seconds'] / floor:.2f}" if floor > 0 else "n/a", ""))
        out.append(("CPU per volume (its processes)",
                    f"{own_cpu(r) / volumes * 1000:.1f} ms",
                    f"{own_cpu(d) / volumes * 1000:.1f} ms" if ok_d else ""))
    return out


def own_cpu(x: Obj) -> float:
    """The CPU seconds of a side's own processes (not the rest of the machine)."""
    return float(x["cpu_self_s"] + x["cpu_children_s"] + x["cpu_agents_s"] + x["cpu_client_s"]
                 + x.get("cpu_cluster_api_s", 0.0))


def cpu_floor(x: Obj, cores: int) -> float:
    """The shortest wall time a side's own CPU work allows on ``cores`` cores."""
    return own_cpu(x) / cores


def print_table(res: Obj) -> None:
    p, m = res["params"], res["machine"]
    print(f"\n{p['volumes']} sparse volumes ({SIZE}, {FS_TYPE} {' '.join(MKFS_OPTIONS)}) on "
          f"{p['nodes']} emulated nodes — {m['nproc']} cores, Python {m['python']}; "
          f"load average before/after {m['loadavg_start'][0]:.2f} / {m['loadavg_end'][0]:.2f}")
    table = rows(res)
    w0 = max(len(t[0]) for t in table)
    w1 = max(len("Racksmith"), *(len(t[1]) for t in table))
    print(f"  {'':{w0}}  {'Racksmith':>{w1}}  direct script")
    for metric, rv, dv in table:
        print(f"  {metric:{w0}}  {rv:>{w1}}  {dv}")


def pair_problems(pair: Obj, volumes: int) -> list[str]:
    """What went wrong in one pair (empty: both sides ran and checked out)."""
    out = []
    for side in ("direct", "racksmith"):
        if "error" in pair[side]:
            out.append(f"{side}: {pair[side]['error']}")
    d = pair["direct"]
    if "error" not in d and not d["done"] == d["distinct_uuids"] == volumes:
        out.append(f"direct: {d['done']} volumes done, {d['distinct_uuids']} distinct UUIDs")
    out += [f"racksmith: {p}" for p in pair["racksmith"].get("problems", [])]
    out += [f"agent log: {p}" for p in pair["racksmith"].get("agent_log_problems", [])]
    return out


def problems_of(res: Obj) -> list[str]:
    return pair_problems(res, res["params"]["volumes"]) + list(res.get("other_pair_problems", []))


async def run_pair(volumes: int, nodes: int, tmp: Path, timeout: float, res: Obj, *,
                   one_api: bool = False) -> None:
    """One direct run, then one Racksmith run, into ``res["direct"]`` and ``res["racksmith"]``."""
    await asyncio.to_thread(tmp.mkdir, parents=True, exist_ok=True)
    print(f"  [direct] {volumes} volumes, {nodes} workers ...", flush=True)
    res["direct"] = {}
    try:
        await asyncio.wait_for(asyncio.to_thread(run_direct, volumes, nodes, tmp / "direct",
                                                 res["direct"]), timeout)
        print(f"  [direct] done in {res['direct']['seconds']:.1f} s", flush=True)
    except Exception as exc:
        res["direct"]["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  [direct] FAILED: {res['direct']['error']}", flush=True)
    # Free the disk space (and the page cache pressure) of the reference's images.
    subprocess.run(["rm", "-rf", str(tmp / "direct")], check=False)
    res["racksmith"] = {}
    await run_racksmith(volumes, nodes, tmp / "racksmith", timeout, res["racksmith"],
                        one_api=one_api)
    subprocess.run(["rm", "-rf", str(tmp / "racksmith")], check=False)


def pair_ratio(pair: Obj) -> float | None:
    """Racksmith's wall time over the direct script's in one pair (None: a side failed)."""
    d, r = pair["direct"], pair["racksmith"]
    if "error" in d or "error" in r:
        return None
    return float(r["seconds"]) / float(d["seconds"])


async def run_all(volumes: int, nodes: int, tmp: Path, timeout: float, repeat: int,
                  res: Obj, *, one_api: bool = False) -> None:
    """``repeat`` pairs, one after the other; the median pair (by ratio) is the result."""
    pairs: list[Obj] = []
    for i in range(repeat):
        if repeat > 1:
            print(f"  pair {i + 1} of {repeat}", flush=True)
        pair: Obj = {}
        await run_pair(volumes, nodes, tmp / f"pair-{i}", timeout, pair, one_api=one_api)
        pairs.append(pair)
    ratios = [pair_ratio(p) for p in pairs]
    good = sorted((r, i) for i, r in enumerate(ratios) if r is not None)
    median = good[(len(good) - 1) // 2][1] if good else 0
    res["direct"], res["racksmith"] = pairs[median]["direct"], pairs[median]["racksmith"]
    res["pairs"] = [{"direct_s": p["direct"].get("seconds"),
                     "racksmith_s": p["racksmith"].get("seconds"),
                     "ratio": round(r, 3) if r is not None else None}
                    for p, r in zip(pairs, ratios, strict=True)]
    res["other_pair_problems"] = [prob for i, p in enumerate(pairs) if i != median
                                  for prob in pair_problems(p, volumes)]


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--volumes", type=int, help="sparse volumes (default 100; --quick: 10)")
    p.add_argument("--nodes", type=int, help="emulated nodes / agents (default 5; --quick: 2)")
    p.add_argument("--quick", action="store_true", help="10 volumes on 2 nodes: a smoke run")
    p.add_argument("--repeat", type=int, default=3,
                   help="pairs (direct, then Racksmith) to run; the median pair is reported")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per side")
    p.add_argument("--one-api", action="store_true",
                   help="Volumes, PVs and Nodes in the management API (no cluster API process)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the work dir goes (default $TMPDIR)")
    p.add_argument("--client", type=Path, metavar="KUBECONFIG", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    volumes = a.volumes or (10 if a.quick else 100)
    nodes = a.nodes or (2 if a.quick else 5)
    if volumes < 1 or nodes < 1 or a.repeat < 1:
        p.error("--volumes, --nodes and --repeat must be positive")
    if a.client is not None:  # the bench client process (BenchClient)
        configure_logging("warning")
        asyncio.run(client_main(a.client, volumes, nodes, a.timeout))
        return 0
    signal.signal(signal.SIGTERM, _sigterm)
    configure_logging("warning")
    logging.getLogger().setLevel(logging.ERROR)
    res: Obj = {"benchmark": "racksmith volumes", "date": dt.datetime.now(dt.UTC).isoformat(),
                "params": {"volumes": volumes, "nodes": nodes, "repeat": a.repeat, "size": SIZE,
                           "one_api": a.one_api,
                           "fsType": FS_TYPE, "mkfsOptions": MKFS_OPTIONS},
                "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "loadavg_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-volumes-", dir=a.tmpdir) as d:
        asyncio.run(run_all(volumes, nodes, Path(d), a.timeout, a.repeat, res,
                            one_api=a.one_api))
    res["machine"]["loadavg_end"] = os.getloadavg()
    d_, r_ = res["direct"], res["racksmith"]
    if "error" not in d_ and "error" not in r_:
        res["ratio"] = round(r_["seconds"] / d_["seconds"], 3)
    res["problems"] = problems_of(res)
    print_table(res)
    for prob in res["problems"]:
        print(f"PROBLEM: {prob}")
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"results written to {a.json}")
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
