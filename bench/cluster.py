"""Benchmark of hosts becoming nodes: emulated hosts from apply to Nodes Ready.

Owns: the third part of ``make bench``. In one run it starts ``racksmith up``'s
composition root in-process twice, each time on a fresh data dir with a fresh
virtual datacenter of N emulated Redfish hosts (real Ironic, sushy-tools,
the emulated ramdisk agent, the emulated OS boot and the host agents):

* **reference — hosts only**: the N BareMetalHosts applied with
  ``spec.image`` and ``online: true`` already set, until every host is
  ``provisioned``: plain provisioning, the floor the cluster layer builds on;
* **cluster**: the N hosts applied bare, plus ``examples/cluster``'s
  release, subnets, L2 template and cluster, plus N Machines (3 masters with
  etcd, the rest workers), until every Node is Ready (read in the
  cluster's own API, with its admin kubeconfig) and every Machine is
  ``Ready``: claim, IPAM, LCMMachine, user data, provisioning, the OS boot,
  the agent's state items, the kubelet's registration, roles.

Reported: wall time of both, the ratio cluster ÷ reference (the cost of the
cluster layer on top of provisioning; shown, not enforced), the cluster
run's per-host p50/max to ``available``, ``provisioned``, Node Ready and
Machine Ready, and CPU seconds (this process: API server + controllers; the
scenario's Ironic; the emulator with sushy-tools and the host agents;
everything else on the machine).

Only 127.0.0.1 is contacted; every process a run starts names its data dir
on its command line and is killed at the end, whatever happened.

    .venv/bin/python bench/cluster.py [--hosts N] [--quick] [--json PATH]
        [--only reference|cluster] [--profile PATH]

``--only`` runs one side (no ratio); ``--profile`` writes a cProfile of the
cluster side's process (this one: API server and controllers) to PATH, to
look into where its CPU goes (the run is slower under the profiler).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import cProfile
import datetime as dt
import json
import logging
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provisioning as prov  # the sibling benchmark: meters, sessions, reaping

from racksmith.app.logs import configure_logging
from racksmith.app.manifests import load_manifests
from racksmith.app.runner import Racksmith
from racksmith.app.settings import Settings
from racksmith.runtime.client import Client
from racksmith.runtime.errors import ApiError
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.source import Resource

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cluster"
MACHINES = "/apis/cluster.racksmith.io/v1alpha1/namespaces/default/machines"
BMHS = "/apis/metal3.io/v1alpha1/namespaces/default/baremetalhosts"
NODES = "/api/v1/nodes"
KUBECONFIG_SECRET = "/api/v1/namespaces/default/secrets/demo-kubeconfig"
NODE_RESOURCE = Resource("", "v1", "nodes")


def cluster_objects(n: int) -> list[Obj]:
    """examples/cluster without its machines, subnets widened for n hosts, plus n Machines."""
    objs = [o for o in load_manifests([EXAMPLES]) if o["kind"] != "Machine"]
    for o in objs:
        if o["kind"] == "Subnet":
            net = o["spec"]["cidr"].rsplit(".", 1)[0]
            o["spec"]["includeRanges"] = [f"{net}.10-{net}.250"]
    for i in range(n):
        name = f"m-{i:03d}"
        roles = ["master", "etcd"] if i < 3 else ["node"]
        objs.append({"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine",
                     "metadata": {"name": name, "namespace": "default"},
                     "spec": {"clusterName": "demo", "roles": roles,
                              "hostSelector": {"matchLabels": {
                                  "metal.racksmith.io/emulated": "true"}}}})
    return objs


class ClusterNodes:
    """The Nodes of cluster default/demo, listed in its own API (they live
    there, not in the management API) with its admin kubeconfig (Secret
    ``demo-kubeconfig``, written to ``workdir`` 0600 once it exists)."""

    def __init__(self, session: Any, workdir: Path) -> None:
        self.session = session
        self.workdir = workdir
        self.client: Client | None = None

    async def __call__(self) -> list[Obj]:
        if self.client is None:
            async with self.session.get(KUBECONFIG_SECRET) as r:
                if r.status != 200:
                    return []
                body = await r.json()
            path = self.workdir / "demo.kubeconfig"
            path.write_bytes(base64.b64decode(body["data"]["value"]))
            path.chmod(0o600)
            self.client = Client(await api_client(path))
        try:
            return await self.client.list(NODE_RESOURCE, live=True)
        except (ApiError, OSError):
            return []  # the cluster's API does not answer yet

    async def close(self) -> None:
        if self.client is not None:
            await self.client.api_client.close()


class Poller:
    """When each object first met a condition, by listing every second."""

    def __init__(self, session: Any,
                 nodes: Callable[[], Awaitable[list[Obj]]] | None = None) -> None:
        self.session = session
        self.nodes = nodes
        self.reached: dict[str, dict[str, float]] = {}

    def _mark(self, what: str, name: str, now: float) -> None:
        self.reached.setdefault(what, {}).setdefault(name, now)

    async def _list(self, path: str) -> list[Obj]:
        async with self.session.get(path) as r:
            body = await r.json()
        return list(body.get("items") or [])

    async def poll(self) -> None:
        now = time.perf_counter()
        for h in await self._list(BMHS):
            st = ((h.get("status") or {}).get("provisioning") or {}).get("state")
            if st in ("available", "provisioned"):
                self._mark(st, h["metadata"]["name"], now)
            if st == "provisioned":
                self._mark("available", h["metadata"]["name"], now)
        for node in await (self.nodes() if self.nodes is not None else self._list(NODES)):
            conds = {c["type"]: c["status"] for c in (node.get("status") or {})
                     .get("conditions") or []}
            if conds.get("Ready") == "True":
                self._mark("node ready", node["metadata"]["name"], now)
        for m in await self._list(MACHINES):
            if (m.get("status") or {}).get("phase") == "Ready":
                self._mark("machine ready", m["metadata"]["name"], now)

    async def wait(self, what: str, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while True:
            await self.poll()
            done = self.reached.get(what, {})
            if all(n in done for n in names):
                return
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{len(names) - len(done)} of {len(names)} not {what} "
                                   f"after {timeout:.0f} s")
            await asyncio.sleep(1.0)

    def per_host(self, what: str, t0: float) -> Obj:
        times = [t - t0 for t in self.reached.get(what, {}).values()]
        return {"p50_s": round(prov.quantile(times, 0.5), 1),
                "max_s": round(max(times, default=0.0), 1)}


async def run_side(side: str, n: int, data_dir: Path, timeout: float, out: Obj) -> None:
    rs = Racksmith(Settings(data_dir=data_dir, port=0, ironic_port=0, emulate_hosts=n,
                            leader_election=False))
    needle = str(data_dir)
    try:
        print(f"  [{side}] starting racksmith up in-process with {n} emulated hosts ...",
              flush=True)
        await rs.start()
        assert rs.emulator is not None and rs.server is not None
        hosts = load_manifests([rs.emulator.manifest_path])
        names = [h["metadata"]["name"] for h in hosts if h["kind"] == "BareMetalHost"]
        image = rs._default_image()
        assert image is not None
        if side == "reference":
            objs = copy.deepcopy(hosts)
            for o in objs:
                if o["kind"] == "BareMetalHost":
                    o["spec"]["image"] = image.model_dump(by_alias=True, exclude_none=True,
                                                          mode="json")
                    o["spec"]["online"] = True
        else:
            objs = [*hosts, *cluster_objects(n)]
        async with prov.kube_session(rs, 8) as session:
            nodes = ClusterNodes(session, data_dir) if side == "cluster" else None
            poller = Poller(session, nodes)
            with prov.Meter(needle) as meter:
                t0 = time.perf_counter()
                for o in objs:
                    await rs.server.apply(o, manager="racksmith-bench")
                if side == "reference":
                    await poller.wait("provisioned", names, timeout)
                else:
                    machines = [f"m-{i:03d}" for i in range(n)]
                    await poller.wait("node ready", machines, timeout)
                    await poller.wait("machine ready", machines, timeout)
            out.update(meter.as_dict())
            for what in ("available", "provisioned", "node ready", "machine ready"):
                if poller.reached.get(what):
                    out[what] = poller.per_host(what, t0)
            if nodes is not None:
                await nodes.close()
        print(f"  [{side}] done in {meter.seconds:.1f} s", flush=True)
    except Exception as exc:  # reported in the table, and the exit status
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  [{side}] FAILED: {out['error']}", flush=True)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(rs.stop(), 120)
        prov.reap(needle)


def rows(res: Obj) -> list[tuple[str, str]]:
    ref, clu = res.get("reference") or {"error": "not run"}, \
        res.get("cluster") or {"error": "not run"}
    out: list[tuple[str, str]] = []

    def secs(side: Obj) -> str:
        return "error" if "error" in side else f"{side['seconds']:.1f} s"

    out.append(("reference: apply → every host provisioned", secs(ref)))
    out.append(("cluster: apply → every Node Ready and Machine Ready", secs(clu)))
    if "error" not in ref and "error" not in clu:
        out.append(("ratio cluster ÷ reference", f"{clu['seconds'] / ref['seconds']:.2f}"))
    for what in ("available", "provisioned", "node ready", "machine ready"):
        if what in clu:
            out.append((f"cluster: per host to {what} (p50 / max)",
                        f"{clu[what]['p50_s']} / {clu[what]['max_s']} s"))
    if "provisioned" in ref:
        out.append(("reference: per host to provisioned (p50 / max)",
                    f"{ref['provisioned']['p50_s']} / {ref['provisioned']['max_s']} s"))
    for name, side in (("reference", ref), ("cluster", clu)):
        if "error" not in side:
            out.append((f"{name}: CPU s bench process / Ironic / emulator+agents / other",
                        f"{side['cpu_self_s']} / {side['cpu_ironic_s']} / "
                        f"{side['cpu_emulator_s']} / {side['cpu_other_s']}"))
    return out


async def run_all(tmp: Path, n: int, timeout: float, res: Obj,
                  sides: tuple[str, ...] = ("reference", "cluster"),
                  profile: Path | None = None) -> None:
    for side in sides:
        res[side] = {}
        profiler = cProfile.Profile() if profile is not None and side == "cluster" else None
        if profiler is not None:
            profiler.enable()
        try:
            await run_side(side, n, tmp / side, timeout, res[side])
        finally:
            if profiler is not None and profile is not None:
                profiler.disable()
                profiler.dump_stats(profile)
                print(f"  [{side}] profile written to {profile}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, help="emulated hosts (default 50; --quick: 6)")
    p.add_argument("--quick", action="store_true", help="6 hosts: a smoke run")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per side")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the data dirs go (default $TMPDIR)")
    p.add_argument("--only", choices=("reference", "cluster"), help="run one side only")
    p.add_argument("--profile", type=Path, metavar="PATH",
                   help="write a cProfile of the cluster side to PATH")
    a = p.parse_args(argv)
    sides = (a.only,) if a.only else ("reference", "cluster")
    n = max(3, a.hosts or (6 if a.quick else 50))
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(128 + s)))
    configure_logging("warning")
    logging.getLogger().setLevel(logging.ERROR)
    res: Obj = {"benchmark": "racksmith cluster", "hosts": n,
                "date": dt.datetime.now(dt.UTC).isoformat(),
                "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "loadavg_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-cluster-", dir=a.tmpdir) as d:
        try:
            asyncio.run(run_all(Path(d), n, a.timeout, res, sides, a.profile))
        finally:
            prov.reap(d)
    res["machine"]["loadavg_end"] = os.getloadavg()
    title = (f"{n} emulated hosts → Nodes Ready ({os.cpu_count()} cores, Python "
             f"{platform.python_version()}); load average before/after "
             f"{res['machine']['loadavg_start'][0]:.2f} / {res['machine']['loadavg_end'][0]:.2f}")
    print(title)
    for metric, value in rows(res):
        print(f"  {metric:<72}{value:>24}")
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"results written to {a.json}")
    return 1 if any("error" in res[s] for s in sides) else 0


if __name__ == "__main__":
    sys.exit(main())
