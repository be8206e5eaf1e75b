"""The API VIP held by keepalived: router ids and the configuration. Pure.

Owns :func:`allocate_router_id` (a cluster's VRRP ``virtual_router_id``,
1-255, unique among the clusters whose control-plane networks overlap — the
clusters that may share an L2 segment; an id once recorded in a Cluster's
status is kept) and :func:`render_keepalived` (one control-plane machine's
``keepalived.conf``), as MetalK8s 2.x ran it:

* VRRP in **unicast** mode between the control-plane addresses
  (``unicast_src_ip``, ``unicast_peer``): no multicast needed on the
  segment;
* authentication from the cluster's Secret (``auth_type PASS``: keepalived
  takes at most 8 characters);
* a ``vrrp_script`` on the **local** API server's ``/readyz`` (curl over
  TLS, verifying the cluster CA): a machine whose API is not ready gives
  the VIP away — the VIP never depends on the Kubernetes API as a whole,
  nor on any election through it;
* gratuitous ARP repeated after a takeover (``vrrp_garp_master_repeat``,
  ``vrrp_garp_master_refresh``), so switches learn the new holder at once;
* every machine starts as BACKUP with its own priority (by its place in
  the control-plane list) and ``nopreempt``: a machine coming back does not
  take the VIP from a healthy holder.

The tests check what it renders with Debian's ``keepalived --config-test``.
"""

from __future__ import annotations

import base64
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from racksmith.controlplane.endpoint import parse_networks
from racksmith.controlplane.pki import CLUSTER_NAME_LABEL

ROUTER_IDS = range(1, 256)
AUTH_PASS_MAX = 8
AUTH_PASS_KEY = "authPass"


def vrrp_secret_name(cluster: str) -> str:
    """The Secret with keepalived's authentication of a cluster's VIP."""
    return f"{cluster}-vrrp"


def new_auth_pass() -> str:
    """A random 8-character VRRP password (keepalived's PASS limit)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(AUTH_PASS_MAX))


def vrrp_secret(namespace: str, cluster: str, auth_pass: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": vrrp_secret_name(cluster), "namespace": namespace,
                         "labels": {CLUSTER_NAME_LABEL: cluster}},
            "data": {AUTH_PASS_KEY: base64.b64encode(auth_pass.encode()).decode()}}


@dataclass(frozen=True)
class RouterClaim:
    """A cluster's router id (None: not allocated yet), the one its spec asks
    for (None: any), and its networks."""

    ref: str
    cidrs: tuple[str, ...]
    router_id: int | None
    wanted: int | None = None


class RouterIdProblem(ValueError):
    """Why a cluster gets no router id: ``reason`` is a condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _share_segment(a: Sequence[str], b: Sequence[str]) -> bool:
    return any(x.version == y.version and x.overlaps(y)
               for x in parse_networks(a) for y in parse_networks(b))


def allocate_router_id(me: RouterClaim, others: Sequence[RouterClaim]) -> int:
    """``me``'s router id: the one its spec asks for (refused if a neighbour —
    a cluster on an overlapping network — holds it), else the one it has if
    no neighbour holds it too, else the lowest free one. Raises
    :class:`RouterIdProblem` (``VirtualRouterIDConflict``,
    ``VirtualRouterIDsExhausted``)."""
    holders = {o.router_id: o.ref for o in others if o.ref != me.ref
               and o.router_id is not None and _share_segment(me.cidrs, o.cidrs)}
    if me.wanted is not None:
        if me.wanted in holders:
            raise RouterIdProblem(
                "VirtualRouterIDConflict",
                f"spec.apiServer.virtualRouterID {me.wanted} is already cluster "
                f"{holders[me.wanted]}'s on an overlapping control-plane network")
        return me.wanted
    if me.router_id is not None and me.router_id not in holders:
        return me.router_id
    free = next((i for i in ROUTER_IDS if i not in holders), None)
    if free is None:
        raise RouterIdProblem("VirtualRouterIDsExhausted",
                              "all 255 VRRP router ids are taken on this control-plane network")
    return free


@dataclass(frozen=True)
class Peer:
    """A control-plane machine: its name and control-plane address."""

    name: str
    address: str


def render_keepalived(*, cluster: str, me: Peer, peers: Sequence[Peer], vip: str,
                      prefix_length: int, interface: str, router_id: int, api_port: int,
                      ca_file: str, auth_pass: str | None = None,
                      auth_include: str | None = None, curl: str = "/usr/bin/curl") -> str:
    """``keepalived.conf`` of control-plane machine ``me`` (``peers``: every
    control-plane machine, ``me`` included, in the cluster's order). The
    VRRP password is ``auth_pass`` written inline, or the ``auth_pass`` line
    of the file ``auth_include`` (keepalived's ``include``; the file is
    :func:`racksmith.planners.apivip.vrrp_auth_file`'s), so the password
    need not be in the configuration."""
    if router_id not in ROUTER_IDS:
        raise ValueError(f"virtual_router_id {router_id} is not in 1-255")
    if (auth_pass is None) == (auth_include is None):
        raise ValueError("give exactly one of auth_pass and auth_include")
    if auth_pass is not None and (not auth_pass or len(auth_pass) > AUTH_PASS_MAX
                                  or not auth_pass.isalnum()):
        raise ValueError("auth_pass must be 1-8 letters or digits")
    if auth_include is not None and (not auth_include.startswith("/")
                                     or any(c.isspace() for c in auth_include)):
        raise ValueError("auth_include must be an absolute path without spaces")
    auth_line = (f"auth_pass {auth_pass}" if auth_pass is not None
                 else f"include {auth_include}")
    names = [p.name for p in peers]
    if me.name not in names:
        raise ValueError(f"{me.name} is not one of the control-plane machines {names}")
    priority = 150 - names.index(me.name)
    others = [p.address for p in peers if p.name != me.name]
    instance = f"{cluster}_api".replace("-", "_")
    check = (f"{curl} --silent --fail --max-time 2 --cacert {ca_file} "
             f"https://{_host(me.address)}:{api_port}/readyz -o /dev/null")
    lines = [
        "# Rendered by Racksmith from the Cluster: the API VIP, VRRP in unicast mode",
        "# between the control-plane machines, tracking the local API's /readyz.",
        "global_defs {",
        f"    router_id {me.name}",
        "    enable_script_security",
        "    script_user root",
        "    vrrp_garp_master_repeat 5",
        "    vrrp_garp_master_refresh 60",
        "}",
        "",
        "vrrp_script apiserver_readyz {",
        f'    script "{check}"',
        "    interval 2",
        "    timeout 3",
        "    fall 2",
        "    rise 2",
        "}",
        "",
        f"vrrp_instance {instance} {{",
        "    state BACKUP",
        "    nopreempt",
        f"    interface {interface}",
        f"    virtual_router_id {router_id}",
        f"    priority {priority}",
        "    advert_int 1",
        f"    unicast_src_ip {me.address}",
        "    unicast_peer {",
        *[f"        {address}" for address in others],
        "    }",
        "    authentication {",
        "        auth_type PASS",
        f"        {auth_line}",
        "    }",
        "    virtual_ipaddress {",
        f"        {vip}/{prefix_length} dev {interface}",
        "    }",
        "    track_script {",
        "        apiserver_readyz",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
