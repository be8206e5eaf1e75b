"""Benchmark: what one emulated cluster control plane costs while idle.

Forms the virtual datacenter's stacked control plane of one cluster on
three emulated control-plane hosts, exactly as the emulated kubeadm does it
for ``make up``'s demo (``racksmith.agent.clusterplane``: per host one
``racksmith apiserver`` on the cluster's PKI, one Debian etcd member, one
Debian HAProxy on the VIP's loopback image, each a static pod run by
``racksmith.agent.staticpods``), then lets it idle and samples every
process's CPU time and resident memory from ``/proc``.

Reference, measured in the same run: one ``racksmith apiserver`` on SQLite
(the management plane's API server alone), idle over the same window. The
table gives each part's CPU (% of one core) and RSS, and the whole control
plane's CPU and RSS as a ratio to the reference.

Every process is stopped by pid at the end; only loopback addresses are
used (``racksmith.loopback``).

    .venv/bin/python bench/controlplane.py [--idle SECONDS] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from racksmith.agent.clusterplane import ControlPlaneHost
from racksmith.agent.host import EmulatedHost, HostError
from racksmith.agent.staticpods import StaticPods
from racksmith.controlplane.pki import ClusterPki
from racksmith.loopback import LoopbackMap
from racksmith.planners.release import NETPLAN_PATH

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MASTERS = {f"m{i}": f"10.10.0.10{i}" for i in (1, 2, 3)}


def cpu_seconds(pid: int) -> float:
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


async def form(base: Path) -> dict[str, StaticPods]:
    network = LoopbackMap(base / "network.json")
    pki = ClusterPki.generate()
    pods: dict[str, StaticPods] = {}
    planes: dict[str, ControlPlaneHost] = {}
    for name, address in MASTERS.items():
        root = base / name
        root.mkdir(mode=0o700)
        host = EmulatedHost(root)
        for path, data in pki.kubeadm_files().items():
            host.write_file(f"/etc/kubernetes/pki/{path}", data, 0o600)
        host.write_file(NETPLAN_PATH, yaml.safe_dump({"network": {"ethernets": {
            "eno1": {"addresses": [f"{address}/24"]}}}}).encode(), 0o600)
        pods[name] = StaticPods(host, restart_backoff=0.5)
        planes[name] = ControlPlaneHost(host, name, {
            "name": "bench", "apiServerVIP": "10.10.0.5", "apiServerPort": 6443,
            "controlPlaneCIDRs": ["10.10.0.0/24"], "roles": ["master"], "initNode": "m1"},
            address, network, ready_timeout=120)
    stop = asyncio.Event()

    async def kubelets() -> None:
        while not stop.is_set():
            for p in pods.values():
                await asyncio.to_thread(p.sync)
            await asyncio.sleep(0.3)

    task = asyncio.create_task(kubelets())
    try:
        for plane in planes.values():
            for _ in range(300):
                try:
                    await plane.apply(dt.datetime.now(dt.UTC))
                    break
                except HostError:
                    await asyncio.sleep(0.5)
        for plane in planes.values():  # the proxies learn every backend
            await plane.apply(dt.datetime.now(dt.UTC))
        await asyncio.sleep(3)
    finally:
        stop.set()
        await task
    for p in pods.values():
        p.sync()
    return pods


def sample(pids: dict[str, list[int]], seconds: float) -> dict[str, tuple[float, float]]:
    """Per part: (CPU % of one core over ``seconds``, RSS MiB at the end), summed."""
    before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    start = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - start
    return {k: (100 * (sum(cpu_seconds(p) for p in v) - before[k]) / wall,
                sum(rss_mib(p) for p in v)) for k, v in pids.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=30.0, help="seconds sampled")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of idle before sampling")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-cp-") as tmp:
        base = Path(tmp)
        ref_dir = base / "reference"
        ref_dir.mkdir(mode=0o700)
        ref = subprocess.Popen([sys.executable, "-m", "racksmith.cli.main", "apiserver",
                                "--data-dir", str(ref_dir), "--port", "0",
                                "--log-level", "warning"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pods: dict[str, StaticPods] = {}
        try:
            started = time.monotonic()
            pods = asyncio.run(form(base))
            formed = time.monotonic() - started
            parts: dict[str, list[int]] = {"kube-apiserver": [], "etcd": [], "haproxy": [],
                                           "reference": [ref.pid]}
            for p in pods.values():
                for part in ("kube-apiserver", "etcd", "haproxy"):
                    pid = p.pid(part)
                    assert pid is not None, f"{part} is not running"
                    parts[part].append(pid)
            time.sleep(args.settle)
            figures = sample(parts, args.idle)
        finally:
            for p in pods.values():
                p.stop_all()
            ref.terminate()
            ref.wait(10)
    total_cpu = sum(v[0] for k, v in figures.items() if k != "reference")
    total_rss = sum(v[1] for k, v in figures.items() if k != "reference")
    ref_cpu, ref_rss = figures["reference"]
    print(f"control plane of 3 emulated hosts formed in {formed:.1f} s; idle {args.idle:.0f} s "
          f"sampled after {args.settle:.0f} s")
    print(f"{'part':<34}{'CPU % of a core':>16}{'RSS MiB':>10}")
    for part, label in (("kube-apiserver", "3 x racksmith apiserver (etcd)"),
                        ("etcd", "3 x etcd member"), ("haproxy", "3 x HAProxy")):
        cpu, rss = figures[part]
        print(f"{label:<34}{cpu:>16.2f}{rss:>10.0f}")
    print(f"{'control plane in all':<34}{total_cpu:>16.2f}{total_rss:>10.0f}")
    print(f"{'reference: 1 apiserver on SQLite':<34}{ref_cpu:>16.2f}{ref_rss:>10.0f}")
    ratio_cpu = f"{total_cpu / ref_cpu:.1f}" if ref_cpu >= 0.05 else "n/a (idle ~0)"
    print(f"{'ratio to the reference':<34}{ratio_cpu:>16}{total_rss / ref_rss:>10.1f}")
    if args.json:
        args.json.write_text(json.dumps({"formed_s": formed, "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
