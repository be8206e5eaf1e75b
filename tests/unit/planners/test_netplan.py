"""The host-network planner: a realistic template renders to the expected
netplan in two passes, every error case is named, the sandbox refuses escapes,
and rendering is deterministic (hypothesis)."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from racksmith.kinds.hardware import NIC
from racksmith.kinds.ipam import L2TemplateSpec, NICMapping, SubnetSpec
from racksmith.planners.netplan import (
    AddressRequest,
    HostNIC,
    NetplanError,
    NetplanInputs,
    RenderedNetplan,
    discover_addresses,
    interface_mapping,
    render_netplan,
)

BONDED = textwrap.dedent("""\
    version: 2
    renderer: networkd
    ethernets:
      {{ nic(0) }}:
        dhcp4: false
        match:
          macaddress: "{{ mac(0) }}"
        set-name: {{ nic(0) }}
      {{ nic(1) }}:
        dhcp4: false
        match:
          macaddress: "{{ mac(1) }}"
        set-name: {{ nic(1) }}
    bonds:
      bond0:
        interfaces: [{{ nic(0) }}, {{ nic(1) }}]
        parameters:
          mode: 802.3ad
        addresses:
          - {{ ip("bond0:lcm") }}
        gateway4: {{ gateway_from_subnet("lcm") }}
        nameservers:
          addresses: [{{ nameservers_from_subnet("lcm") }}]
    vlans:
      bond0.200:
        id: 200
        link: bond0
    bridges:
      k8s-pods:
        interfaces: [bond0.200]
        addresses:
          - {{ ip("k8s-pods:pods") }}
        routes:
          - to: {{ cidr_from_subnet("lcm") }}
            via: {{ gateway_from_subnet("pods") }}
            metric: 100
    """)

EXPECTED: dict[str, Any] = {
    "version": 2,
    "renderer": "networkd",
    "ethernets": {
        "eno1": {"dhcp4": False, "match": {"macaddress": "0c:c4:7a:00:00:01"}, "set-name": "eno1"},
        "eno2": {"dhcp4": False, "match": {"macaddress": "0c:c4:7a:00:00:02"}, "set-name": "eno2"},
    },
    "bonds": {"bond0": {
        "interfaces": ["eno1", "eno2"],
        "parameters": {"mode": "802.3ad"},
        "addresses": ["10.0.10.21/24"],
        "gateway4": "10.0.10.1",
        "nameservers": {"addresses": ["10.0.0.53", "10.0.0.54"]},
    }},
    "vlans": {"bond0.200": {"id": 200, "link": "bond0"}},
    "bridges": {"k8s-pods": {
        "interfaces": ["bond0.200"],
        "addresses": ["192.168.200.7/22"],
        "routes": [{"to": "10.0.10.0/24", "via": "192.168.200.1", "metric": 100}],
    }},
}

SUBNETS = {
    "lcm": SubnetSpec(cidr="10.0.10.0/24", gateway="10.0.10.1",
                      nameservers=["10.0.0.53", "10.0.0.54"]),
    "pods": SubnetSpec(cidr="192.168.200.0/22", gateway="192.168.200.1"),
}
# Listed out of order, with a third NIC: auto mapping orders eno before ens, eno2 before eno10.
NICS = [HostNIC("ens3f0", "0c:c4:7a:00:00:99"), HostNIC("eno2", "0c:c4:7a:00:00:02"),
        HostNIC("eno1", "0c:c4:7a:00:00:01")]
ALLOCATED = {AddressRequest("bond0", "lcm"): "10.0.10.21",
             AddressRequest("k8s-pods", "pods"): "192.168.200.7"}


def template(np: str, **spec: Any) -> L2TemplateSpec:
    spec.setdefault("l3Layout", [{"subnetName": "lcm"}, {"subnetName": "pods"}])
    spec.setdefault("autoIfMappingPrio", ["eno", "ens"])
    return L2TemplateSpec.model_validate({"npTemplate": np, **spec})


def inputs(np: str = BONDED, nics: list[HostNIC] = NICS, **spec: Any) -> NetplanInputs:
    return NetplanInputs(template(np, **spec), nics, SUBNETS, cluster_api_lb_ip="10.0.10.5")


def errors(result: object) -> list[str]:
    assert isinstance(result, list), result
    return [str(e) for e in result]


def test_two_pass_render() -> None:
    found = discover_addresses(inputs())
    assert found == (AddressRequest("bond0", "lcm"), AddressRequest("k8s-pods", "pods"))
    assert isinstance(found, tuple)
    rendered = render_netplan(inputs(), ALLOCATED)
    assert isinstance(rendered, RenderedNetplan), rendered
    assert rendered.netconfig == EXPECTED
    assert rendered.addresses == found


def test_nic_index_requests_carry_the_mac() -> None:
    np = "version: 2\nethernets:\n  {{ nic(1) }}:\n    addresses: [{{ ip('1:lcm') }}]\n"
    found = discover_addresses(inputs(np))
    assert isinstance(found, tuple)
    assert [(r.interface, r.subnet, r.mac) for r in found] == [("1", "lcm", "0c:c4:7a:00:00:02")]
    rendered = render_netplan(inputs(np), {AddressRequest("1", "lcm"): "10.0.10.9"})
    assert isinstance(rendered, RenderedNetplan)
    assert rendered.netconfig["ethernets"] == {"eno2": {"addresses": ["10.0.10.9/24"]}}


def test_whole_file_with_network_key_and_api_vip() -> None:
    np = ("network:\n  version: 2\n  ethernets:\n    {{ nic(0) }}:\n"
          "      routes: [{to: '{{ cluster_api_lb_ip() }}/32', via: 10.0.10.1}]\n")
    rendered = render_netplan(inputs(np), {})
    assert isinstance(rendered, RenderedNetplan)
    assert rendered.netconfig["ethernets"]["eno1"]["routes"][0]["to"] == "10.0.10.5/32"


@pytest.mark.parametrize(("if_mapping", "prio", "names"), [
    (["ens3f0", "eno1"], [], ["ens3f0", "eno1"]),
    ([], ["ens"], ["ens3f0", "eno1", "eno2"]),
    ([], [], ["eno1", "eno2", "ens3f0"]),
])
def test_interface_mapping(if_mapping: list[str], prio: list[str], names: list[str]) -> None:
    spec = template("", ifMapping=if_mapping, autoIfMappingPrio=prio)
    mapping = interface_mapping(spec, NICS)
    assert isinstance(mapping, list)
    assert [n.name for n in mapping] == names


def test_natural_order_and_inspection_nics() -> None:
    nics = HostNIC.from_inspection([NIC(name="eno10", mac="AA:00:00:00:00:10"),
                                    NIC(name="eno2", mac="aa:00:00:00:00:02"), NIC(name="lo"),
                                    NICMapping(name="eno1", mac="aa:00:00:00:00:01")])
    mapping = interface_mapping(template("", autoIfMappingPrio=[]), nics)
    assert isinstance(mapping, list)
    assert [(n.name, n.mac) for n in mapping] == [
        ("eno1", "aa:00:00:00:00:01"), ("eno2", "aa:00:00:00:00:02"),
        ("eno10", "aa:00:00:00:00:10")]


E2 = "version: 2\nethernets:\n"


@pytest.mark.parametrize(("np", "spec", "message"), [
    (E2 + "  {{ nic(3) }}: {}\n", {},
     "line 3: NIC index 3 is out of range: the host has 3 NICs"),
    (E2 + "  {{ nic(0) }}:\n    addresses: [{{ ip('0:storage') }}]\n", {},
     "line 4: subnet 'storage' is not in the template's l3Layout"),
    (E2 + "  x: {gateway4: {{ cidr_from_subnet('nope') }}}\n", {},
     "line 3: subnet 'nope' is not in the template's l3Layout"),
    (E2 + "  {{ nic(0) }: {}\n", {}, "line 3: template syntax error"),
    (E2 + "  {% for x in y %}\n", {}, "template syntax error"),
    (E2 + "  {{ undefined_thing }}: {}\n", {}, "line 3: template error: 'undefined_thing'"),
    (E2 + "  {{ nic.__globals__ }}: {}\n", {}, "line 3: refused by the sandbox"),
    (E2 + "  {{ ''.__class__.__mro__ }}: {}\n", {}, "line 3: refused by the sandbox"),
    (E2 + "  {{ ip('0') }}: {}\n", {}, 'expected "N:subnet"'),
    (E2 + "  {{ nic('x') }}: {}\n", {}, "NIC index 'x' is not a number"),
    (E2, {"ifMapping": ["eth9"]}, "ifMapping names NICs the host does not have: eth9"),
])
def test_render_errors(np: str, spec: dict[str, Any], message: str) -> None:
    for result in (discover_addresses(inputs(np, **spec)),
                   render_netplan(inputs(np, **spec), ALLOCATED)):
        found = errors(result)
        assert any(message in e for e in found), found


def test_subnet_missing_and_no_vip() -> None:
    np = E2 + "  {{ nic(0) }}: {gateway4: {{ gateway_from_subnet('gone') }}}\n"
    found = errors(render_netplan(inputs(np, l3Layout=[{"subnetName": "gone"}]), {}))
    assert found == ["line 3: subnet 'gone' of the l3Layout was not found"]
    no_vip = NetplanInputs(template(E2 + "  {{ cluster_api_lb_ip() }}: {}\n"), NICS, SUBNETS)
    assert "the cluster has no API server VIP" in errors(render_netplan(no_vip, {}))[0]


@pytest.mark.parametrize(("allocated", "message"), [
    ({}, "no address allocated for interface 'bond0' from subnet 'lcm'"),
    ({AddressRequest("bond0", "lcm"): "10.9.9.9"},
     "allocated address 10.9.9.9 is outside subnet 'lcm' (10.0.10.0/24)"),
    ({AddressRequest("bond0", "lcm"): "banana"}, "'banana' is not an IP address"),
])
def test_allocation_errors(allocated: dict[AddressRequest, str], message: str) -> None:
    assert message in errors(render_netplan(inputs(), allocated))[0]


@pytest.mark.parametrize(("np", "message"), [
    ("version: 2\nethernets: {a: [}\n", "rendered template is not YAML"),
    ("- 1\n", "netplan document must be a mapping"),
    ("version: 3\n", "network.version must be 2, got 3"),
    ("version: 2\nwifi: {}\n", "network.wifi: unknown netplan key"),
    ("version: 2\nethernets: []\n", "network.ethernets must be a map"),
    ("version: 2\nethernets: {a: {addresses: [10.0.0.1]}}\n",
     "network.ethernets.a.addresses: '10.0.0.1' is not an address with prefix"),
    ("version: 2\nethernets: {a: {match: {macaddress: zz}}}\n",
     "network.ethernets.a.match.macaddress: 'zz' is not a MAC address"),
    ("version: 2\nethernets: {a: {macaddress: 12:34:56:12:34:56}}\n", "quote MACs"),
    ("version: 2\nethernets: {a: {routes: [{to: nowhere, via: 10.0.0.1}]}}\n",
     "network.ethernets.a.routes[0].to: 'nowhere'"),
    ("version: 2\nethernets: {a: {routes: {to: default}}}\n", "routes must be a list"),
    ("version: 2\nethernets: {a: {routes: [{to: default, via: x}]}}\n",
     "routes[0].via: 'x' is not an IP address"),
    ("version: 2\nethernets: {a: {gateway4: x}}\n", "gateway4: 'x' is not an IP address"),
    ("version: 2\nethernets: {a: {nameservers: {addresses: [x]}}}\n",
     "nameservers.addresses"),
    ("version: 2\nbonds: {b: {interfaces: [eth7]}}\n",
     "network.bonds.b.interfaces: 'eth7' is not defined"),
    ("version: 2\nethernets: {a: {}}\nvlans: {v: {id: 5000, link: a}}\n",
     "network.vlans.v.id: 5000 is not a VLAN id"),
    ("version: 2\nvlans: {v: {id: 5, link: a}}\n", "network.vlans.v.link: 'a' is not defined"),
])
def test_output_checks(np: str, message: str) -> None:
    found = errors(render_netplan(inputs(np), {}))
    assert any(message in e for e in found), found


addresses = st.ip_addresses(v=4, network="10.0.10.0/24").map(str)


@given(lcm=addresses, pods=st.ip_addresses(v=4, network="192.168.200.0/22").map(str),
       nics=st.permutations(NICS))
def test_rendering_is_deterministic(lcm: str, pods: str, nics: list[HostNIC]) -> None:
    allocated = {AddressRequest("bond0", "lcm"): lcm, AddressRequest("k8s-pods", "pods"): pods}
    first = render_netplan(inputs(nics=list(nics)), allocated)
    second = render_netplan(inputs(nics=list(reversed(nics))), dict(reversed(allocated.items())))
    assert isinstance(first, RenderedNetplan), first
    assert first == second
    assert first.netconfig["bonds"]["bond0"]["addresses"] == [f"{lcm}/24"]


def test_error_type_is_plain_data() -> None:
    assert str(NetplanError("x", 4)) == "line 4: x"
    assert str(NetplanError("x")) == "x"
