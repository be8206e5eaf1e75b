"""The cluster progress lines of ``racksmith up --progress``.

Owns: turning the Clusters and Machines the API holds into one line per
cluster whenever it changes (``cluster default/demo: 2/6 Ready — Provisioning
3, Deploying 1``), and a final line when a cluster becomes Ready. Polls
through the runtime ``Client``, which answers from the controllers' shared
informers of Clusters and Machines when they run (no second copy of every
Machine is made, and the API server is not asked: a live list of every
Machine every 3 s was the largest request of an idle site), and lists live
otherwise; never writes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from racksmith.runtime.client import as_client
from racksmith.runtime.errors import ApiError
from racksmith.runtime.resources import CLUSTERS, MACHINES


def summarize(clusters: list[dict[str, Any]], machines: list[dict[str, Any]]) -> dict[str, str]:
    """One progress line per cluster (key ``namespace/name``); pure."""
    lines: dict[str, str] = {}
    for cluster in clusters:
        meta = cluster.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        mine = [m for m in machines
                if (m.get("metadata") or {}).get("namespace") == ns
                and (m.get("spec") or {}).get("clusterName") == name]
        phases = Counter(str((m.get("status") or {}).get("phase") or "Pending") for m in mine)
        ready = phases.pop("Ready", 0)
        rest = ", ".join(f"{phase} {count}" for phase, count in sorted(phases.items()))
        line = f"cluster {ns}/{name}: {ready}/{len(mine)} machines Ready"
        if rest:
            line += f" — {rest}"
        elif mine:
            line += " — the cluster is Ready"
        lines[f"{ns}/{name}"] = line
    return lines


async def follow_clusters(api_client: Any, emit: Callable[[str], None],
                          interval: float = 3.0) -> None:
    """Emit a cluster's line each time it changes, until cancelled."""
    client = as_client(api_client)
    shown: dict[str, str] = {}
    while True:
        try:
            clusters = await client.list(CLUSTERS, copy=False)
            machines = await client.list(MACHINES, copy=False)
        except ApiError:
            await asyncio.sleep(interval)
            continue
        for key, line in summarize(clusters, machines).items():
            if shown.get(key) != line:
                shown[key] = line
                emit(line)
        await asyncio.sleep(interval)
