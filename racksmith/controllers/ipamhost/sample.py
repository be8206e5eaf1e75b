"""Validating an L2Template against a sample host: the L2Template
controller's pure core.

Owns :func:`sample_nics` (a host with enough NICs for the template: the
``ifMapping`` names when given, else ``SAMPLE_NICS`` NICs named after the
first ``autoIfMappingPrio`` prefix) and :func:`validate` (both netplan
passes with made-up, distinct addresses from each subnet). A template valid
here can still fail on a real host with fewer NICs; that is the IpamHost's
Error, not the template's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from racksmith.kinds.ipam import L2TemplateSpec, SubnetSpec
from racksmith.planners.netplan import (
    AddressRequest,
    HostNIC,
    NetplanInputs,
    RenderedNetplan,
    discover_addresses,
    render_netplan,
)

SAMPLE_NICS = 8
SAMPLE_VIP = "192.0.2.10"
"""The API VIP used when the template's cluster has none (TEST-NET-1)."""


def sample_nics(template: L2TemplateSpec, count: int = SAMPLE_NICS) -> list[HostNIC]:
    """NICs of a sample host the template can be rendered for."""
    if template.if_mapping:
        names = list(template.if_mapping)
    else:
        prefix = template.auto_if_mapping_prio[0] if template.auto_if_mapping_prio else "eth"
        names = [f"{prefix}{i}" for i in range(count)]
    return [HostNIC(name, f"02:00:00:00:00:{i:02x}") for i, name in enumerate(names)]


def sample_allocations(requests: tuple[AddressRequest, ...],
                       subnets: Mapping[str, SubnetSpec]) -> dict[AddressRequest, str]:
    """A distinct address (when the subnet is big enough) for every request."""
    out: dict[AddressRequest, str] = {}
    taken: dict[str, int] = {}
    for request in requests:
        spec = subnets[request.subnet]
        network = ipaddress.ip_network(spec.cidr, strict=False)
        n = taken.get(request.subnet, 0)
        taken[request.subnet] = n + 1
        size = max(network.num_addresses - 2, 1)
        out[request] = str(network.network_address + 1 + (n % size))
    return out


def validate(template: L2TemplateSpec, subnets: Mapping[str, SubnetSpec],
             vip: str | None) -> list[str]:
    """Every problem rendering ``template`` for a sample host (empty: valid)."""
    inputs = NetplanInputs(template, sample_nics(template), subnets, vip or SAMPLE_VIP)
    requests = discover_addresses(inputs)
    if isinstance(requests, list):
        return [str(e) for e in requests]
    rendered = render_netplan(inputs, sample_allocations(requests, subnets))
    if isinstance(rendered, RenderedNetplan):
        return []
    return [str(e) for e in rendered]
