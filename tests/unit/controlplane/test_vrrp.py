"""racksmith.controlplane.vrrp: router ids unique per L2 segment, and what
the keepalived configuration of one control-plane machine says."""

from __future__ import annotations

import pytest

from racksmith.controlplane.vrrp import (
    Peer,
    RouterClaim,
    RouterIdProblem,
    allocate_router_id,
    new_auth_pass,
    render_keepalived,
)

NET = ("10.10.0.0/24",)


def test_the_lowest_free_id_on_the_segment_and_a_recorded_one_is_kept() -> None:
    others = [RouterClaim("a/one", NET, 1), RouterClaim("a/two", ("10.10.0.0/16",), 2),
              RouterClaim("b/far", ("10.99.0.0/24",), 3)]
    assert allocate_router_id(RouterClaim("a/new", NET, None), others) == 3
    assert allocate_router_id(RouterClaim("a/new", NET, 7), others) == 7
    # Recorded, but a neighbour holds it too (a restored cluster): a free one.
    assert allocate_router_id(RouterClaim("a/new", NET, 2), others) == 3
    # A cluster's own claim in the list is not a neighbour's.
    assert allocate_router_id(RouterClaim("a/one", NET, 1), others) == 1


def test_a_wanted_id_a_neighbour_holds_is_a_conflict_and_255_are_the_limit() -> None:
    others = [RouterClaim("a/one", NET, 51)]
    with pytest.raises(RouterIdProblem) as raised:
        allocate_router_id(RouterClaim("a/new", NET, None, wanted=51), others)
    assert raised.value.reason == "VirtualRouterIDConflict" and "a/one" in str(raised.value)
    assert allocate_router_id(RouterClaim("b/new", ("10.99.0.0/24",), None, wanted=51),
                              others) == 51
    full = [RouterClaim(f"a/c{i}", NET, i) for i in range(1, 256)]
    with pytest.raises(RouterIdProblem) as raised:
        allocate_router_id(RouterClaim("a/new", NET, None), full)
    assert raised.value.reason == "VirtualRouterIDsExhausted"


def test_keepalived_config_is_unicast_tracks_the_local_readyz_and_repeats_garp() -> None:
    peers = [Peer(f"m{i}", f"10.10.0.10{i}") for i in (1, 2, 3)]
    text = render_keepalived(cluster="demo-x", me=peers[1], peers=peers, vip="10.10.0.5",
                             prefix_length=24, interface="eno1", router_id=9,
                             auth_pass="abcd1234", api_port=6443, ca_file="/pki/ca.crt")
    assert "unicast_src_ip 10.10.0.102" in text
    assert "10.10.0.101" in text and "10.10.0.103" in text
    assert "virtual_router_id 9" in text and "priority 149" in text
    assert "https://10.10.0.102:6443/readyz" in text and "--cacert /pki/ca.crt" in text
    assert "vrrp_garp_master_repeat 5" in text and "nopreempt" in text
    assert "10.10.0.5/24 dev eno1" in text and "vrrp_instance demo_x_api" in text
    for bad in ({"router_id": 0}, {"auth_pass": "too-long-pass"}, {"me": Peer("x", "1.2.3.4")}):
        args = {"cluster": "demo", "me": peers[0], "peers": peers, "vip": "10.10.0.5",
                "prefix_length": 24, "interface": "eno1", "router_id": 9,
                "auth_pass": "abcd1234", "api_port": 6443, "ca_file": "/pki/ca.crt", **bad}
        with pytest.raises(ValueError):
            render_keepalived(**args)  # type: ignore[arg-type]


def test_auth_pass_is_eight_letters_or_digits() -> None:
    word = new_auth_pass()
    assert len(word) == 8 and word.isalnum() and word != new_auth_pass()
