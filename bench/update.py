"""Benchmark of a cluster update: a 500-node emulated fleet, groups of concurrency 50.

Owns the update part of ``make bench``. One run, four processes:

* the management API server: ``racksmith apiserver`` (port 0, a temporary
  data dir, Racksmith's CRDs), started and stopped by PID as
  ``bench/apiserver.py`` does;
* the cluster's own API: a second ``racksmith apiserver`` on a cluster CA
  (as each cluster of ``racksmith up`` serves its own), holding the Nodes,
  NodeMaintenanceRequests, ClusterMaintenanceRequests and workload locks;
  the update controller reaches it as ``racksmith up`` wires it, through a
  RemotePlane with its own certificate there (``bench/fleet.py``).
  ``--one-api``: no such process, everything in the management API;
* the LCM update controller alone (``racksmith.controllers.update``'s
  ``update_controller`` under a ``Manager``, through the kubeconfig, as
  ``racksmith up`` wires it) in its own process, so its CPU is read from
  ``/proc`` and nothing else is counted in it; every HTTP request it makes
  (its aiohttp sessions) is counted (``bench/fleet.py``);
* this process: the fleet simulator (``bench/fleet.py``): the Machine
  controller's release pin, host agents that apply in ``--apply-seconds``
  and then need a reboot, the BareMetalHost controller and the OS boot
  (``--reboot-seconds`` per power cycle, then a new bootID), emulated
  kubelets posting Node status every 10 s and agent heartbeats every 20 s.
  No Ironic, no real agents, no pods on the nodes (the drain is trivial).

The fleet: Cluster ``fleet`` at release ``r1`` with ``spec.update``
``{autoCommence: true, nodeDurationSeconds: apply + reboot}``, N machines
(3 master+etcd, the rest workers in UpdateGroups ``fleet-workers-a`` and
``-b``, index 1 and 2, ``concurrentUpdates`` C). After the controller has
idled for a while (measured too), ``Cluster.spec.release`` is set to ``r2``;
the run ends when the ClusterUpdatePlan is ``Completed``.

Reported: the makespan, from the first NodeMaintenanceRequest to plan phase
Completed (also from the release bump), against the update planner's lower
bound for the same fleet (``plan_update`` + ``lower_bound`` with per-node
duration = apply + reboot seconds: the ratio, target ≤ 1.05, shown, not
enforced), per step and per node (where the time beyond apply + reboot
went), controller CPU per node, and API requests per node (by verb).
Afterwards it checks the result: every LCMMachine at r2, every node
rebooted exactly once, no NodeMaintenanceRequest, ClusterMaintenanceRequest,
cordon or reboot annotation left, no group over its concurrency, no two
control-plane machines at once. Exit status 1 if a check failed, the
update did not complete, or something failed. The controller's requests
are counted over both APIs (and shown per API).

    .venv/bin/python bench/update.py [--quick] [--one-api] [--nodes N]
        [--concurrency C] [--apply-seconds A] [--reboot-seconds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apiserver import Server, machine_busy_seconds, quantile, server_log_problems, start_server
from clusterapi import start_cluster_api
from fleet import (
    REBOOT_ANNOTATION,
    ControllerProcess,
    FleetSpec,
    Kube,
    Simulator,
    paths,
    seed,
    update_inputs,
)

from racksmith.controllers import in_cluster_access
from racksmith.controlplane.identities import cluster_rbac, identity_secret
from racksmith.controlplane.pki import KeyPair
from racksmith.planners.update import (
    Schedule,
    lower_bound,
    plan_update,
    upper_bound,
)

Obj = dict[str, Any]
TARGET_RATIO = 1.05
"""The target for the makespan over the planner's lower bound."""
READY_TIMEOUT = 120.0
CLEANUP_TIMEOUT = 30.0
VERBS = ("GET", "LIST", "WATCH", "CREATE", "PATCH", "UPDATE", "DELETE")
IDENTITY = "update"
"""The update controller's identity inside the cluster (``CLUSTER_IDENTITIES``)."""


def dist(values: list[float]) -> Obj:
    return {"p50_s": round(quantile(values, 0.5), 2), "p90_s": round(quantile(values, 0.9), 2),
            "max_s": round(max(values, default=0.0), 2), "n": len(values)}


