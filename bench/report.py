"""Writes docs/benchmarks.md's figures from the recorded benchmark results.

    .venv/bin/python bench/report.py [--results DIR] [--doc PATH] [--check]

Reads ``bench/results/*.json`` (written by ``bench/record.py``, which
``make bench`` runs for every benchmark) and replaces, in the page, each
block between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``:
``summary`` gets the table of every benchmark's headline figures with its
target and status, and each benchmark's own section its figures with the
date, the command line and the machine they were measured on. Nothing else
on the page is touched; a figure is never typed in by hand.

Each benchmark's headline figures are chosen by one function below, from
the JSON its script writes. A status is ``PASS``, ``not met`` (a target
missed: a benchmark never fails on time) or ``—`` (no target); a run that
failed is shown as failed, not replaced by an older one.

``--check`` writes nothing and exits 1 if the page differs from what the
results give (the figures were edited by hand, or the results are newer).
Exits 1 too if a recorded run failed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    """One line of a figures table."""

    what: str
    value: str
    target: str = ""
    met: bool | None = None
    """True / False against ``target``; None: no target."""
    headline: bool = True
    """Also in the summary table (else only in the benchmark's own section)."""

    @property
    def status(self) -> str:
        return "—" if self.met is None else ("PASS" if self.met else "not met")


def rate(x: float) -> str:
    return f"{x:,.0f}/s"


def secs(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f} s"


def cpu(phase: Obj) -> str:
    return (f"{phase['server_cpu_pct']:.0f}% / {phase['client_cpu_pct']:.0f}% / "
            f"{phase['other_cpu_pct']:.0f}%")


# ---------------------------------------------------------------------- benchmarks

def apiserver(r: Obj) -> list[Figure]:
    etcd = r.get("store") == "etcd"
    c, li, w, ref = r["creates"], r["list"], r["watch"], r["reference"]
    ratio = r["ratio_creates_to_raw"]
    out = [Figure(f"ConfigMap creates, C = 32 ({c['ops']:,})", rate(c["per_second"]),
                  "≥ 500/s", c["per_second"] >= 500),
           Figure("  create latency p50 / p99", f"{c['p50_ms']:.1f} / {c['p99_ms']:.1f} ms",
                  headline=False),
           Figure("  CPU: server / bench client / other", cpu(c), headline=False)]
    if etcd:
        out.append(Figure("creates ÷ raw etcd creates", f"{ratio:.2f} "
                          f"({rate(ref['per_second'])} raw)", "≥ 0.3", ratio >= 0.3))
    else:
        out.append(Figure("creates ÷ raw SQLite inserts", f"{ratio:.2f} "
                          f"({rate(ref['per_second'])} raw)", headline=False))
    g = r["gets"]
    out += [Figure("random gets, C = 32", rate(g["per_second"]), headline=False),
            Figure("  get latency p50 / p99", f"{g['p50_ms']:.1f} / {g['p99_ms']:.1f} ms",
                   headline=False),
            Figure(f"list of {li['objects']:,} objects, one request (median)",
                   secs(li["seconds_median"], 3), "< 1 s", li["seconds_median"] < 1),
            Figure(f"  the same in pages of {li['paged_limit']}",
                   secs(li["paged_seconds_median"], 3), headline=False),
            Figure(f"watch fan-out, {w['watchers']} watchers x {w['events']:,} events",
                   secs(w["seconds"]), "" if etcd else "≤ 1.5 s",
                   None if etcd else w["seconds"] <= 1.5),
            Figure("  events delivered", rate(w["events_per_second"]), headline=False),
            Figure("  CPU: server / bench client / other", cpu(w), headline=False)]
    return out


def etcd_clients(r: Obj) -> list[Figure]:
    out = []
    for row in r["rows"]:
        creates = row["metric"].startswith("creates")
        show = rate if creates else (lambda x: secs(x, 3))
        out.append(Figure(f"gRPC ÷ JSON gateway: {row['metric']}",
                          f"{row['ratio']:.2f}x better ({show(row['grpc'])} against "
                          f"{show(row['gateway'])})", headline=creates))
    return out


def hardening(r: Obj) -> list[Figure]:
    out = []
    for row in r["rows"]:
        idle = row["load"].startswith("idle")
        out.append(Figure(f"`/readyz` during {row['load']}",
                          f"p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
                          f"max {row['max_ms']:.1f} ms",
                          "" if idle else f"max ≤ {row['target_ms']:.0f} ms",
                          None if idle else row["max_ms"] <= row["target_ms"],
                          headline=not idle))
    return out


def ipam(r: Obj) -> list[Figure]:
    out = []
    for name, p in r["phases"].items():
        spread = p["spread"]
        lost = p["conflicts"] / max(1, p["n"])
        out.append(Figure(f"{p['n']:,} claims, {name}",
                          f"{rate(p['per_second'])}, {p['conflicts']:,} lost races",
                          "≥ 1,000/s, ≤ 5% lost" if spread else "",
                          (p["per_second"] >= 1000 and lost <= 0.05) if spread else None))
        out.append(Figure("  claim latency p50 / p99",
                          f"{p['p50_ms']:.1f} / {p['p99_ms']:.1f} ms", headline=False))
    return out


def backup(r: Obj) -> list[Figure]:
    rows = {row["what"]: row for row in r["rows"]}
    copy = rows.pop("plain copy of the same parts (reference)")["seconds"]
    out = [Figure("plain copy of the same files (reference)", secs(copy, 3), headline=False)]
    for what, row in rows.items():
        out.append(Figure(f"{what}, {r['objects']:,} objects",
                          f"{secs(row['seconds'], 3)} ({row['seconds'] / copy:.1f}x the copy)",
                          headline=what in ("backup create",
                                            "restore (encrypted) into a new data dir")))
    return out


def controlplane(r: Obj) -> list[Figure]:
    f = r["figures"]
    parts = ("kube-apiserver", "etcd", "haproxy")
    total_cpu = sum(f[k][0] for k in parts)
    total_rss = sum(f[k][1] for k in parts)
    ref_rss = f["reference"][1]
    out = [Figure("3 hosts' control plane, idle: CPU, RSS",
                  f"{total_cpu:.1f}% of a core, {total_rss:.0f} MiB "
                  f"({total_rss / ref_rss:.1f}x the RSS of one API server on SQLite)")]
    for k, label in (("kube-apiserver", "3 x racksmith apiserver (etcd)"),
                     ("etcd", "3 x etcd member"), ("haproxy", "3 x HAProxy"),
                     ("reference", "reference: 1 API server on SQLite")):
        out.append(Figure(f"  {label}", f"{f[k][0]:.2f}% of a core, {f[k][1]:.0f} MiB",
                          headline=False))
    out.append(Figure("  formed in", secs(r["formed_s"], 1), headline=False))
    return out


def idle(r: Obj) -> list[Figure]:
    hosts = r.get("hosts") or r.get("params", {}).get("hosts")
    return [
        Figure(f"API requests per host and minute{f', {hosts} hosts' if hosts else ''}",
               f"{r['per_host_minute']:.2f} ({r['ratio_to_kubelet_leases']:.2f}x a "
               "kubelet's 6)"),
        Figure("  requests per second, `racksmith up` CPU",
               f"{r['requests_per_s']:.2f}, {r['racksmith_up_cpu_percent']:.1f}% of a core",
               headline=False),
        Figure("  provisioner calls per host and minute",
               f"{r['provisioner_calls_per_host_minute']:.2f}", headline=False),
    ]


def console(r: Obj) -> list[Figure]:
    n, budget = r["params"]["hosts"], r["params"]["budget_s"]
    first = [x["first_screen_ms"] for x in r.get("loads", [])]
    if not first:
        return [Figure(f"hosts page, {n:,} hosts: first screen", "not measured",
                       f"< {budget:.0f} s", False)]
    out = [Figure(f"hosts page, {n:,} hosts: first screen (median, max)",
                  f"{median(first):.0f} ms, {max(first):.0f} ms", f"< {budget:.0f} s",
                  max(first) / 1000 < budget),
           Figure("  all rows in the table (median)",
                  f"{median([x['all_rows_ms'] for x in r['loads']]):.0f} ms", headline=False)]
    for key, label in (("live_update_ms", "live update: status patch to the row (median)"),
                       ("browser_list_ms", "reference: browser fetch of the full LIST"),
                       ("kubectl_ms", "reference: kubectl get baremetalhosts -A")):
        if r.get(key):
            out.append(Figure(f"  {label}", f"{median(r[key]):.0f} ms", headline=False))
    return out


def volumes(r: Obj) -> list[Figure]:
    n, cores = r["params"]["volumes"], r["machine"]["nproc"] or 1
    rs, direct = r["racksmith"], r["direct"]
    if "error" in rs or "error" in direct:
        return [Figure(f"{n} volumes", "a side failed", "both sides", False)]

    def own_cpu(x: Obj) -> float:  # bench/volumes.py's: the side's own processes
        return float(x["cpu_self_s"] + x["cpu_children_s"] + x["cpu_agents_s"]
                     + x["cpu_client_s"] + x.get("cpu_cluster_api_s", 0.0))

    floor = own_cpu(rs) / cores
    to_floor = rs["seconds"] / floor
    pairs = " ".join(f"{x['ratio']:.2f}" for x in r.get("pairs", []) if x["ratio"] is not None)
    return [
        Figure(f"{n} volumes, apply → Available: wall ÷ Racksmith's CPU floor",
               f"{to_floor:.2f} ({rs['seconds']:.2f} s; floor {floor:.2f} s)", "≤ 1.25",
               to_floor <= 1.25),
        Figure("Racksmith ÷ direct script (median pair)",
               f"{rs['seconds'] / direct['seconds']:.2f} ({direct['seconds']:.2f} s direct)"),
        Figure("  ratio of each pair, in run order", pairs, headline=False),
        Figure("  CPU per volume, Racksmith (direct)",
               f"{own_cpu(rs) / n * 1000:.1f} ms ({own_cpu(direct) / n * 1000:.1f} ms)",
               headline=False),
    ]


def update(r: Obj) -> list[Figure]:
    n, pl = r["params"]["nodes"], r["planner"]
    if "result" not in r:
        return [Figure(f"{n} nodes", f"no result: {r.get('error')}", "a result", False)]
    res, u, idle = r["result"], r["update"], r["idle"]
    ratio = res["makespan_s"] / pl["lower_bound_s"]
    calls = sum(u["calls"].values())
    idle_pct = 100 * idle["controller_s"] / idle["seconds"]
    return [
        Figure(f"{n} nodes: makespan ÷ the planner's lower bound",
               f"{ratio:.3f} ({res['makespan_s']:.1f} s against {pl['lower_bound_s']:.1f} s)",
               "≤ 1.05", ratio <= 1.05),
        Figure("controller API requests per node", f"{calls / n:.1f}", "≤ 60",
               calls / n <= 60),
        Figure("controller CPU, fleet idle", f"{idle_pct:.1f}% of a core", "≤ 5%",
               idle_pct <= 5),
        Figure("  controller CPU during the update, per node",
               f"{1000 * u['controller_s'] / n:.1f} ms", headline=False),
        Figure("  per node NMR created → deleted, p50 / max",
               f"{res['node']['p50_s']:.2f} / {res['node']['max_s']:.2f} s", headline=False),
    ]


def _phases(s: Obj, label: str, budget: float) -> list[Figure]:
    """Racksmith against the direct script, phase by phase (bench/provisioning.py's
    scenario, which bench/scale.py runs too)."""
    rs, direct = s["racksmith"], s["direct"]
    if "error" in rs or "error" in direct:
        return [Figure(label, f"failed: {rs.get('error') or direct.get('error')}",
                       "both sides", False)]
    out = []
    for phase, what in (("available", "apply → available"),
                        ("provisioned", "image → provisioned")):
        ratio = s["ratio"][phase]
        out.append(Figure(f"{label}: {what}, Racksmith ÷ direct script",
                          f"{ratio:.2f} ({rs[phase]['seconds']:.1f} s against "
                          f"{direct[phase]['seconds']:.1f} s)", f"≤ {budget:g}",
                          ratio <= budget))
        out.append(Figure(f"  {what}: Racksmith CPU, Ironic calls per host (direct)",
                          f"{rs[phase]['cpu_self_s']:.1f} s, "
                          f"{rs[phase]['ironic_calls_per_host']:.2f} "
                          f"({direct[phase]['ironic_calls_per_host']:.2f})", headline=False))
    return out


def provisioning(r: Obj) -> list[Figure]:
    out = []
    for kind, s in r["scenarios"].items():
        out += _phases(s, f"{kind}, {s['hosts']} hosts", 1.3)
    return out


def scale(r: Obj) -> list[Figure]:
    rs = r["scenario"]["racksmith"]
    return [*_phases(r["scenario"], f"{r['hosts']:,} hosts", 1.2),
            Figure("  Racksmith peak RSS, reconciles put off",
                   f"{rs['peak_rss_mib']:.1f} MiB, {rs['throttled_reconciles']}",
                   headline=False)]


def cluster(r: Obj) -> list[Figure]:
    ref, clu = r.get("reference") or {"error": "not run"}, r.get("cluster") or {
        "error": "not run"}
    if "error" in ref or "error" in clu:
        return [Figure(f"{r['hosts']} hosts", "a side failed", "both sides", False)]
    ratio = clu["seconds"] / ref["seconds"]
    out = [Figure(f"{r['hosts']} hosts, apply → Nodes Ready: cluster ÷ reference",
                  f"{ratio:.2f} ({clu['seconds']:.1f} s against {ref['seconds']:.1f} s)",
                  "≤ 1.15", ratio <= 1.15)]
    for what in ("available", "provisioned", "node ready", "machine ready"):
        if what in clu:
            out.append(Figure(f"  per host to {what}, p50 / max",
                              f"{clu[what]['p50_s']} / {clu[what]['max_s']} s",
                              headline=False))
    return out


@dataclass(frozen=True)
class Bench:
    title: str
    figures: Callable[[Obj], list[Figure]]


BENCHMARKS: dict[str, Bench] = {
    "apiserver": Bench("API server", apiserver),
    "apiserver-etcd": Bench("API server on etcd", apiserver),
    "etcd-clients": Bench("etcd clients", etcd_clients),
    "hardening": Bench("Hostile requests", hardening),
    "provisioning": Bench("Provisioning", provisioning),
    "scale": Bench("Scale", scale),
    "ipam": Bench("IPAM", ipam),
    "cluster": Bench("Hosts become nodes", cluster),
    "volumes": Bench("Local volumes", volumes),
    "update": Bench("Cluster update", update),
    "idle": Bench("Idle site", idle),
    "console": Bench("Web console", console),
    "backup": Bench("Backup", backup),
    "controlplane": Bench("Emulated control plane", controlplane),
}
"""Every benchmark of record, in the summary's order."""


# ---------------------------------------------------------------------- the page

def load(results: Path) -> dict[str, Obj]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def figures_of(name: str, record: Obj) -> list[Figure]:
    if record.get("exit") != 0 or record.get("results") is None:
        return [Figure("the run", f"failed (exit {record.get('exit')})", "ran", False)]
    return BENCHMARKS[name].figures(record["results"])


def table(rows: list[list[str]], header: list[str]) -> list[str]:
    def line(cells: list[str]) -> str:
        cells = [f"· {c.strip()}" if c.startswith("  ") else c for c in cells]
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def machine(record: Obj) -> str:
    m = record["machine"]
    probe = f", 10M-addition loop {m['loop_10m_s']} s" if m.get("loop_10m_s") else ""
    return f"{m['cpu']}, {m['cores']} cores, Python {m['python']}{probe}"


def section_block(name: str, record: Obj) -> list[str]:
    head = (f"Current figures ({record['date']}, `{record['command']}`, {machine(record)}; "
            f"load average {record['load_before']} → {record['load_after']}):")
    rows = [[f.what, f.value, f.target or "—", f.status] for f in figures_of(name, record)]
    return [head, "", *table(rows, ["Figure", "Value", "Target", "Status"])]


def summary_block(records: dict[str, Obj]) -> list[str]:
    rows = []
    for name, bench in BENCHMARKS.items():
        record = records.get(name)
        if record is None:
            rows.append([bench.title, "not recorded", "", "—", "—"])
            continue
        for f in figures_of(name, record):
            if f.headline:
                rows.append([f"{bench.title}: {f.what}", f.value, f.target or "—", f.status,
                             record["date"]])
    return table(rows, ["Benchmark", "Figure", "Target", "Status", "Date"])


def render(doc: str, records: dict[str, Obj]) -> str:
    blocks = {"summary": summary_block(records)}
    for name, record in records.items():
        if name in BENCHMARKS:
            blocks[name] = section_block(name, record)

    def replace(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in blocks:
            return m.group(0)
        return f"<!-- figures:{name} -->\n" + "\n".join(blocks[name]) + \
            f"\n<!-- /figures:{name} -->"

    return re.sub(r"<!-- figures:([\w-]+) -->\n.*?<!-- /figures:\1 -->", replace, doc,
                  flags=re.S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--check", action="store_true",
                   help="exit 1 if the page's figures differ from the results")
    args = p.parse_args(argv)
    recorded = load(args.results)
    records = {k: v for k, v in recorded.items() if k in BENCHMARKS}
    unknown = sorted(set(recorded) - set(BENCHMARKS))
    if unknown:
        print(f"results of no known benchmark (ignored): {', '.join(unknown)}")
    old = args.doc.read_text()
    new = render(old, records)
    missing = [n for n in ("summary", *records) if f"<!-- figures:{n} -->" not in old]
    if missing:
        print(f"{args.doc} has no block for: {', '.join(missing)}", file=sys.stderr)
        return 1
    failed = sorted(n for n, r in records.items() if r.get("exit") != 0)
    if args.check:
        if new != old:
            print(f"{args.doc}: the figures differ from {args.results} "
                  "(run bench/report.py)", file=sys.stderr)
            return 1
    elif new != old:
        args.doc.write_text(new)
        print(f"{args.doc}: figures written from {len(records)} recorded runs")
    for name in failed:
        print(f"FAILED RUN: {name}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
