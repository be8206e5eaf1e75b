"""The API VIP on a control-plane machine: its keepalived and HAProxy state items. Pure.

Owns :func:`plan_api_vip`: for one control-plane (master) machine of a
Cluster whose API VIP Racksmith holds (``spec.apiServer.vip`` set,
``spec.apiServer.keepalived`` true, no ``spec.controlPlaneEndpoint`` of an
external load balancer), the state items that install and configure
Debian's keepalived and HAProxy (``racksmith.controlplane.vrrp`` and
``racksmith.controlplane.haproxy`` render them), and what the machine's
kubeadm item must say for them (``advertiseAddress``, ``apiServerBindPort``).

The layout on every control-plane machine, as kubeadm's HA guide runs
keepalived and HAProxy as host services and as k3s and RKE2 put their own
proxy in front of the API server:

- HAProxy listens on the endpoint's port (``spec.apiServer.port``, default
  6443) on every address, so ``https://VIP:6443`` — the address kubeadm's
  ``controlPlaneEndpoint``, every kubeconfig and every kubelet use — goes
  to whichever machine holds the VIP and is spread from there over every
  control-plane API server, health-checked on ``/readyz``;
- the API servers listen on :data:`API_SERVER_BIND_PORT` (6444) on the
  machine's control-plane address (kubeadm's ``localAPIEndpoint``); the
  scheduler and controller manager reach their local one there, as kubeadm
  makes them;
- keepalived holds the VIP in unicast VRRP between the control-plane
  addresses, with the cluster's router id (``status.virtualRouterID``), and
  tracks the local API server's ``/readyz``: a machine whose API is not
  ready gives the VIP away. The VRRP password is never in a state item:
  ``keepalived.conf`` includes :data:`VRRP_AUTH_FILE` (mode 0600), which the
  user data writes from the Secret ``<cluster>-vrrp``
  (:func:`vrrp_auth_file`).

The configuration files carry ``reload`` (the agent reloads the service when
the file changed), so adding or removing a control-plane machine changes
the peers in every control-plane machine's items, which their agents apply
in place. Items are named ``racksmith-*`` and run in the configuration
phase, before the kubeadm item: the VIP is there when ``kubeadm init`` asks
for it (keepalived takes it once the first API server is ready).

Returns :class:`ApiVip` (items and kubeadm parameters; empty for a machine
or cluster without a held VIP) or :class:`VipWait` (why it cannot be
rendered yet: no router id, no control-plane address, the VIP outside the
machine's network) — nothing is rendered then.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from racksmith.controlplane.haproxy import Backend, render_haproxy
from racksmith.controlplane.vrrp import Peer, render_keepalived
from racksmith.kinds.cluster import Cluster, Role, StateItem, StateItemPhase, StateItemType

__all__ = [
    "API_SERVER_BIND_PORT",
    "HAPROXY_CFG",
    "KEEPALIVED_CONF",
    "VRRP_AUTH_FILE",
    "ApiVip",
    "VipWait",
    "holds_vip",
    "plan_api_vip",
    "vrrp_auth_file",
]

API_SERVER_BIND_PORT = 6444
"""Where the API servers listen behind HAProxy (kubeadm's ``bindPort``)."""
HAPROXY_CFG = "/etc/haproxy/haproxy.cfg"
KEEPALIVED_CONF = "/etc/keepalived/keepalived.conf"
VRRP_AUTH_FILE = "/etc/keepalived/racksmith-vrrp-auth.conf"
CLUSTER_CA_FILE = "/etc/kubernetes/pki/ca.crt"
ITEM_PREFIX = "racksmith-"
_SECTIONS = ("ethernets", "bonds", "vlans", "bridges")


@dataclass(frozen=True)
class ApiVip:
    """The VIP's state items of one machine, and its kubeadm parameters."""

    items: tuple[StateItem, ...] = ()
    kubeadm: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VipWait:
    """Why the VIP's items of a machine cannot be rendered (yet)."""

    reason: str
    message: str


def holds_vip(cluster: Cluster) -> bool:
    """Does Racksmith hold this cluster's API VIP with keepalived?"""
    api = cluster.spec.api_server
    return bool(api.vip) and api.keepalived and cluster.spec.control_plane_endpoint is None


def vrrp_auth_file(auth_pass: str) -> bytes:
    """The content of :data:`VRRP_AUTH_FILE` (inside keepalived's
    ``authentication`` block)."""
    return f"auth_pass {auth_pass}\n".encode()


def _interface_of(netconfig: Mapping[str, Any] | None, address: str
                  ) -> tuple[str, ipaddress.IPv4Interface | ipaddress.IPv6Interface] | None:
    """The netplan interface carrying ``address``, and that address with its prefix."""
    for section in _SECTIONS:
        for name, iface in ((netconfig or {}).get(section) or {}).items():
            if not isinstance(iface, Mapping):
                continue
            for entry in iface.get("addresses") or []:
                for text in (list(entry) if isinstance(entry, Mapping) else [entry]):
                    try:
                        parsed = ipaddress.ip_interface(str(text))
                    except ValueError:
                        continue
                    if str(parsed.ip) == address:
                        return str(name), parsed
    return None


def _item(name: str, kind: StateItemType, params: dict[str, Any]) -> StateItem:
    return StateItem(name=ITEM_PREFIX + name, phase=StateItemPhase.CONFIGURATION,
                     roles=[Role.MASTER], type=kind, params=params)


def plan_api_vip(cluster: Cluster, *, machine: str, roles: Sequence[Role | str],
                 address: str | None, netconfig: Mapping[str, Any] | None,
                 peers: Sequence[Peer]) -> ApiVip | VipWait:
    """The VIP's items of ``machine`` (see the module docstring). ``address``:
    its control-plane address; ``peers``: every control-plane machine of the
    cluster with a known control-plane address, in the cluster's order."""
    if Role.MASTER.value not in {str(getattr(r, "value", r)) for r in roles} \
            or not holds_vip(cluster):
        return ApiVip()
    api = cluster.spec.api_server
    vip = ipaddress.ip_address(str(api.vip))
    router_id = cluster.status.virtual_router_id if cluster.status else None
    if router_id is None:
        return VipWait("WaitingForRouterID", "the Cluster has no VRRP router id yet "
                       "(status.virtualRouterID)")
    if address is None:
        return VipWait("NoControlPlaneAddress", "the machine has no address in the cluster's "
                       "control-plane networks")
    found = _interface_of(netconfig, address)
    if found is None:
        return VipWait("NoControlPlaneAddress",
                       f"no interface of the machine's netplan carries {address}")
    interface, local = found
    if vip.version != local.version or vip not in local.network:
        return VipWait("VIPOutsideMachineNetwork",
                       f"the VIP {vip} is outside {interface}'s network {local.network}")
    me = Peer(machine, address)
    every = list(peers) if any(p.name == machine for p in peers) else [*peers, me]
    keepalived = render_keepalived(
        cluster=cluster.metadata.name or "cluster", me=me, peers=every, vip=str(vip),
        prefix_length=local.network.prefixlen, interface=interface, router_id=router_id,
        auth_include=VRRP_AUTH_FILE, api_port=API_SERVER_BIND_PORT, ca_file=CLUSTER_CA_FILE)
    haproxy = render_haproxy(
        bind_host="::" if vip.version == 6 else "0.0.0.0", bind_port=api.port,
        ca_file=CLUSTER_CA_FILE,
        backends=[Backend(p.name, p.address, API_SERVER_BIND_PORT) for p in every])
    items = (
        _item("keepalived", StateItemType.PACKAGE, {"name": "keepalived"}),
        _item("haproxy", StateItemType.PACKAGE, {"name": "haproxy"}),
        _item("curl", StateItemType.PACKAGE, {"name": "curl"}),
        _item("haproxy-config", StateItemType.FILE, {
            "path": HAPROXY_CFG, "content": haproxy, "mode": "0644", "owner": "root:root",
            "reload": "haproxy"}),
        _item("keepalived-config", StateItemType.FILE, {
            "path": KEEPALIVED_CONF, "content": keepalived, "mode": "0600",
            "owner": "root:root", "reload": "keepalived"}),
        _item("haproxy-service", StateItemType.SERVICE,
              {"name": "haproxy", "enabled": True, "running": True}),
        _item("keepalived-service", StateItemType.SERVICE,
              {"name": "keepalived", "enabled": True, "running": True}),
    )
    return ApiVip(items, {"advertiseAddress": address,
                          "apiServerBindPort": API_SERVER_BIND_PORT})
