"""Benchmark of one Racksmith process at 1,000 hosts.

Owns the scale run: N (default 1,000) hosts with instant hardware (Ironic's
fake-hardware driver, ``fake://`` BMCs) applied to one in-process
``racksmith up`` (API server, controllers, Ironic), from apply to
``available`` and from ``spec.image`` to ``provisioned``, against the
direct script of ``bench/provisioning.py`` on a fresh Ironic in the same
run (the same two phases, the same Ironic settings). Budget: Racksmith ÷
direct ≤ 1.2 for each phase (shown, not enforced).

Also reported, for the Racksmith side: the benchmark process's CPU seconds
per phase (Racksmith's API server and controllers run in it) and its peak
RSS, Ironic API calls per host (and, for both sides, Ironic's API requests
by kind: ``bench/ironic_log.py``), and — with the N provisioned hosts still
in place — the console's hosts page (``/console/#/hosts``) first screen in
Debian's headless chromium (the measurement of ``bench/console.py``,
median of R loads after a warm-up).

    .venv/bin/python bench/scale.py [--hosts N] [--loads R] [--skip-console]
        [--phase-timeout S] [--json PATH]

Only 127.0.0.1 is contacted; every process started is killed at the end
(the data dir is on its command line). Exit status 1 if a phase failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import platform
import resource
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import console as console_bench
import provisioning as prov
from rich.console import Console
from rich.table import Table

from racksmith.app.logs import configure_logging
from racksmith.app.runner import Racksmith

Obj = dict[str, Any]
TARGET_RATIO = 1.2


@dataclass
class ConsoleServer:
    """What ``console.browser_phase`` needs of a server."""

    url: str
    token: str
    ca_path: Path


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def throttled(rs: Racksmith) -> int:
    """Reconciles the BareMetalHost controller put off for a host's call budget
    (``racksmith_baremetalhost_throttled_total``), both phases."""
    text = rs.manager.metrics_text() if rs.manager is not None else b""
    for line in text.decode().splitlines():
        if line.startswith("racksmith_baremetalhost_throttled_total "):
            return int(float(line.split()[1]))
    return 0


def console_hook(hosts: int, loads: int, skip: bool, tmp: Path) -> prov.AfterHook:
    """The console measurement after the provisioning phases, with the ``hosts``
    BareMetalHosts in place (the first screen and "all rows" wait for them)."""
    async def after(rs: Racksmith, out: Obj) -> None:
        out["peak_rss_mib"] = round(peak_rss_mib(), 1)
        out["throttled_reconciles"] = throttled(rs)
        if skip:
            return
        assert rs.server is not None and rs.server.ca_pem is not None
        ca = tmp / "ca.pem"
        ca.write_bytes(rs.server.ca_pem)
        server = ConsoleServer(rs.server.url, rs.server.token, ca)
        result: Obj = {}
        print("  [scale] console: hosts page first screen ...", flush=True)
        try:
            # Playwright's sync API runs in a thread; Racksmith keeps serving on this loop.
            await asyncio.to_thread(console_bench.browser_phase, server,  # type: ignore[arg-type]
                                    hosts, loads, 0, result)
        except Exception as exc:  # reported; the provisioning figures stand
            out["console_error"] = f"{type(exc).__name__}: {exc}"
            return
        firsts = [run["first_screen_ms"] for run in result.get("loads", [])]
        out["console"] = {"first_screen_ms_median": round(statistics.median(firsts), 1)
                          if firsts else None,
                          "first_screen_ms_max": round(max(firsts), 1) if firsts else None,
                          "problems": result.get("problems", [])[:5]}
        out["peak_rss_mib"] = round(peak_rss_mib(), 1)

    return after


def rows_of(res: Obj) -> list[tuple[str, ...]]:
    r, d, ratio = res["racksmith"], res["direct"], res.get("ratio", {})
    rows: list[tuple[str, ...]] = []
    na = "-"
    for phase, title in (("available", "apply → available"),
                         ("provisioned", "image → provisioned")):
        rp, dp = r.get(phase) or {}, d.get(phase) or {}
        q = ratio.get(phase)
        verdict = na if q is None else ("PASS" if q <= TARGET_RATIO else "over")
        rows.append((title, f"{rp.get('seconds', na)}", f"{dp.get('seconds', na)}",
                     f"{q:.2f}" if q is not None else na, f"<= {TARGET_RATIO}", verdict,
                     f"{rp.get('cpu_self_s', na)}", f"{rp.get('ironic_calls_per_host', na)}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--loads", type=int, default=3, help="console page loads (after a warm-up)")
    p.add_argument("--skip-console", action="store_true")
    p.add_argument("--phase-timeout", type=float, default=1800.0)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    _, params = prov.parse_args(["--fake-hosts", str(a.hosts), "--skip-redfish",
                                 "--phase-timeout", str(a.phase_timeout)])
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    configure_logging("warning")
    logging.getLogger().setLevel(logging.ERROR)
    results: Obj = {"benchmark": "racksmith scale", "date": dt.datetime.now(dt.UTC).isoformat(),
                    "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                                "loadavg_start": os.getloadavg()}, "hosts": a.hosts}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-scale-") as d:
        tmp = Path(d)
        try:
            res = asyncio.run(prov.run_scenario(
                "fake", a.hosts, tmp, params, console_hook(a.hosts, a.loads, a.skip_console, tmp)))
        finally:
            prov.reap(str(tmp))
    res["racksmith"]["hosts"] = a.hosts
    results["scenario"] = res
    results["machine"]["loadavg_end"] = os.getloadavg()
    table = Table(title=f"One Racksmith process, {a.hosts} fake-hardware hosts — "
                        f"{os.cpu_count()} cores (load {results['machine']['loadavg_start'][0]:.2f}"
                        f" → {results['machine']['loadavg_end'][0]:.2f})")
    for col in ("phase", "Racksmith s", "direct s", "ratio", "budget", "", "Racksmith CPU s",
                "Ironic calls/host"):
        table.add_column(col)
    for row in rows_of(res):
        table.add_row(*row)
    Console(width=140).print(table)
    r = res["racksmith"]
    print(f"peak RSS of the Racksmith process: {r.get('peak_rss_mib', '-')} MiB")
    print("reconciles put off for a host's provisioner call budget: "
          f"{r.get('throttled_reconciles', '-')}")
    if "console" in r:
        c = r["console"]
        print(f"console hosts page, first screen: median {c['first_screen_ms_median']} ms, "
              f"max {c['first_screen_ms_max']} ms ({a.loads} loads)")
    prov.print_requests({"scenarios": {"fake": res}})
    problems = [f"{side}: {res[side]['error']}" for side in ("racksmith", "direct")
                if "error" in res[side]]
    if "console_error" in r:
        print(f"console: {r['console_error']}")
    for prob in problems:
        print(f"PROBLEM: {prob}")
    if a.json is not None:
        a.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
