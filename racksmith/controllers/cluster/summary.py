"""The Cluster controller's pure core: a Cluster's status from its Machines.

Owns ``summarize``: ``machinesTotal`` and ``machinesReady`` (Machines of the
cluster in phase Ready), ``release`` (set when every machine runs the
cluster's release; otherwise the previous value stays, so it keeps naming
what all machines ran last), ``observedGeneration`` and the conditions
``ReleaseFound``, ``BootstrapUnique`` (``planners.roles.check_bootstrap``)
and ``Ready`` (at least one machine and all Ready). Pure: the caller passes
the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from racksmith.kinds.cluster import Cluster, ClusterStatus, Machine, MachinePhase
from racksmith.planners.roles import check_bootstrap
from racksmith.runtime.conditions import ConditionSpec, set_condition

RELEASE_FOUND = "ReleaseFound"
BOOTSTRAP_UNIQUE = "BootstrapUnique"
READY = "Ready"


def members(cluster: Cluster, machines: Sequence[Machine]) -> list[Machine]:
    """The Machines of ``machines`` that join ``cluster`` (same namespace)."""
    meta = cluster.metadata
    return [m for m in machines if m.spec.cluster_name == meta.name
            and m.metadata.namespace == meta.namespace]


def summarize(
    cluster: Cluster, machines: Sequence[Machine], release_found: bool, *, now: datetime
) -> ClusterStatus:
    """The status ``cluster`` should show; ``machines``: its members."""
    old = cluster.status or ClusterStatus()
    new = old.model_copy(deep=True)
    generation = cluster.metadata.generation
    total = len(machines)
    ready = sum(1 for m in machines if m.status is not None
                and m.status.phase is MachinePhase.READY)
    wanted = cluster.spec.release
    new.machines_total = total
    new.machines_ready = ready
    if total and all(m.status is not None and m.status.release == wanted for m in machines):
        new.release = wanted
    new.observed_generation = generation
    specs = [
        ConditionSpec.true(RELEASE_FOUND, "Found", f"ClusterRelease {wanted}") if release_found
        else ConditionSpec.false(RELEASE_FOUND, "NotFound", f"ClusterRelease {wanted} not found"),
    ]
    errors = check_bootstrap(machines)
    if errors:
        specs.append(ConditionSpec.false(BOOTSTRAP_UNIQUE, "MultipleBootstrap",
                                         "; ".join(str(e) for e in errors)))
    else:
        specs.append(ConditionSpec.true(BOOTSTRAP_UNIQUE, "Unique",
                                        "at most one bootstrap machine"))
    if total == 0:
        specs.append(ConditionSpec.false(READY, "NoMachines", "the cluster has no machines"))
    elif ready < total:
        waiting = sorted(m.metadata.name or "" for m in machines
                         if m.status is None or m.status.phase is not MachinePhase.READY)
        specs.append(ConditionSpec.false(
            READY, "MachinesNotReady",
            f"{ready}/{total} machines Ready; waiting for {', '.join(waiting)}"))
    else:
        specs.append(ConditionSpec.true(READY, "Ready", f"{total}/{total} machines Ready"))
    for spec in specs:
        new.conditions = set_condition(new.conditions, spec, now, generation)
    return new
