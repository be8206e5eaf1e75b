"""The live display of ``racksmith up`` on a terminal.

Owns what a person watching ``make up`` sees: the start-up steps (each with
a tick once the next one began), the elapsed time, the site in counts —
hosts by provisioning state, machines by phase, volumes by phase, update
plans by phase — a progress bar per cluster (machines Ready of all), and the
last warning or error logged (the log lines themselves go to
``DATA/logs/racksmith.log``). :func:`site_counts` is pure (lists of objects
in, counts out) and :meth:`LiveDisplay.render` a pure function of the
display's state, both tested directly; :meth:`LiveDisplay.run` polls the API
every ``interval`` seconds through the runtime Client and refreshes a
``rich.live.Live``. Without a terminal ``racksmith up`` never builds one:
its output stays line-based (racksmith.cli.main).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

Obj = dict[str, Any]


@dataclass
class ClusterProgress:
    name: str
    ready: int
    total: int
    phase: str


@dataclass
class SiteCounts:
    hosts: Counter[str] = field(default_factory=Counter)
    machines: Counter[str] = field(default_factory=Counter)
    volumes: Counter[str] = field(default_factory=Counter)
    plans: Counter[str] = field(default_factory=Counter)
    clusters: list[ClusterProgress] = field(default_factory=list)


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def site_counts(hosts: list[Obj], machines: list[Obj], clusters: list[Obj],
                volumes: list[Obj], plans: list[Obj]) -> SiteCounts:
    """The site in counts (pure)."""
    counts = SiteCounts()
    for host in hosts:
        counts.hosts[str((_status(host).get("provisioning") or {}).get("state")
                         or "registering")] += 1
    for machine in machines:
        counts.machines[str(_status(machine).get("phase") or "Pending")] += 1
    for volume in volumes:
        counts.volumes[str(_status(volume).get("phase") or "Pending")] += 1
    for plan in plans:
        counts.plans[str(_status(plan).get("phase") or "Pending")] += 1
    for cluster in clusters:
        meta = cluster.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        mine = [m for m in machines if (m.get("metadata") or {}).get("namespace") == ns
                and (m.get("spec") or {}).get("clusterName") == name]
        ready = sum(1 for m in mine if _status(m).get("phase") == "Ready")
        phase = str(_status(cluster).get("phase") or ("Ready" if mine and ready == len(mine)
                                                      else "Pending"))
        counts.clusters.append(ClusterProgress(f"{ns}/{name}", ready, len(mine), phase))
    return counts


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class ProblemHandler(logging.Handler):
    """Keeps the last WARNING or worse (already redacted by the formatter)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.last = ""
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:
            text = f"a {record.levelname} record of {record.name}"
        self.last = text.splitlines()[0][:300] if text else ""
        self.count += 1


class LiveDisplay:
    """The state the display shows, and the loop that shows it."""

    def __init__(self, log_file: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.steps: list[str] = []
        self.counts: SiteCounts | None = None
        self.log_file = log_file
        self.problems = ProblemHandler()
        self.ready_line = ""
        self.ready = False

    def step(self, message: str) -> None:
        """A start-up step. Cluster progress lines (``cluster NS/NAME: ...``)
        are not steps here: the progress bars show them."""
        if message.startswith("cluster "):
            return
        if message == "ready":
            self.ready = True
        self.steps.append(message)

    def render(self) -> RenderableType:
        parts: list[RenderableType] = []
        done = self.ready
        elapsed = _elapsed(self.clock() - self.started)
        title = Text.assemble(("racksmith up", "bold"), f"  {elapsed}",
                              ("  ready" if done else "  starting", "green" if done else "cyan"))
        parts.append(title)
        for i, message in enumerate(self.steps[-8:]):
            last = i == len(self.steps[-8:]) - 1 and not done
            parts.append(Text.assemble(("  … " if last else "  ✓ ", "cyan" if last else "green"),
                                       message))
        counts = self.counts
        if counts is not None:
            table = Table.grid(padding=(0, 2))
            table.add_column(style="bold")
            table.add_column()
            for label, counter in (("hosts", counts.hosts), ("machines", counts.machines),
                                   ("volumes", counts.volumes), ("update plans", counts.plans)):
                if counter:
                    total = sum(counter.values())
                    table.add_row(label, f"{total}: " + ", ".join(
                        f"{state} {n}" for state, n in sorted(counter.items())))
            parts.append(table)
            for cluster in counts.clusters:
                bar = Table.grid(padding=(0, 1))
                bar.add_row(Text(f"cluster {cluster.name}", style="bold"),
                            ProgressBar(total=max(cluster.total, 1), completed=cluster.ready,
                                        width=30),
                            f"{cluster.ready}/{cluster.total} machines Ready",
                            Text(cluster.phase, style="green" if cluster.phase == "Ready"
                                 else "yellow"))
                parts.append(bar)
        if self.ready_line:
            parts.append(Text(self.ready_line, style="green"))
        if self.problems.count:
            parts.append(Text(f"{self.problems.count} warning(s); last: {self.problems.last}",
                              style="yellow"))
        if self.log_file:
            parts.append(Text(f"logs: {self.log_file}  (--verbose to show them here)",
                              style="dim"))
        return Group(*parts)

    async def run(self, fetch: Callable[[], Awaitable[SiteCounts | None]],
                  console: Console, interval: float = 2.0) -> None:
        """Refresh until cancelled; ``fetch`` returns None while the API is not up."""
        with Live(self.render(), console=console, refresh_per_second=4,
                  transient=False, redirect_stdout=True, redirect_stderr=True) as live:
            next_fetch = 0.0
            try:
                while True:
                    now = self.clock()
                    if now >= next_fetch:
                        next_fetch = now + interval
                        try:
                            counts = await fetch()
                        except Exception:  # the display never stops racksmith up
                            counts = None
                        if counts is not None:
                            self.counts = counts
                    live.update(self.render())
                    await asyncio.sleep(0.25)
            finally:
                live.update(self.render())