def planner(spec: FleetSpec) -> Schedule:
    schedule = plan_update(update_inputs(spec))
    if not isinstance(schedule, Schedule):
        raise RuntimeError(f"the planner refused the fleet: {[str(e) for e in schedule]}")
    return schedule


# --------------------------------------------------------------------------- analysis


def refill_lags(starts: list[float], ends: list[float], concurrency: int) -> list[float]:
    """Per start after the first wave: how long after the slot freed it came.

    With equal durations the k-th start (k ≥ concurrency) takes the slot of
    the (k - concurrency)-th end.
    """
    starts, ends = sorted(starts), sorted(ends)
    return [max(0.0, starts[k] - ends[k - concurrency])
            for k in range(concurrency, len(starts)) if k - concurrency < len(ends)]


def analyse(sim: Simulator, spec: FleetSpec, schedule: Schedule, t_bump: float,
            t_done: float) -> Obj:
    names = spec.names()
    start, end = sim.nmr_start, sim.nmr_end
    out: Obj = {}
    t_first = min(start.values(), default=t_done)
    out["makespan_s"] = round(t_done - t_first, 2)
    out["bump_to_completed_s"] = round(t_done - t_bump, 2)
    plan_t = min(sim.plan_seen.values(), default=t_first)
    out["bump_to_plan_s"] = round(plan_t - t_bump, 2)
    out["plan_to_first_nmr_s"] = round(t_first - plan_t, 2)
    out["last_nmr_to_completed_s"] = round(t_done - max(end.values(), default=t_done), 2)
    done = [n for n in names if n in start and n in end]
    out["node"] = dist([end[n] - start[n] for n in done])
    out["node_overhead"] = dist([end[n] - start[n] - spec.node_seconds for n in done])
    out["to_pin"] = dist([sim.apply_start[n] - start[n] for n in done if n in sim.apply_start])
    out["applied_to_reboot"] = dist([sim.reboot_start[n] - sim.applied[n] for n in done
                                     if n in sim.applied and n in sim.reboot_start])
    out["boot_to_finish"] = dist([end[n] - sim.reboot_end[n] for n in done
                                  if n in sim.reboot_end])
    steps = []
    for step in schedule.steps:
        members = [s.machine for s in step.slots]
        if not members:
            continue
        s_ = [start[m] for m in members if m in start]
        e_ = [end[m] for m in members if m in end]
        lb = lower_bound(Schedule((step,), schedule.max_unavailable, schedule.done))
        row: Obj = {"id": step.id, "machines": len(members), "concurrency": step.concurrency,
                    "planned_s": round(step.duration, 2), "lower_bound_s": round(lb, 2)}
        if s_ and e_ and len(e_) == len(members):
            row["start_s"] = round(min(s_) - t_first, 2)
            row["seconds"] = round(max(e_) - min(s_), 2)
            row["refill_lag"] = dist(refill_lags(s_, e_, step.concurrency))
        steps.append(row)
    out["steps"] = steps
    stage_ends = {}
    for row in steps:
        if "seconds" in row:
            stage_ends[row["id"]] = (row["start_s"], row["start_s"] + row["seconds"])
    ordered = sorted(stage_ends.values())
    out["barrier_lags_s"] = [round(b[0] - a[1], 2) for a, b in itertools.pairwise(ordered)]
    return out


