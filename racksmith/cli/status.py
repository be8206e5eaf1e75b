"""``racksmith status``: the site as a tree, and whether it is all Ready.

Owns :func:`site_tree` (pure: clusters → control plane and workers →
machine → host, each line with its phase or state, and the first failing
condition's reason and message marked ``!``) and :func:`site_status` (reads
Clusters, Machines and BareMetalHosts live through the kubeconfig with the
runtime ``Client``; ``wait``: again every 2 s until everything is Ready or
the timeout). Everything is Ready when every Cluster's Ready condition is
True and every Machine's phase is Ready; the exit code says so (0 Ready, 1
not), so scripts can rely on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from racksmith.runtime.client import Client
from racksmith.runtime.errors import ApiError
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.resources import CLUSTERS, HOSTS, MACHINES

Obj = Mapping[str, Any]
CONTROL_ROLES = frozenset({"master", "etcd"})


def _first_problem(obj: Obj) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "False" and cond.get("type") != "Ready":
            return f"{cond.get('type')}: {cond.get('reason')}: {cond.get('message') or ''}"
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "False":
            return f"{cond.get('reason')}: {cond.get('message') or ''}"
    return None


def _ready(obj: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def site_tree(clusters: Sequence[Obj], machines: Sequence[Obj],
              hosts: Sequence[Obj]) -> tuple[list[str], bool]:
    """The tree's lines and whether everything is Ready."""
    lines: list[str] = []
    all_ready = bool(clusters)
    by_host = {(h["metadata"].get("namespace"), h["metadata"]["name"]): h for h in hosts}
    if not clusters:
        lines.append("no Cluster yet (docs/cluster.md)")
    for cluster in sorted(clusters, key=lambda c: (c["metadata"].get("namespace", ""),
                                                   c["metadata"]["name"])):
        meta = cluster["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        status = cluster.get("status") or {}
        ready = _ready(cluster)
        all_ready = all_ready and ready
        release = status.get("release") or (cluster.get("spec") or {}).get("release")
        lines.append(f"cluster {ns}/{name}: {'Ready' if ready else 'not Ready'} "
                     f"({status.get('machinesReady', 0)}/{status.get('machinesTotal', 0)} "
                     f"machines, release {release})")
        endpoint = status.get("controlPlaneEndpoint") or {}
        if endpoint.get("host"):
            reach: Obj = next((c for c in status.get("conditions") or []
                          if c.get("type") == "ControlPlaneReachable"), {})
            lines.append(f"  endpoint https://{endpoint['host']}:{endpoint.get('port')} "
                         f"(reachable: {reach.get('status', 'Unknown')}, "
                         f"{reach.get('reason', 'NotProbed')}; "
                         f"racksmith kubeconfig --cluster {ns}/{name})")
        problem = _first_problem(cluster)
        if problem and not ready:
            lines.append(f"  ! {problem}")
        members = [m for m in machines if m["metadata"].get("namespace") == ns
                   and (m.get("spec") or {}).get("clusterName") == name]
        for title, group in (("control plane", [m for m in members if CONTROL_ROLES & set(
                (m.get("spec") or {}).get("roles") or [])]),
                             ("workers", [m for m in members if not CONTROL_ROLES & set(
                                 (m.get("spec") or {}).get("roles") or [])])):
            if not group:
                continue
            up = sum(1 for m in group if (m.get("status") or {}).get("phase") == "Ready")
            lines.append(f"  {title}: {up}/{len(group)} Ready")
            for machine in sorted(group, key=lambda m: m["metadata"]["name"]):
                mstatus = machine.get("status") or {}
                phase = mstatus.get("phase") or "Pending"
                all_ready = all_ready and phase == "Ready"
                lines.append(f"    machine {machine['metadata']['name']}: {phase}")
                if phase != "Ready":
                    problem = _first_problem(machine)
                    if problem:
                        lines.append(f"      ! {problem}")
                ref = mstatus.get("hostRef") or {}
                host = by_host.get((ns, ref.get("name")))
                if host is not None:
                    hstatus = host.get("status") or {}
                    state = (hstatus.get("provisioning") or {}).get("state") or "-"
                    op = hstatus.get("operationalStatus") or "-"
                    lines.append(f"      host {host['metadata']['name']}: {state} ({op})")
                    if hstatus.get("errorMessage"):
                        lines.append(f"        ! {hstatus.get('errorType')}: "
                                     f"{hstatus.get('errorMessage')}")
    return lines, all_ready


async def site_status(kubeconfig: Path | None, *, wait: bool = False,
                      timeout: float = 900.0) -> tuple[int, list[str]]:
    """(exit code, lines): 0 when everything is Ready, 1 otherwise (or on an
    API error, named)."""
    client = await api_client(kubeconfig)
    api = Client(client, field_manager="racksmith-cli")
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                lines, ready = site_tree(await api.list(CLUSTERS, live=True),
                                         await api.list(MACHINES, live=True),
                                         await api.list(HOSTS, live=True))
            except ApiError as exc:
                return 1, [f"cannot read the site: {exc}"]
            if ready or not wait or time.monotonic() >= deadline:
                return (0 if ready else 1), lines
            await asyncio.sleep(2.0)
    finally:
        await client.close()
