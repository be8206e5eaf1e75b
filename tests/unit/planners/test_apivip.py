"""The API VIP's state items on control-plane machines: what is rendered, for
whom, and why nothing is rendered when something is missing."""

from __future__ import annotations

from typing import Any

from racksmith.controlplane.vrrp import Peer
from racksmith.kinds.cluster import Cluster, Role, StateItemType
from racksmith.planners.apivip import (
    API_SERVER_BIND_PORT,
    HAPROXY_CFG,
    KEEPALIVED_CONF,
    VRRP_AUTH_FILE,
    ApiVip,
    VipWait,
    plan_api_vip,
    vrrp_auth_file,
)
from racksmith.planners.release import plan_state_items
from tests.unit.planners.test_release import release

PEERS = [Peer(f"m{i}", f"10.10.0.1{i}") for i in (1, 2, 3)]


def cluster(router_id: int | None = 51, **api: Any) -> Cluster:
    return Cluster.model_validate({
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"release": "racksmith-1.4.0",
                 "apiServer": {"vip": "10.10.0.5", **api},
                 "networks": {"controlPlaneCIDRs": ["10.10.0.0/24"]}},
        "status": {"virtualRouterID": router_id} if router_id else {},
    })


def netconfig(address: str, iface: str = "bond0", prefix: int = 24) -> dict[str, Any]:
    return {"ethernets": {"eno1": {"dhcp4": False}},
            "bonds": {iface: {"interfaces": ["eno1"], "addresses": [f"{address}/{prefix}"]}}}


def plan(machine: str = "m1", roles: tuple[str, ...] = ("master",), c: Cluster | None = None,
         address: str | None = "10.10.0.11", **kw: Any) -> ApiVip | VipWait:
    return plan_api_vip(c or cluster(), machine=machine, roles=list(roles), address=address,
                        netconfig=netconfig(address or "10.10.0.11", **kw), peers=PEERS)


def test_a_master_gets_packages_configs_and_services_before_its_kubeadm() -> None:
    vip = plan()
    assert isinstance(vip, ApiVip)
    kinds = [(i.name, i.type) for i in vip.items]
    assert kinds == [
        ("racksmith-keepalived", StateItemType.PACKAGE),
        ("racksmith-haproxy", StateItemType.PACKAGE),
        ("racksmith-curl", StateItemType.PACKAGE),
        ("racksmith-haproxy-config", StateItemType.FILE),
        ("racksmith-keepalived-config", StateItemType.FILE),
        ("racksmith-haproxy-service", StateItemType.SERVICE),
        ("racksmith-keepalived-service", StateItemType.SERVICE),
    ]
    assert all(i.roles == [Role.MASTER] for i in vip.items)
    assert vip.kubeadm == {"advertiseAddress": "10.10.0.11",
                           "apiServerBindPort": API_SERVER_BIND_PORT}
    files = {i.params["path"]: i.params for i in vip.items if i.type is StateItemType.FILE}
    keepalived = files[KEEPALIVED_CONF]["content"]
    assert "interface bond0" in keepalived and "10.10.0.5/24 dev bond0" in keepalived
    assert "unicast_src_ip 10.10.0.11" in keepalived
    assert "10.10.0.12" in keepalived and "10.10.0.13" in keepalived
    assert f"include {VRRP_AUTH_FILE}" in keepalived and "auth_pass" not in keepalived
    assert "virtual_router_id 51" in keepalived
    assert f"https://10.10.0.11:{API_SERVER_BIND_PORT}/readyz" in keepalived
    assert files[KEEPALIVED_CONF]["mode"] == "0600"
    assert files[KEEPALIVED_CONF]["reload"] == "keepalived"
    haproxy = files[HAPROXY_CFG]["content"]
    assert "bind 0.0.0.0:6443" in haproxy
    for peer in PEERS:
        assert f"server {peer.name} {peer.address}:{API_SERVER_BIND_PORT}" in haproxy
    assert files[HAPROXY_CFG]["reload"] == "haproxy"


def test_the_vrrp_password_file_holds_the_auth_pass_line() -> None:
    assert vrrp_auth_file("abcd1234") == b"auth_pass abcd1234\n"


def test_workers_and_clusters_without_a_held_vip_get_nothing() -> None:
    assert plan(roles=("worker",)) == ApiVip()
    assert plan(c=cluster(keepalived=False)) == ApiVip()
    explicit = Cluster.model_validate({
        **cluster().model_dump(by_alias=True, exclude_none=True),
        "spec": {**cluster().model_dump(by_alias=True, exclude_none=True)["spec"],
                 "controlPlaneEndpoint": {"host": "lb.example", "port": 443}}})
    assert plan(c=explicit) == ApiVip()


def test_nothing_is_rendered_without_a_router_id_an_address_or_the_vip_on_its_network(
) -> None:
    no_router = plan(c=cluster(router_id=None))
    assert isinstance(no_router, VipWait) and no_router.reason == "WaitingForRouterID"
    no_address = plan(address=None)
    assert isinstance(no_address, VipWait) and no_address.reason == "NoControlPlaneAddress"
    assert isinstance(plan(prefix=28), ApiVip)  # 10.10.0.0/28 holds .11 and the VIP .5
    narrow = plan_api_vip(cluster(), machine="m1", roles=["master"], address="10.10.0.11",
                          netconfig=netconfig("10.10.0.11", prefix=30), peers=PEERS)
    assert isinstance(narrow, VipWait) and narrow.reason == "VIPOutsideMachineNetwork"


def test_a_peer_change_changes_every_masters_config_items_only() -> None:
    before = plan()
    after = plan_api_vip(cluster(), machine="m1", roles=["master"], address="10.10.0.11",
                         netconfig=netconfig("10.10.0.11"), peers=PEERS[:2])
    assert isinstance(before, ApiVip) and isinstance(after, ApiVip)
    changed = {a.name for a, b in zip(before.items, after.items, strict=True) if a != b}
    assert changed == {"racksmith-haproxy-config", "racksmith-keepalived-config"}


def test_the_release_planner_puts_them_after_the_netplan_and_fills_in_kubeadm() -> None:
    vip = plan()
    assert isinstance(vip, ApiVip)
    planned = plan_state_items(release(), ["master"], cluster(), netconfig("10.10.0.11"),
                               extra_items=vip.items, kubeadm_extra=vip.kubeadm)
    assert not isinstance(planned, list)
    names = [p.item.name for p in planned.items]
    start = names.index("racksmith-netplan") + 1
    assert names[start:start + 7] == [i.name for i in vip.items]
    kubeadm = next(p.item for p in planned.items if p.item.type is StateItemType.KUBEADM)
    assert kubeadm.params["cluster"]["advertiseAddress"] == "10.10.0.11"
    assert kubeadm.params["cluster"]["apiServerBindPort"] == API_SERVER_BIND_PORT


def test_a_release_item_may_not_take_a_vip_items_name() -> None:
    vip = plan()
    assert isinstance(vip, ApiVip)
    clash = release([{"name": "racksmith-haproxy", "phase": "configuration",
                      "type": "package", "params": {"name": "haproxy"}}])
    errors = plan_state_items(clash, ["master"], cluster(), extra_items=vip.items)
    assert isinstance(errors, list)
    assert "reserved for the API VIP's items" in str(errors[0])
