"""Ironic's API requests by kind, read off its log: what a client's traffic costs Ironic.

Ironic logs every API request at INFO (``ironic.api``) with its method, path
(query included), status and the time it took to answer::

    ... INFO ironic.api [...] 127.0.0.1 - GET /v1/nodes/n-1?fields=... - 200 (4.21ms)

``summarize`` groups them by kind — the method and the path with node names
and UUIDs replaced by ``{node}``/``{uuid}`` and the query reduced to its
parameter names — within time windows (a benchmark's phases), and gives the
count and the summed answer time of each kind. Answer time is wall time,
not CPU: on a saturated Ironic it includes the wait for its one worker, so
compare the two sides' totals per kind, not their absolute values.

    .venv/bin/python bench/ironic_log.py IRONIC_LOG [IRONIC_LOG ...]

prints one table per log (the whole log as one window).
"""

from __future__ import annotations

import re
import sys
import urllib.parse
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

LINE = re.compile(
    r"^(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .* ironic\.api \[[^\]]*\] \S+ - "
    r"(?P<method>[A-Z]+) (?P<path>\S+) - (?P<status>\d{3}) \((?P<ms>[\d.]+)ms\)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

Window = tuple[str, datetime, datetime]
"""(name, from, to): local times as Ironic writes them."""

Summary = dict[str, dict[str, tuple[int, float]]]
"""window → request kind → (count, summed answer ms)."""


def kind_of(method: str, path: str, status: str) -> str:
    """``GET /v1/nodes/{node}?fields`` for ``GET /v1/nodes/h-7?fields=a,b``."""
    split = urllib.parse.urlsplit(path)
    parts = [UUID.sub("{uuid}", p) for p in split.path.split("/")]
    if len(parts) > 3 and parts[1] == "v1" and parts[2] == "nodes" and parts[3] != "{uuid}" \
            and parts[3] != "detail":
        parts[3] = "{node}"
    query = sorted({k for k, _ in urllib.parse.parse_qsl(split.query)})
    out = f"{method} {'/'.join(parts)}" + (f"?{','.join(query)}" if query else "")
    return out if status.startswith("2") else f"{out} [{status}]"


def summarize(lines: Iterable[str], windows: Sequence[Window]) -> Summary:
    out: Summary = {name: {} for name, _, _ in windows}
    for line in lines:
        m = LINE.match(line)
        if m is None:
            continue
        when = datetime.strptime(m["when"], "%Y-%m-%d %H:%M:%S.%f")
        kind = kind_of(m["method"], m["path"], m["status"])
        for name, start, end in windows:
            if start <= when <= end:
                count, ms = out[name].get(kind, (0, 0.0))
                out[name][kind] = (count + 1, ms + float(m["ms"]))
    return out


def read(log: Path, windows: Sequence[Window]) -> Summary:
    with log.open(errors="replace") as f:
        return summarize(f, windows)


def table(sides: dict[str, dict[str, tuple[int, float]]], hosts: int = 0) -> list[str]:
    """One line per request kind: count and summed seconds per side (per host
    when ``hosts``), busiest first."""
    names = list(sides)
    kinds = sorted({k for s in sides.values() for k in s},
                   key=lambda k: -max(s.get(k, (0, 0.0))[1] for s in sides.values()))
    head = f"{'request kind':58}" + "".join(f"{n + ' n':>14}{n + ' s':>12}" for n in names)
    lines = [head]
    for k in kinds:
        row = f"{k[:58]:58}"
        for n in names:
            count, ms = sides[n].get(k, (0, 0.0))
            shown = f"{count / hosts:.2f}/host" if hosts else str(count)
            row += f"{shown:>14}{ms / 1000:>12.1f}"
        lines.append(row)
    totals = f"{'total':58}"
    for n in names:
        count = sum(c for c, _ in sides[n].values())
        ms = sum(v for _, v in sides[n].values())
        totals += f"{(f'{count / hosts:.2f}/host' if hosts else str(count)):>14}{ms / 1000:>12.1f}"
    lines.append(totals)
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    everything = (datetime.min, datetime.max)
    sides = {Path(p).parent.parent.name or p: read(Path(p), [("all", *everything)])["all"]
             for p in argv}
    print("\n".join(table(sides)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
