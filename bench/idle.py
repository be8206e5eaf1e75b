"""Benchmark of an idle site: the API requests a Ready cluster costs per host.

Owns the idle part of ``make bench``. Starts ``racksmith up`` (a process of
its own, fake hardware: the emulated hosts boot at once) with the demo
cluster of ``examples/cluster`` plus ``--workers`` extra worker Machines,
one emulated host each, waits until every Machine is Ready, lets the site
settle, then reads the API server's ``apiserver_request_total``
(``/metrics``) at the start and the end of a ``--seconds`` window and
prints what the idle site asked of the API server: requests per second,
per host and minute, and the busiest (verb, resource) rows; and, from the
controllers' own counters on the same ``/metrics``, the reconciles per
controller and the provisioner calls (what the BareMetalHost controller asked
of Ironic's side) in the window. An idle site should make next to no
provisioner calls: each settled host looks again every 5 minutes.
``--hardware redfish`` deploys through the emulated BMCs and Ironic's ramdisk
agent (minutes, not seconds), the way a real host is deployed: a host's
deploy-time polling then shows whether it settles afterwards.

The reference, measured in the same run, is what a real node costs a
kube-apiserver when nothing happens: its kubelet renews its node Lease every
10 s (6 requests per node and minute; the Node's status is posted every 5
minutes or on change). The ratio printed is Racksmith's requests per host
and minute over that. Shown, not enforced: this is a benchmark, not a test.

Only 127.0.0.1 is contacted; ``racksmith up`` is stopped by PID (SIGTERM,
then SIGKILL) and the temporary directory removed.

    .venv/bin/python bench/idle.py [--workers K] [--hardware fake|redfish] [--settle S]
                                   [--seconds W] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import ssl
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from apiserver import Server, start_server
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "cluster"
DEMO_MACHINES = 6
KUBELET_LEASE_PER_MINUTE = 6.0
"""The reference: a real kubelet's node Lease renewals (every 10 s)."""
READY_TIMEOUT = 600.0


def manifests(into: Path, workers: int) -> Path:
    """The demo cluster's manifests, plus ``workers`` worker Machines like its own."""
    into.mkdir(parents=True)
    for path in sorted(DEMO.glob("*.yaml")):
        (into / path.name).write_text(path.read_text())
    docs = [d for d in yaml.safe_load_all((DEMO / "40-machines.yaml").read_text()) if d]
    worker = next(d for d in docs if d["spec"]["roles"] == ["node"])
    extra = []
    for i in range(workers):
        machine = json.loads(json.dumps(worker))
        machine["metadata"]["name"] = f"demo-extra-{i:03d}"
        extra.append(machine)
    (into / "50-extra-workers.yaml").write_text(yaml.safe_dump_all(extra))
    return into


def get(server: Server, path: str) -> bytes:
    ctx = ssl.create_default_context(cafile=str(server.ca_path))
    req = urllib.request.Request(server.url + path,
                                 headers={"Authorization": f"Bearer {server.token}"})
    with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
        return bytes(resp.read())


def counted(server: Server) -> tuple[Counter[tuple[str, str, str]], Counter[tuple[str, str]]]:
    """From one read of ``/metrics``: apiserver_request_total by (verb,
    resource, subresource), codes summed; and the controllers' reconciles by
    (controller, "reconciles") and provisioner calls by ("provisioner",
    operation)."""
    requests: Counter[tuple[str, str, str]] = Counter()
    controllers: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(get(server, "/metrics").decode()):
        for s in family.samples:
            if s.name == "apiserver_request_total":
                requests[(s.labels["verb"], s.labels["resource"],
                          s.labels["subresource"])] += int(s.value)
            elif s.name == "racksmith_reconcile_total":
                controllers[(s.labels["controller"], "reconciles")] += int(s.value)
            elif s.name == "racksmith_baremetalhost_provisioner_calls_total":
                controllers[("provisioner", s.labels["operation"])] += int(s.value)
    return requests, controllers


