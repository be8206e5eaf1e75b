"""Runs one benchmark script and keeps its results for docs/benchmarks.md.

    .venv/bin/python bench/record.py NAME -- .venv/bin/python bench/X.py [ARGS]

Runs the command with ``--json`` added (to a temporary file), then writes
``bench/results/NAME.json``: the script's own JSON results, the command line,
the date, the machine (CPU model, cores, a pure-Python speed probe) and the
load average before and after. A run that fails (non-zero exit, or no JSON)
is recorded as failed with its exit status, so the figures page shows it
instead of the last good run. ``bench/report.py`` turns the recorded results
into the page's figures tables; ``make bench`` calls both.

Exits with the script's status.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def python_speed() -> float:
    """Seconds for a pure-Python loop of 10 million additions (the page
    compares machines by it)."""
    start = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.perf_counter() - start, 2)


def machine() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count(),
            "python": platform.python_version(), "loop_10m_s": python_speed()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", help="the results file's name (bench/results/NAME.json)")
    p.add_argument("--results", type=Path, default=RESULTS, help="where NAME.json goes")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the benchmark's command line")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        p.error("no command given")
    args.results.mkdir(exist_ok=True)
    record: dict[str, Any] = {
        "name": args.name,
        "command": " ".join(["python", *command[1:]]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "load_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-") as tmp:
        out = Path(tmp) / "results.json"
        started = time.monotonic()
        rc = subprocess.call([*command, "--json", str(out)])
        record["seconds"] = round(time.monotonic() - started, 1)
        record["load_after"] = round(os.getloadavg()[0], 2)
        record["exit"] = rc
        try:
            record["results"] = json.loads(out.read_text())
        except (OSError, ValueError):
            record["results"] = None
            rc = rc or 1
            record["exit"] = rc
    out_path = args.results / f"{args.name}.json"
    out_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded {out_path} (exit {rc})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
