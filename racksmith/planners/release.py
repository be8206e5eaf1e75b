"""The release planner: ClusterRelease + a machine's roles → its LCMMachine state items.

Owns which state items of a release a machine applies, in what order, with
what per-machine parameters, and the hash that tells the agent an item
changed. Pure: no I/O. Called by the Machine controller when it writes
``LCMMachine.spec.stateItems``; the agent hashes what it applied with the
same ``item_hash`` and records it in ``status.items[].hash``.

Rules:

- phases run in the MetalK8s deploy order checks → configuration → join →
  uncordon; within a phase items keep the release's order;
- an item with ``roles`` applies when the machine has one of them, where the
  machine's roles include the implied ``node`` (every machine runs the node
  components, see ``roles.effective_roles``); an item without roles applies
  to every machine;
- per type: ``file`` needs ``path`` (absolute) and ``content``; ``package``
  and ``service`` need ``name``; ``command`` needs ``command``; ``kubeadm``
  needs ``phase`` and gets a ``cluster`` parameter (API VIP, networks,
  versions, the machine's roles) filled in by the planner. A type not in
  this table is an error, never skipped silently;
- when the machine's rendered netplan is given, a ``file`` item
  ``racksmith-netplan`` writing it to ``/etc/netplan/60-racksmith.yaml``
  opens the configuration phase, so a network change is a changed item;
- the items the management plane adds (``extra_items``: the API VIP's
  keepalived and HAProxy on control-plane machines, ``planners.apivip``)
  follow the netplan item, before the release's own; ``kubeadm_extra``
  (the machine's ``advertiseAddress`` and ``apiServerBindPort``) joins the
  kubeadm item's ``cluster`` parameter;
- item names are unique (the agent reports per name); every item is
  checked, including those for roles the machine does not have;
- an item keeps its ``requiresReboot`` (the agent reports a needed reboot
  when it changes such an item);
- the hash is the sha256 of the item's canonical JSON (camelCase keys,
  sorted, no spaces, roles in ``Role`` order), ``requiresReboot`` included.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from racksmith.kinds.cluster import (
    Cluster,
    ClusterRelease,
    Role,
    StateItem,
    StateItemPhase,
    StateItemType,
)
from racksmith.planners.roles import RoleError, effective_roles, plan_node_roles

__all__ = [
    "NETPLAN_ITEM",
    "NETPLAN_PATH",
    "PHASE_ORDER",
    "PlannedItem",
    "PlannedRelease",
    "ReleaseError",
    "item_hash",
    "plan_state_items",
]

PHASE_ORDER = (
    StateItemPhase.CHECKS,
    StateItemPhase.CONFIGURATION,
    StateItemPhase.JOIN,
    StateItemPhase.UNCORDON,
)
NETPLAN_ITEM = "racksmith-netplan"
NETPLAN_PATH = "/etc/netplan/60-racksmith.yaml"
_ROLE_ORDER = {role: i for i, role in enumerate(Role)}


@dataclass(frozen=True)
class ReleaseError:
    """Why state items cannot be planned; ``field`` points into the release or machine."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass(frozen=True)
class PlannedItem:
    """A rendered state item and its content hash."""

    item: StateItem
    hash: str


@dataclass(frozen=True)
class PlannedRelease:
    """The state items of one machine for one release, in apply order."""

    release: str
    version: str
    items: tuple[PlannedItem, ...]

    def state_items(self) -> list[StateItem]:
        """The items for ``LCMMachine.spec.stateItems``."""
        return [p.item for p in self.items]

    def hashes(self) -> dict[str, str]:
        """Item name → hash, to compare with ``LCMMachine.status.items``."""
        return {p.item.name: p.hash for p in self.items}


def item_hash(item: StateItem) -> str:
    """The sha256 (hex) of ``item``'s canonical JSON; equal items hash equal."""
    data = item.model_dump(mode="json", by_alias=True)
    data["roles"] = sorted(data.get("roles", []), key=lambda r: _ROLE_ORDER.get(r, len(Role)))
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- per-type parameters -----------------------------------------------------------

_Render = Callable[[dict[str, Any], dict[str, Any]], str | None]


def _require(*keys: str) -> Callable[[dict[str, Any]], str | None]:
    def check(params: dict[str, Any]) -> str | None:
        missing = [k for k in keys if params.get(k) in (None, "")]
        return f"params needs {', '.join(missing)}" if missing else None

    return check


def _file(params: dict[str, Any], _: dict[str, Any]) -> str | None:
    problem = _require("path", "content")(params)
    if problem is None and not str(params["path"]).startswith("/"):
        problem = f"params.path {params['path']!r} must be absolute"
    reload = params.get("reload")
    if problem is None and reload is not None and (not isinstance(reload, str) or not reload):
        problem = "params.reload must be the name of a service"
    return problem


def _named(params: dict[str, Any], _: dict[str, Any]) -> str | None:
    return _require("name")(params)


def _command(params: dict[str, Any], _: dict[str, Any]) -> str | None:
    return _require("command")(params)


def _kubeadm(params: dict[str, Any], context: dict[str, Any]) -> str | None:
    problem = _require("phase")(params)
    if problem is None and "cluster" in params:
        problem = "params.cluster is filled in by Racksmith and must not be set"
    params["cluster"] = context
    return problem


