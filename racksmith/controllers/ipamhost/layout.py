"""Resolving an L2Template's ``l3Layout`` to Subnet objects.

Owns :func:`resolve_subnets`, used by both controllers: each entry is looked
up in its scope (``namespace``: the template's namespace; ``global``: the
``default`` namespace), by name or, when ``labelSelector`` is given, as the
one Subnet there carrying those labels. Every entry that cannot be resolved
is a message naming it; nothing is raised for missing objects. Reads
through the runtime's Client (from the shared Subnet cache once synced).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.ipamhost.index import Dependencies
from racksmith.controllers.ipamhost.names import GLOBAL_NAMESPACE
from racksmith.kinds.ipam import L2Template, Subnet, SubnetScope
from racksmith.runtime.client import Client
from racksmith.runtime.resources import SUBNETS

SUBNET_KIND = "Subnet"


@dataclass
class Layout:
    """The subnets of a template by ``l3Layout`` name, and what was not found."""

    subnets: dict[str, Subnet] = field(default_factory=dict)
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def scope_namespace(scope: SubnetScope, namespace: str) -> str:
    """Where a layout entry of ``scope`` looks for its subnet."""
    return GLOBAL_NAMESPACE if scope == SubnetScope.GLOBAL else namespace


async def resolve_subnets(client: Client, template: L2Template, namespace: str,
                          deps: Dependencies | None = None) -> Layout:
    """The Subnets of ``template`` (in ``namespace``); records reads in ``deps``."""
    out = Layout()
    for entry in template.spec.l3_layout:
        where = scope_namespace(entry.scope, namespace)
        if entry.label_selector:
            selector = ",".join(f"{k}={v}" for k, v in sorted(entry.label_selector.items()))
            if deps is not None:
                deps.any_of(SUBNET_KIND, where)
            found = await client.list(SUBNETS, where, labels=dict(entry.label_selector))
            if len(found) != 1:
                names = ", ".join(sorted(str(s["metadata"]["name"]) for s in found))
                what = f"{len(found)} match ({names})" if found else "none matches"
                out.problems.append(
                    f"subnet {entry.subnet_name!r} of the l3Layout: the Subnet in namespace "
                    f"{where} with labels {selector} must be unique, but {what}")
                continue
            raw = found[0]
        else:
            got = await client.get(SUBNETS, where, entry.subnet_name)
            if got is None:
                if deps is not None:
                    deps.waits_on(SUBNET_KIND, where, entry.subnet_name)
                out.problems.append(f"subnet {entry.subnet_name!r} of the l3Layout was not "
                                    f"found in namespace {where}")
                continue
            raw = got
        subnet = Subnet.model_validate(raw)
        if deps is not None:
            deps.seen(SUBNET_KIND, where, subnet.metadata.name or "",
                      subnet.metadata.generation)
        out.subnets[entry.subnet_name] = subnet
        out.raw[entry.subnet_name] = raw
    return out
