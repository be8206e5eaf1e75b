"""The node-role planner: a Machine's roles → node labels and taints.

Owns the MetalK8s rules that turn roles into what the Kubernetes Node
carries, and the checks on role sets. Pure: no I/O. Called by the Machine
controller when it labels and taints the node, and by the Cluster
controller (``check_bootstrap``) before it admits machines.

Rules:

- every requested role gets the label ``node-role.kubernetes.io/<role>: ""``;
  roles combine freely and are deduplicated (a set, listed in ``Role`` order);
- ``node`` (the workload role) is *implied* by every other role in the sense
  that every machine runs the node components (kubelet, container runtime):
  ``effective_roles`` adds it, and the release planner installs ``node``
  items on every machine. The ``node`` *label*, though, is only set when
  ``node`` is requested, because it says "accepts workloads";
- a machine without the ``node`` role is dedicated: it carries a
  ``NoSchedule`` taint ``node-role.kubernetes.io/<role>`` for each of its
  roles (a control-plane+etcd-only node gets ``master`` and ``etcd``, a
  dedicated infra node ``infra``; a dedicated bootstrap node also gets
  ``bootstrap``, as MetalK8s does);
- a machine with the ``node`` role carries no role taint: a worker that also
  has ``infra`` accepts infra services and ordinary workloads alike;
- ``bootstrap`` is unique per cluster (``check_bootstrap``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from racksmith.kinds.cluster import Machine, Role

__all__ = [
    "LABEL_PREFIX",
    "NodeRoles",
    "RoleError",
    "Taint",
    "check_bootstrap",
    "effective_roles",
    "plan_node_roles",
]

LABEL_PREFIX = "node-role.kubernetes.io/"
NO_SCHEDULE = "NoSchedule"
_ORDER = {role: i for i, role in enumerate(Role)}


@dataclass(frozen=True)
class RoleError:
    """Why a role set is refused; ``field`` points into the Machine (or names it)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint."""

    key: str
    effect: str = NO_SCHEDULE
    value: str = ""

    def to_k8s(self) -> dict[str, str]:
        """The taint as it appears in ``Node.spec.taints``."""
        taint = {"key": self.key, "effect": self.effect}
        if self.value:
            taint["value"] = self.value
        return taint


@dataclass(frozen=True)
class NodeRoles:
    """What the Node of a machine carries for its roles."""

    roles: tuple[Role, ...]
    labels: dict[str, str]
    taints: tuple[Taint, ...]

    @property
    def is_dedicated(self) -> bool:
        """True when the node refuses ordinary workloads (no ``node`` role)."""
        return Role.NODE not in self.roles


def role_label(role: Role) -> str:
    """The label key of ``role``."""
    return f"{LABEL_PREFIX}{role.value}"


def _parse(roles: Iterable[Role | str]) -> tuple[Role, ...] | list[RoleError]:
    errors: list[RoleError] = []
    parsed: set[Role] = set()
    for i, raw in enumerate(roles):
        try:
            parsed.add(Role(raw))
        except ValueError:
            known = ", ".join(r.value for r in Role)
            errors.append(RoleError(f"spec.roles[{i}]", f"unknown role {raw!r} (known: {known})"))
    if errors:
        return errors
    if not parsed:
        return [RoleError("spec.roles", "a machine needs at least one role")]
    return tuple(sorted(parsed, key=_ORDER.__getitem__))


def effective_roles(roles: Iterable[Role | str]) -> frozenset[Role]:
    """The roles whose software a machine runs: its roles plus the implied ``node``.

    Unknown role names are ignored here; ``plan_node_roles`` reports them.
    """
    known = {Role(r) for r in roles if r in {m.value for m in Role}}
    return frozenset(known | {Role.NODE})


def plan_node_roles(roles: Iterable[Role | str]) -> NodeRoles | list[RoleError]:
    """The labels and taints for ``roles``, or why the role set is refused."""
    parsed = _parse(roles)
    if isinstance(parsed, list):
        return parsed
    labels = {role_label(r): "" for r in parsed}
    taints: tuple[Taint, ...] = ()
    if Role.NODE not in parsed:
        taints = tuple(Taint(role_label(r)) for r in parsed)
    return NodeRoles(roles=parsed, labels=labels, taints=taints)


def check_bootstrap(machines: Iterable[Machine]) -> list[RoleError]:
    """Errors for every cluster with more than one ``bootstrap`` machine.

    Machines are grouped by namespace and ``spec.clusterName``; the error
    names the cluster and its bootstrap machines (sorted, for stable output).
    """
    holders: dict[tuple[str, str], list[str]] = {}
    for m in machines:
        if Role.BOOTSTRAP in m.spec.roles:
            key = (m.metadata.namespace or "", m.spec.cluster_name)
            holders.setdefault(key, []).append(m.metadata.name or "?")
    errors = []
    for (namespace, cluster), names in sorted(holders.items()):
        if len(names) > 1:
            where = f"{namespace}/{cluster}" if namespace else cluster
            errors.append(
                RoleError(
                    "",
                    f"cluster {where} has {len(names)} bootstrap machines "
                    f"({', '.join(sorted(names))}); bootstrap is unique per cluster",
                )
            )
    return errors
