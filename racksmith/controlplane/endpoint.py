"""Where a cluster's API is reached, and whether its VIP is sound. Pure.

Owns :func:`plan_endpoint`: a Cluster's ``status.controlPlaneEndpoint``
``{host, port}`` and the verdict on its VIP, from its spec, the
control-plane addresses of its machines and the VIPs other clusters hold.

The endpoint is, in order:

1. ``spec.controlPlaneEndpoint`` when set (Cluster API's field: an external
   load balancer, or the virtual datacenter's proxy);
2. ``spec.apiServer.vip`` and ``spec.apiServer.port`` (default 6443): the
   address keepalived holds on the control-plane machines;
3. without either, the first control-plane machine's control-plane address
   (by machine name) and the port — MetalK8s's "empty uses node addresses".
   Until a control-plane machine has an address there is no endpoint yet.

A VIP is refused (``EndpointProblem``; nothing is deployed for the cluster)
when it is not an IP address, when it lies in none of
``spec.networks.controlPlaneCIDRs`` (MetalK8s: the VIP sits in the
control-plane network every control-plane node shares; with no CIDR
declared there is nothing to check it against), or when another cluster
already holds it. Of two clusters naming one VIP the one created first
keeps it (then by namespace/name), so adding a cluster by mistake never
takes the API of a running one away.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_PORT = 6443


@dataclass(frozen=True, order=True)
class ClusterVip:
    """A cluster's claim on a VIP: who created first wins (``created``: the
    RFC 3339 creationTimestamp, which sorts as time)."""

    created: str
    namespace: str
    name: str
    vip: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"


@dataclass(frozen=True)
class EndpointProblem:
    """Why a cluster's endpoint is refused: a condition reason and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class EndpointPlan:
    endpoint: Endpoint | None
    problem: EndpointProblem | None = None
    waiting: str = ""
    """Why there is no endpoint yet, when there is no problem either."""


def plan_endpoint(*, me: ClusterVip | None, port: int | None, explicit: Endpoint | None,
                  control_plane_cidrs: Sequence[str], others: Sequence[ClusterVip],
                  control_plane_addresses: Sequence[str]) -> EndpointPlan:
    """The endpoint of one cluster (see the module docstring). ``me``: its
    VIP claim (None: no VIP); ``others``: every other cluster's claim."""
    port = port or DEFAULT_PORT
    if me is not None:
        problem = vip_problem(me, control_plane_cidrs, others)
        if problem is not None:
            return EndpointPlan(None, problem)
    if explicit is not None:
        return EndpointPlan(explicit)
    if me is not None:
        return EndpointPlan(Endpoint(str(ipaddress.ip_address(me.vip)), port))
    if control_plane_addresses:
        return EndpointPlan(Endpoint(control_plane_addresses[0], port))
    return EndpointPlan(None, waiting="no VIP is set and no control-plane machine has an "
                        "address yet")


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(cidrs: Sequence[str]) -> list[Network]:
    """The networks of ``cidrs`` that parse (the rest are the schema's to refuse)."""
    out: list[Network] = []
    for cidr in cidrs:
        try:
            out.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            continue
    return out


def vip_problem(me: ClusterVip, control_plane_cidrs: Sequence[str],
                others: Sequence[ClusterVip]) -> EndpointProblem | None:
    try:
        vip = ipaddress.ip_address(me.vip)
    except ValueError:
        return EndpointProblem("VIPInvalid", f"spec.apiServer.vip {me.vip!r} is not an IP "
                               "address")
    networks = parse_networks(control_plane_cidrs)
    if networks and not any(vip.version == n.version and vip in n for n in networks):
        return EndpointProblem(
            "VIPOutsideControlPlaneNetwork",
            f"spec.apiServer.vip {vip} is in none of the control-plane networks "
            f"({', '.join(str(n) for n in networks)}): keepalived could not hold it on "
            "the control-plane machines")
    for other in sorted(others):
        if other.ref == me.ref:
            continue
        try:
            same = ipaddress.ip_address(other.vip) == vip
        except ValueError:
            continue
        if same and other < me:
            return EndpointProblem(
                "VIPConflict", f"spec.apiServer.vip {vip} is already the API VIP of cluster "
                f"{other.ref}")
    return None