#: Each type's check; it may add planner-owned parameters to ``params`` (a copy).
RENDERERS: dict[StateItemType, _Render] = {
    StateItemType.FILE: _file,
    StateItemType.PACKAGE: _named,
    StateItemType.SERVICE: _named,
    StateItemType.COMMAND: _command,
    StateItemType.KUBEADM: _kubeadm,
}


def _context(release: ClusterRelease, roles: tuple[Role, ...], cluster: Cluster,
             init_node: str | None, kubeadm_extra: Mapping[str, Any]) -> dict[str, Any]:
    spec = cluster.spec
    extra = {"initNode": init_node} if init_node and Role.MASTER in roles else {}
    return extra | dict(kubeadm_extra) | {
        "name": cluster.metadata.name,
        "release": release.spec.version,
        "kubernetesVersion": release.spec.kubernetes_version,
        "apiServerVIP": spec.api_server.vip,
        "apiServerPort": spec.api_server.port,
        "keepalived": spec.api_server.keepalived,
        "podSubnet": spec.networks.pods,
        "serviceSubnet": spec.networks.services,
        "controlPlaneCIDRs": list(spec.networks.control_plane_cidrs),
        "workloadPlaneCIDRs": list(spec.networks.workload_plane_cidrs),
        "roles": [r.value for r in roles],
    }


def _netplan_item(netconfig: Mapping[str, Any]) -> StateItem:
    content = _netplan_yaml(json.dumps(netconfig, sort_keys=True, separators=(",", ":")))
    return StateItem(
        name=NETPLAN_ITEM,
        phase=StateItemPhase.CONFIGURATION,
        type=StateItemType.FILE,
        params={"path": NETPLAN_PATH, "content": content, "mode": "0600", "owner": "root"},
    )


@functools.lru_cache(maxsize=1024)
def _netplan_yaml(netconfig_json: str) -> str:
    """The netplan document of a netconfig (given as canonical JSON: a
    hashable key, so the YAML — slow to dump, and the same on every
    reconcile of a Machine — is made once per netconfig)."""
    return str(yaml.safe_dump({"network": json.loads(netconfig_json)}, sort_keys=True,
                              default_flow_style=False))


def plan_state_items(
    release: ClusterRelease,
    roles: Iterable[Role | str],
    cluster: Cluster,
    netconfig: Mapping[str, Any] | None = None,
    init_node: str | None = None,
    extra_items: Sequence[StateItem] = (),
    kubeadm_extra: Mapping[str, Any] | None = None,
) -> PlannedRelease | list[ReleaseError]:
    """The machine's state items in apply order, or every reason they cannot be planned.

    ``roles`` are the Machine's ``spec.roles``; ``netconfig`` its IpamHost's
    rendered netplan (the content under ``network:``), if any; ``init_node``
    the node of the cluster's first control-plane machine (Cluster API's
    init machine: its kubeadm item initialises the cluster, the others
    join), given to control-plane machines only as ``initNode``.
    """
    planned_roles = plan_node_roles(roles)
    if isinstance(planned_roles, list):
        return [_from_role_error(e) for e in planned_roles]
    machine_roles = effective_roles(planned_roles.roles)
    context = _context(release, planned_roles.roles, cluster, init_node, kubeadm_extra or {})
    errors: list[ReleaseError] = []
    items = [(f"spec.stateItems[{i}]", item) for i, item in enumerate(release.spec.state_items)]
    items[:0] = [(f"apiVIP[{i}]", item) for i, item in enumerate(extra_items)]
    if netconfig is not None:
        items.insert(0, ("netconfig", _netplan_item(netconfig)))
    phase_index = {phase: i for i, phase in enumerate(PHASE_ORDER)}
    seen: set[str] = set()
    reserved = {item.name for item in extra_items}
    chosen: list[tuple[int, int, StateItem]] = []
    for i, (where, item) in enumerate(items):
        if item.name in seen:
            errors.append(
                ReleaseError(
                    where,
                    f"state item name {item.name!r} is used twice"
                    + (" (reserved for the netplan item)" if item.name == NETPLAN_ITEM else
                       " (reserved for the API VIP's items)" if item.name in reserved else ""),
                )
            )
            continue
        seen.add(item.name)
        render = RENDERERS.get(item.type)
        if render is None:
            known = ", ".join(t.value for t in RENDERERS)
            errors.append(
                ReleaseError(where, f"unknown state item type {item.type!r} (known: {known})")
            )
            continue
        if item.phase not in phase_index:
            errors.append(ReleaseError(where, f"unknown phase {item.phase!r}"))
            continue
        params = copy.deepcopy(item.params)
        problem = render(params, context)
        if problem:
            errors.append(ReleaseError(where, f"{item.type.value} item {item.name!r}: {problem}"))
            continue
        # Checked for every machine first: a broken release is broken for all.
        if item.roles and not machine_roles.intersection(item.roles):
            continue
        rendered = StateItem(
            name=item.name,
            phase=item.phase,
            roles=sorted(set(item.roles), key=_ROLE_ORDER.__getitem__),
            type=item.type,
            params=params,
            requires_reboot=item.requires_reboot,
        )
        chosen.append((phase_index[item.phase], i, rendered))
    if errors:
        return errors
    chosen.sort(key=lambda c: (c[0], c[1]))
    return PlannedRelease(
        release=release.metadata.name or "",
        version=release.spec.version,
        items=tuple(PlannedItem(item, item_hash(item)) for _, _, item in chosen),
    )


def _from_role_error(error: RoleError) -> ReleaseError:
    return ReleaseError(error.field, error.message)
