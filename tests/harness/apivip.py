"""The API VIP's configuration files exactly as the Machine controller renders
them for real control-plane hosts, ready for the real programs in a test.

Owns :func:`rendered`: for a 3-master cluster, each master's
``/etc/haproxy/haproxy.cfg`` and ``/etc/keepalived/keepalived.conf`` from
``racksmith.planners.apivip`` (the state items' content), and the VRRP
password file the user data writes, with the host paths they name (the
cluster CA, the password file) moved under the test's directory — the one
change made to what a real host gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from racksmith.controlplane.vrrp import Peer
from racksmith.kinds.cluster import Cluster
from racksmith.planners.apivip import (
    CLUSTER_CA_FILE,
    HAPROXY_CFG,
    KEEPALIVED_CONF,
    VRRP_AUTH_FILE,
    ApiVip,
    plan_api_vip,
    vrrp_auth_file,
)


@dataclass(frozen=True)
class MasterFiles:
    haproxy: Path
    keepalived: Path


def rendered(directory: Path, *, masters: dict[str, str], vip: str, cidr: str,
             router_id: int, auth_pass: str, ca_file: Path, interface: str = "eno1"
             ) -> dict[str, MasterFiles]:
    """Each master's two configuration files under ``directory``."""
    cluster = Cluster.model_validate({
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"release": "r", "apiServer": {"vip": vip},
                 "networks": {"controlPlaneCIDRs": [cidr]}},
        "status": {"virtualRouterID": router_id},
    })
    prefix = cidr.split("/")[1]
    auth = directory / "vrrp-auth.conf"
    auth.write_bytes(vrrp_auth_file(auth_pass))
    auth.chmod(0o600)
    moves = {CLUSTER_CA_FILE: str(ca_file), VRRP_AUTH_FILE: str(auth)}
    peers = [Peer(name, address) for name, address in masters.items()]
    out: dict[str, MasterFiles] = {}
    for name, address in masters.items():
        vip_items = plan_api_vip(
            cluster, machine=name, roles=["master"], address=address, peers=peers,
            netconfig={"ethernets": {interface: {"addresses": [f"{address}/{prefix}"]}}})
        assert isinstance(vip_items, ApiVip) and vip_items.items, vip_items
        contents = {str(i.params["path"]): str(i.params["content"]) for i in vip_items.items
                    if "content" in i.params}
        paths = {}
        for host_path, local in ((HAPROXY_CFG, "haproxy.cfg"),
                                 (KEEPALIVED_CONF, "keepalived.conf")):
            text = contents[host_path]
            for old, new in moves.items():
                text = text.replace(old, new)
            target = directory / f"{name}-{local}"
            target.write_text(text)
            paths[local] = target
        out[name] = MasterFiles(paths["haproxy.cfg"], paths["keepalived.conf"])
    return out
