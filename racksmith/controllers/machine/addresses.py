"""A Machine's addresses, read from its IpamHost's rendered netplan.

Owns ``netconfig_addresses`` (every address of the netplan document, in
document order: sections as they appear, interfaces as they appear, each
interface's ``addresses`` in order) and ``machine_addresses`` (step 6 of the
contracts: InternalIP = the first address inside the cluster's
``controlPlaneCIDRs``, else the first address; WorkloadIP likewise with
``workloadPlaneCIDRs``; Hostname = the machine), and ``control_plane_address``
(that InternalIP alone). Pure.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from racksmith.kinds.cluster import AddressType, Cluster, MachineAddress

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def netconfig_addresses(netconfig: Mapping[str, Any] | None) -> list[_Address]:
    """The IP addresses (without prefix) of ``netconfig``, in document order."""
    out: list[_Address] = []
    for section in (netconfig or {}).values():
        if not isinstance(section, Mapping):
            continue
        for iface in section.values():
            if not isinstance(iface, Mapping):
                continue
            for entry in iface.get("addresses") or []:
                # netplan allows "10.0.0.5/24" or {"10.0.0.5/24": {lifetime...}}.
                texts = list(entry) if isinstance(entry, Mapping) else [entry]
                for text in texts:
                    try:
                        ip = ipaddress.ip_interface(str(text)).ip
                    except ValueError:
                        continue
                    if ip not in out:
                        out.append(ip)
    return out


def pick(addresses: Sequence[_Address], cidrs: Sequence[str]) -> _Address | None:
    """The first address inside the first of ``cidrs`` that holds one, else the first."""
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        for ip in addresses:
            if ip.version == network.version and ip in network:
                return ip
    return addresses[0] if addresses else None


def control_plane_address(cluster: Cluster, netconfig: Mapping[str, Any] | None
                          ) -> str | None:
    """The machine's InternalIP: its address in the control-plane networks."""
    internal = pick(netconfig_addresses(netconfig), cluster.spec.networks.control_plane_cidrs)
    return str(internal) if internal is not None else None


def machine_addresses(
    name: str, cluster: Cluster, netconfig: Mapping[str, Any] | None
) -> list[MachineAddress]:
    """``status.addresses`` of machine ``name``."""
    found = netconfig_addresses(netconfig)
    networks = cluster.spec.networks
    out: list[MachineAddress] = []
    internal = pick(found, networks.control_plane_cidrs)
    if internal is not None:
        out.append(MachineAddress(type=AddressType.INTERNAL_IP, address=str(internal)))
    workload = pick(found, networks.workload_plane_cidrs)
    if workload is not None:
        out.append(MachineAddress(type=AddressType.WORKLOAD_IP, address=str(workload)))
    out.append(MachineAddress(type=AddressType.HOSTNAME, address=name))
    return out