async def check(sim: Simulator, spec: FleetSpec) -> list[str]:
    """The world after the update (module doc)."""
    p = paths(spec)
    kube = sim.kube
    problems: list[str] = []
    lcms = (await kube.get(p["lcmmachines"]))["items"]
    behind = [o["metadata"]["name"] for o in lcms
              if o["spec"].get("release") != spec.target
              or (o.get("status") or {}).get("release") != spec.target]
    if len(lcms) != spec.nodes or behind:
        problems.append(f"{len(behind)} of {len(lcms)} LCMMachines not at {spec.target} "
                        f"(e.g. {behind[:3]})")
    for what in ("nmrs", "cmrs"):
        left = [o["metadata"]["name"] for o in (await sim.api(what).get(p[what]))["items"]]
        if left:
            problems.append(f"{len(left)} {what} left (e.g. {left[:3]})")
    nodes = (await sim.api("nodes").get(p["nodes"]))["items"]
    cordoned = [o["metadata"]["name"] for o in nodes if (o.get("spec") or {}).get("unschedulable")]
    if cordoned:
        problems.append(f"{len(cordoned)} Nodes left cordoned (e.g. {cordoned[:3]})")
    hosts = (await kube.get(p["hosts"]))["items"]
    annotated = [o["metadata"]["name"] for o in hosts
                 if any(k.startswith(REBOOT_ANNOTATION)
                        for k in (o["metadata"].get("annotations") or {}))]
    if annotated:
        problems.append(f"{len(annotated)} BareMetalHosts still have a reboot annotation")
    counts = Counter(sim.reboots.get(n, 0) for n in spec.names())
    if set(counts) != {1}:
        problems.append(f"reboots per node: {dict(sorted(counts.items()))} (expected all 1)")
    if sim.nmr_repeats:
        problems.append(f"{sim.nmr_repeats} NodeMaintenanceRequests created again for a node")
    for group, peak in sorted(sim.max_in_flight.items()):
        limit = 1 if group == spec.control_group else spec.concurrency
        if peak > limit:
            problems.append(f"group {group}: {peak} nodes in maintenance at once (limit {limit})")
    problems += [f"simulator: {e}" for e in sim.errors[:10]]
    return problems


# --------------------------------------------------------------------------- the run


def cpu_marks(server: Server, cluster: Server | None, ctrl: ControllerProcess) -> Obj:
    return {"t": time.perf_counter(), "server": server.cpu_seconds(),
            "cluster": cluster.cpu_seconds() if cluster is not None else 0.0,
            "controller": ctrl.cpu_seconds(), "self": time.process_time(),
            "machine": machine_busy_seconds()}


def cpu_delta(a: Obj, b: Obj) -> Obj:
    d = {k: b[k] - a[k] for k in a}
    other = max(0.0, d["machine"] - d["server"] - d["cluster"] - d["controller"] - d["self"])
    return {"seconds": round(d["t"], 2), "controller_s": round(d["controller"], 2),
            "server_s": round(d["server"], 2), "cluster_server_s": round(d["cluster"], 2),
            "simulator_s": round(d["self"], 2), "other_s": round(other, 2)}


def calls_delta(a: Obj, b: Obj, what: str = "calls") -> dict[str, int]:
    ca, cb = a.get(what) or {}, b.get(what) or {}
    return {k: cb[k] - ca.get(k, 0) for k in sorted(cb) if cb[k] - ca.get(k, 0)}


def api_names(apis: dict[str, int], server: Server, cluster: Server | None) -> dict[str, int]:
    """The controller's request counts by API (``host:port`` → management/cluster)."""
    def name(url: str) -> str:
        return url.split("://", 1)[-1].rstrip("/")
    known = {name(server.url): "management"}
    if cluster is not None:
        known[name(cluster.url)] = "cluster"
    out: Counter[str] = Counter()
    for hostport, n in apis.items():
        out[known.get(hostport, hostport)] += n
    return dict(out)