def machines_ready(server: Server) -> tuple[int, int]:
    body = json.loads(get(server, "/apis/cluster.racksmith.io/v1alpha1/machines"))
    items = body.get("items") or []
    ready = sum(1 for m in items if (m.get("status") or {}).get("phase") == "Ready")
    return ready, len(items)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=0,
                   help="worker Machines beside the demo cluster's six (one host each)")
    p.add_argument("--hardware", choices=("fake", "redfish"), default="fake",
                   help="the emulated hosts' BMCs (racksmith up --hardware)")
    p.add_argument("--settle", type=float, default=30.0,
                   help="seconds between every Machine Ready and the window")
    p.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the data dir goes (default $TMPDIR)")
    a = p.parse_args(argv)
    hosts = DEMO_MACHINES + a.workers
    res: dict[str, Any] = {"benchmark": "racksmith idle site", "hosts": hosts,
                           "hardware": a.hardware,
                           "date": dt.datetime.now(dt.UTC).isoformat(),
                           "machine": {"nproc": os.cpu_count(),
                                       "python": platform.python_version(),
                                       "loadavg_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-idle-", dir=a.tmpdir) as d:
        tmp = Path(d)
        applied = manifests(tmp / "manifests", a.workers)
        print(f"  starting racksmith up with {hosts} emulated hosts ...", flush=True)
        server = start_server(tmp / "data", command=("up",), extra=(
            "--emulate-hosts", str(hosts), "--apply-emulated-hosts", "--hardware", a.hardware,
            "--apply", str(applied)))
        try:
            t0 = time.monotonic()
            while True:
                ready, total = machines_ready(server)
                if total >= hosts and ready == total:
                    break
                if time.monotonic() - t0 > READY_TIMEOUT:
                    raise SystemExit(f"only {ready}/{total} Machines Ready after "
                                     f"{READY_TIMEOUT:.0f} s")
                time.sleep(2)
            res["seconds_to_ready"] = round(time.monotonic() - t0, 1)
            print(f"  every Machine Ready after {res['seconds_to_ready']} s; settling "
                  f"{a.settle:.0f} s, then {a.seconds:.0f} s measured ...", flush=True)
            time.sleep(a.settle)
            (before, counts_before), start_cpu, start = counted(server), \
                server.cpu_seconds(), time.monotonic()
            time.sleep(a.seconds)
            (after, counts_after), cpu, window = counted(server), \
                server.cpu_seconds() - start_cpu, time.monotonic() - start
            counts = counts_after - counts_before
        finally:
            server.stop()
    rows = (after - before)
    rows.pop(("GET", "", ""), None)  # this benchmark's own /metrics reads
    total = sum(rows.values())
    per_host_minute = total / hosts / (window / 60.0)
    res.update(window_s=round(window, 1), requests=total,
               requests_per_s=round(total / window, 2),
               per_host_minute=round(per_host_minute, 2),
               ratio_to_kubelet_leases=round(per_host_minute / KUBELET_LEASE_PER_MINUTE, 2),
               racksmith_up_cpu_percent=round(100 * cpu / window, 1),
               top=[{"verb": v, "resource": f"{r}/{s}" if s else r, "requests": n}
                    for (v, r, s), n in rows.most_common(12)],
               reconciles={c: n for (c, what), n in sorted(counts.items())
                           if what == "reconciles"},
               provisioner_calls={op: n for (c, op), n in sorted(counts.items())
                                  if c == "provisioner"})
    calls = sum(res["provisioner_calls"].values())
    res["provisioner_calls_per_host_minute"] = round(calls / hosts / (window / 60.0), 2)
    res["machine"]["loadavg_end"] = os.getloadavg()
    print(f"An idle site of {hosts} Ready Machines ({os.cpu_count()} cores, Python "
          f"{platform.python_version()}); load average before/after "
          f"{res['machine']['loadavg_start'][0]:.2f} / {res['machine']['loadavg_end'][0]:.2f}")
    print(f"  {'requests to the API server in the window':<60}{total:>10} in {window:.0f} s")
    print(f"  {'requests per second':<60}{res['requests_per_s']:>10}")
    print(f"  {'per host and minute (reference: a kubelet, 6)':<60}{per_host_minute:>10.2f}")
    print(f"  {'ratio to the reference':<60}{res['ratio_to_kubelet_leases']:>10.2f}")
    print(f"  {'racksmith up CPU (% of one core, Ironic aside)':<60}"
          f"{res['racksmith_up_cpu_percent']:>10}")
    print("  the busiest:")
    for row in res["top"]:
        print(f"    {row['requests']:>6}  {row['verb']:<7} {row['resource']}")
    print(f"  {'provisioner calls in the window (per host and minute)':<60}{calls:>10} "
          f"({res['provisioner_calls_per_host_minute']})")
    for op, n in res["provisioner_calls"].items():
        print(f"    {n:>6}  {op}")
    print("  reconciles in the window, by controller:")
    for controller, n in sorted(res["reconciles"].items(), key=lambda kv: -kv[1]):
        if n:
            print(f"    {n:>6}  {controller}")
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"results written to {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