async def open_cluster(kube: Kube, inside: Kube, spec: FleetSpec, cluster: Server,
                       ca: KeyPair) -> None:
    """What the Cluster controller and the cluster's init do for the update
    controller: its identity Secret and the endpoint in the management API,
    its role inside the cluster."""
    ns = spec.namespace
    await kube.create(f"/api/v1/namespaces/{ns}/secrets",
                      identity_secret(ns, spec.cluster, IDENTITY, ca))
    port = int(cluster.url.rsplit(":", 1)[1].rstrip("/"))
    await kube.merge(f"{paths(spec)['clusters']}/{spec.cluster}/status", {"status": {
        "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port}}})
    for obj in cluster_rbac({IDENTITY: in_cluster_access()[IDENTITY].policy_rules()}):
        plural = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        await inside.create(f"/apis/rbac.authorization.k8s.io/v1/{plural}", obj)


async def run(spec: FleetSpec, workdir: Path, timeout: float, idle: float, workers: int,
              one_api: bool, res: Obj) -> None:
    schedule = planner(spec)
    res["planner"] = {"lower_bound_s": round(lower_bound(schedule), 2),
                      "makespan_s": round(schedule.makespan, 2),
                      "upper_bound_s": round(upper_bound(schedule), 2)}
    print(f"  planner: lower bound {res['planner']['lower_bound_s']} s, planned "
          f"{res['planner']['makespan_s']} s", flush=True)
    print("  starting the API server ...", flush=True)
    server = await asyncio.to_thread(start_server, workdir / "server")
    kube = Kube(server.url, server.token, server.ca_path)
    cluster: Server | None = None
    inside: Kube | None = None
    sim_task: asyncio.Task[None] | None = None
    ctrl: ControllerProcess | None = None
    try:
        if not one_api:
            print("  starting the cluster's own API ...", flush=True)
            started, ca = await asyncio.to_thread(start_cluster_api, workdir / "cluster")
            cluster = started
            inside = Kube(started.url, started.token, started.ca_path)
        sim = Simulator(kube, spec, inside)
        print(f"  seeding {spec.nodes} machines (Machine, LCMMachine, BMH, Node) ...", flush=True)
        t0 = time.perf_counter()
        await seed(kube, spec, inside)
        if cluster is not None and inside is not None:
            await open_cluster(kube, inside, spec, cluster, ca)
        res["seed_s"] = round(time.perf_counter() - t0, 2)
        sim_task = asyncio.create_task(sim.run(), name="simulator")
        await sim.wait_listed(60)
        print("  starting the update controller ...", flush=True)
        ctrl = ControllerProcess.start(server.data_dir / "kubeconfig", workdir, workers,
                                       cluster_api=not one_api)
        await ctrl.wait_ready(READY_TIMEOUT)
        res["controller_pid"] = ctrl.proc.pid
        await asyncio.sleep(2.0)  # its initial list and UpdateGroup defaults
        print(f"  idle fleet for {idle:.0f} s (kubelets and agents heartbeating) ...",
              flush=True)
        s0, m0 = await ctrl.snapshot(), cpu_marks(server, cluster, ctrl)
        await asyncio.sleep(idle)
        s1, m1 = await ctrl.snapshot(), cpu_marks(server, cluster, ctrl)
        res["idle"] = {**cpu_delta(m0, m1), "calls": calls_delta(s0, s1)}
        if sim.plan_seen:
            res["problems_pre"] = [f"a plan appeared before the release changed: "
                                   f"{sorted(sim.plan_seen)}"]
        print(f"  Cluster.spec.release {spec.source} → {spec.target}; waiting for the plan "
              "to complete ...", flush=True)
        s2, m2 = await ctrl.snapshot(), cpu_marks(server, cluster, ctrl)
        t_bump = time.perf_counter()
        await kube.merge(f"{paths(spec)['clusters']}/{spec.cluster}",
                         {"spec": {"release": spec.target}})
        progress = asyncio.create_task(report_progress(sim, spec, t_bump))
        try:
            await asyncio.wait_for(sim.completed.wait(), timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"plan not Completed after {timeout:.0f} s "
                               f"({len(sim.nmr_end)} of {spec.nodes} nodes done)") from exc
        finally:
            progress.cancel()
        t_done = time.perf_counter()
        cleaned = await wait_cleanup(sim, spec, CLEANUP_TIMEOUT)
        s3, m3 = await ctrl.snapshot(), cpu_marks(server, cluster, ctrl)
        res["update"] = {**cpu_delta(m2, m3), "calls": calls_delta(s2, s3),
                         "apis": api_names(calls_delta(s2, s3, "apis"), server, cluster)}
        res["result"] = analyse(sim, spec, schedule, t_bump, t_done)
        res["result"]["completed_to_cleanup_s"] = (
            round(cleaned - t_done, 2) if cleaned is not None else None)
        res["plan_phases"] = {k: [(round(t - t_bump, 2), ph) for t, ph in v]
                              for k, v in sim.plan_phases.items()}
        print(f"  completed: makespan {res['result']['makespan_s']} s", flush=True)
        res["problems"] = [*res.get("problems_pre", []), *await check(sim, spec)]
    except Exception as exc:  # reported in the table, and the exit status
        res["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  FAILED: {res['error']}", flush=True)
    finally:
        if sim_task is not None:
            sim_task.cancel()
            await asyncio.gather(sim_task, return_exceptions=True)
        res["simulator_requests"] = kube.requests + (inside.requests if inside else 0)
        await kube.close()
        if inside is not None:
            await inside.close()
        if ctrl is not None:
            res["controller_exit_code"] = ctrl.stop()
            res["controller_log_problems"] = server_log_problems(ctrl.log())
        res["server_exit_code"] = server.stop()
        res["server_log_problems"] = server_log_problems(server.log())
        if cluster is not None:
            res["cluster_server_exit_code"] = cluster.stop()
            res["server_log_problems"] += [f"cluster API: {p}"
                                           for p in server_log_problems(cluster.log())]


async def wait_cleanup(sim: Simulator, spec: FleetSpec, timeout: float) -> float | None:
    """After Completed: until every NMR and the CMR are gone; when (None: not in time).

    The controller may write phase Completed just before its last ``finish``
    calls (NMR deletions) and the CMR deletion; the checks wait for them.
    """
    cmrs = paths(spec)["cmrs"]
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if len(sim.nmr_end) >= spec.nodes and not (await sim.api("cmrs").get(cmrs))["items"]:
            return time.perf_counter()
        await asyncio.sleep(0.2)
    return None


async def report_progress(sim: Simulator, spec: FleetSpec, t0: float) -> None:
    while True:
        await asyncio.sleep(30)
        busy = len(sim.nmr_start) - len(sim.nmr_end)
        print(f"    {time.perf_counter() - t0:6.0f} s: {len(sim.nmr_end)} of {spec.nodes} "
              f"nodes done, {busy} in maintenance", flush=True)


# --------------------------------------------------------------------------- report


def by_verb(calls: dict[str, int]) -> Counter[str]:
    out: Counter[str] = Counter()
    for key, n in calls.items():
        out[key.split(" ", 1)[0]] += n
    return out


def rows(res: Obj) -> list[tuple[str, str]]:
    spec, pl = res["params"], res["planner"]
    n = spec["nodes"]
    out: list[tuple[str, str]] = [
        ("planner lower bound (per node = apply + reboot)", f"{pl['lower_bound_s']:.1f} s"),
        ("planner's own schedule / upper bound", f"{pl['makespan_s']:.1f} / "
                                                 f"{pl['upper_bound_s']:.1f} s")]
    if "result" not in res:
        out.append(("update", f"error: {res.get('error')}"))
        return out
    r, u = res["result"], res["update"]
    ratio = r["makespan_s"] / pl["lower_bound_s"]
    verdict = "PASS" if ratio <= TARGET_RATIO else "over target"
    out += [
        ("makespan: first NodeMaintenanceRequest → plan Completed", f"{r['makespan_s']:.1f} s"),
        (f"ratio makespan ÷ lower bound (target ≤ {TARGET_RATIO:.2f})",
         f"{ratio:.3f} {verdict}"),
        ("release bump → plan created / → first NMR / → Completed",
         f"{r['bump_to_plan_s']:.1f} / {r['bump_to_plan_s'] + r['plan_to_first_nmr_s']:.1f} / "
         f"{r['bump_to_completed_s']:.1f} s"),
        ("last NMR deleted → plan Completed", f"{r['last_nmr_to_completed_s']:.1f} s"),
        ("plan Completed → every NMR and the CMR deleted",
         "not in 30 s" if r.get("completed_to_cleanup_s") is None
         else f"{r['completed_to_cleanup_s']:.1f} s"),
    ]
    for st in r["steps"]:
        if "seconds" not in st:
            continue
        out.append((f"step {st['id']} ({st['machines']} machines, concurrency "
                    f"{st['concurrency']}): measured / lower bound",
                    f"{st['seconds']:.1f} / {st['lower_bound_s']:.1f} s"))
        if st["refill_lag"]["n"]:
            lag = st["refill_lag"]
            out.append(("  slot freed → next NMR created (p50 / max)",
                        f"{lag['p50_s']:.2f} / {lag['max_s']:.2f} s"))
    if r["barrier_lags_s"]:
        out.append(("step barrier: last NMR of a step deleted → first of the next",
                    " / ".join(f"{x:.1f}" for x in r["barrier_lags_s"]) + " s"))

    def d(x: Obj) -> str:
        return f"{x['p50_s']:.2f} / {x['p90_s']:.2f} / {x['max_s']:.2f} s"

    out += [
        ("per node NMR created → deleted (p50 / p90 / max)", d(r["node"])),
        ("  beyond apply + reboot", d(r["node_overhead"])),
        ("  NMR created → release pinned (cordon, drain, annotate)", d(r["to_pin"])),
        ("  agent Ready → BMH reboot annotation", d(r["applied_to_reboot"])),
        ("  new bootID → NMR deleted (Node Ready, uncordon, finish)", d(r["boot_to_finish"])),
    ]
    calls = u["calls"]
    verbs = by_verb(calls)

    def per(x: float) -> str:
        return f"{x:.1f}" if x >= 1 else f"{x:.2f}"

    total = sum(calls.values())
    out += [
        ("controller CPU during the update, total / per node",
         f"{u['controller_s']:.1f} s / {1000 * u['controller_s'] / n:.1f} ms"),
        ("controller CPU, % of one core (update / idle fleet)",
         f"{100 * u['controller_s'] / u['seconds']:.1f}% / "
         f"{100 * res['idle']['controller_s'] / res['idle']['seconds']:.1f}%"),
        ("controller API requests during the update (both APIs), total / per node",
         f"{total:,} / {total / n:.1f}"),
        *([("  per node in the management API / in the cluster's",
            f"{u['apis'].get('management', 0) / n:.1f} / {u['apis'].get('cluster', 0) / n:.1f}")]
          if u.get("apis") else []),
        ("  per node by verb: " + ", ".join(v for v in VERBS if verbs.get(v)),
         " / ".join(per(verbs[v] / n) for v in VERBS if verbs.get(v))),
        ("controller API requests/s while idle",
         f"{sum(res['idle']['calls'].values()) / res['idle']['seconds']:.2f}"),
        ("CPU s during the update: controller / management API / cluster API / simulator "
         "/ other",
         f"{u['controller_s']:.1f} / {u['server_s']:.1f} / {u['cluster_server_s']:.1f} / "
         f"{u['simulator_s']:.1f} / {u['other_s']:.1f}"),
    ]
    return out


def print_table(res: Obj) -> None:
    p, m = res["params"], res["machine"]
    where = "one API" if p.get("one_api") else "the cluster's own API and the management API"
    print(f"\nCluster update ({where}): {p['nodes']} emulated nodes ({p['masters']} control "
          "plane), "
          f"2 worker groups of concurrency {p['concurrency']}, apply {p['apply_seconds']:g} s + "
          f"reboot {p['reboot_seconds']:g} s per node — {m['nproc']} cores, Python "
          f"{m['python']}; load average before/after {m['loadavg_start'][0]:.2f} / "
          f"{m['loadavg_end'][0]:.2f}")
    table = rows(res)
    w0 = max(len(t[0]) for t in table)
    for metric, value in table:
        print(f"  {metric:{w0}}  {value}")
    if "update" in res:
        top = sorted(res["update"]["calls"].items(), key=lambda kv: -kv[1])[:8]
        print("  top controller requests: " + ", ".join(f"{k} {v:,}" for k, v in top))


def problems_of(res: Obj) -> list[str]:
    out = [res["error"]] if "error" in res else []
    out += res.get("problems", [])
    out += [f"controller log: {p}" for p in res.get("controller_log_problems", [])]
    out += [f"server log: {p}" for p in res.get("server_log_problems", [])]
    return out


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, help="machines/nodes (default 500; --quick: 60)")
    p.add_argument("--concurrency", type=int,
                   help="concurrentUpdates of each worker group (default 50; --quick: 10)")
    p.add_argument("--apply-seconds", type=float,
                   help="the fake agent's apply time per node (default 20; --quick: 5)")
    p.add_argument("--reboot-seconds", type=float,
                   help="the fake power cycle + boot per node (default 20; --quick: 5)")
    p.add_argument("--kubelet-seconds", type=float, default=10.0,
                   help="Node status post period of each emulated kubelet (0: none)")
    p.add_argument("--agent-seconds", type=float, default=20.0,
                   help="LCMMachine heartbeat period of each fake agent (0: none)")
    p.add_argument("--workers", type=int, default=1, help="update controller workers")
    p.add_argument("--one-api", action="store_true",
                   help="the cluster's Nodes and maintenance objects in the management API "
                   "(no API of the cluster's own)")
    p.add_argument("--idle-seconds", type=float, help="idle window measured before the "
                   "update (default 30; --quick: 10)")
    p.add_argument("--quick", action="store_true",
                   help="60 nodes, concurrency 10, 5 s + 5 s per node: a smoke run")
    p.add_argument("--timeout", type=float, help="seconds for the update (default: "
                   "3 x the planner's lower bound + 300)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the data dir goes (default $TMPDIR)")
    p.add_argument("--keep-logs", type=Path, metavar="DIR",
                   help="copy the controller's and the API server's logs here before the "
                   "data dir is removed (to look into a slow run)")
    a = p.parse_args(argv)
    q = a.quick
    spec = FleetSpec(
        nodes=a.nodes or (60 if q else 500),
        concurrency=a.concurrency or (10 if q else 50),
        apply_seconds=a.apply_seconds if a.apply_seconds is not None else (5.0 if q else 20.0),
        reboot_seconds=a.reboot_seconds if a.reboot_seconds is not None else (5.0 if q else 20.0),
        kubelet_seconds=a.kubelet_seconds, agent_seconds=a.agent_seconds)
    if spec.nodes <= spec.masters or spec.concurrency < 1 or spec.node_seconds <= 0:
        p.error(f"--nodes must exceed {spec.masters}, --concurrency be positive and "
                "apply + reboot seconds positive")
    idle = a.idle_seconds if a.idle_seconds is not None else (10.0 if q else 30.0)
    timeout = a.timeout or 3 * lower_bound(planner(spec)) + 300
    signal.signal(signal.SIGTERM, _sigterm)
    logging.getLogger().setLevel(logging.ERROR)
    res: Obj = {"benchmark": "racksmith update", "date": dt.datetime.now(dt.UTC).isoformat(),
                "params": {"nodes": spec.nodes, "masters": spec.masters,
                           "concurrency": spec.concurrency, "apply_seconds": spec.apply_seconds,
                           "reboot_seconds": spec.reboot_seconds,
                           "kubelet_seconds": spec.kubelet_seconds,
                           "agent_seconds": spec.agent_seconds, "workers": a.workers,
                           "one_api": a.one_api,
                           "idle_seconds": idle},
                "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "loadavg_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-update-", dir=a.tmpdir) as d:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run(spec, Path(d), timeout, idle, a.workers, a.one_api, res))
        if a.keep_logs is not None:
            keep_logs(Path(d), a.keep_logs)
    res["machine"]["loadavg_end"] = os.getloadavg()
    if "result" in res:
        res["ratio"] = round(res["result"]["makespan_s"] / res["planner"]["lower_bound_s"], 4)
    res["all_problems"] = problems_of(res)
    print_table(res)
    for prob in res["all_problems"]:
        print(f"PROBLEM: {prob}")
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"results written to {a.json}")
    return 1 if res["all_problems"] or "result" not in res else 0


def keep_logs(workdir: Path, dest: Path) -> None:
    """Copy every ``*.log`` of the data dir under ``dest`` (same relative paths, 0600)."""
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    for log in sorted(workdir.rglob("*.log")):
        relative = log.relative_to(workdir)
        for folder in reversed(relative.parents):  # '.', then each level down
            (dest / folder).mkdir(exist_ok=True, mode=0o700)
        target = dest / relative
        shutil.copyfile(log, target)
        target.chmod(0o600)
        print(f"kept {target}")


if __name__ == "__main__":
    sys.exit(main())
