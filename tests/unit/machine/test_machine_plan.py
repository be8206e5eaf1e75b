"""The Machine planner: a table of observed worlds and the one step each leads to."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.observed import Observed
from racksmith.controllers.machine.plan import (
    AddFinalizer,
    ClaimHost,
    CordonNode,
    DeleteIpamHost,
    DeleteLCMMachine,
    DeleteNode,
    DeleteUserData,
    EnsureIpamHost,
    EvictPods,
    ProvisionHost,
    ReleaseHost,
    RemoveFinalizer,
    Step,
    SyncNodeRoles,
    Wait,
    WriteLCMMachine,
    WriteUserData,
    decide,
)
from racksmith.controllers.machine.timings import MachineTimings
from racksmith.controllers.machine.userdata import render_user_data, token_fresh, token_of
from racksmith.controlplane.vrrp import Peer
from racksmith.kinds.cluster import AddressType, ClusterStatus, MachinePhase
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.hostannotations import DETACHED, PAUSED
from racksmith.planners.release import NETPLAN_ITEM
from tests.unit.machine import builders as b

RETRY_NO_HOST = MachineTimings().retry_no_host

M = b.machine()


def lcm_spec(roles: list[str] | None = None) -> dict[str, Any]:
    """The LCMMachine spec the planner renders for m1 (asked from the planner)."""
    step = decide(b.observed(b.machine(roles=roles), hosts=(b.host("h1", consumer=M),),
                             ipamhost=b.ipamhost()))
    assert isinstance(step.action, WriteLCMMachine)
    spec: dict[str, Any] = step.action.spec.model_dump(mode="json", by_alias=True)
    return spec


def provisioned(**kw: Any) -> dict[str, Any]:
    """Everything in place up to a provisioned host."""
    base: dict[str, Any] = {
        "hosts": (b.host("h1", consumer=M, state="provisioned", image=b.IMAGE,
                         user_data="m1-user-data", online=True),),
        "ipamhost": b.ipamhost(), "lcm": b.lcm(lcm_spec()), "user_data": b.user_data(),
    }
    base.update(kw)
    return base


def cond(step: Step, kind: str) -> tuple[ConditionStatus, str] | None:
    for c in step.conditions:
        if c.type == kind:
            return c.status, c.reason
    return None


@dataclass(frozen=True)
class Case:
    name: str
    world: Callable[[], Observed]
    action: type
    phase: MachinePhase
    condition: tuple[str, ConditionStatus, str] | None = None


CASES = [
    Case("no finalizer yet", lambda: b.observed(b.machine(finalizer=False)), AddFinalizer,
         MachinePhase.PENDING),
    Case("cluster missing", lambda: b.observed(cluster=None), Wait, MachinePhase.PENDING,
         (n.CLUSTER_FOUND, ConditionStatus.FALSE, n.NOT_FOUND)),
    Case("release missing", lambda: b.observed(release=None), Wait, MachinePhase.PENDING,
         (n.RELEASE_FOUND, ConditionStatus.FALSE, n.NOT_FOUND)),
    Case("no host at all", lambda: b.observed(), Wait, MachinePhase.PENDING,
         (n.HOST_CLAIMED, ConditionStatus.FALSE, n.NO_MATCHING_HOST)),
    Case("only unusable hosts", lambda: b.observed(hosts=(
        b.host("a", state="provisioning"),
        b.host("b", consumer=b.machine("other", uid="uid-other")),
        b.host("c", annotations={PAUSED: ""}),
        b.host("d", annotations={DETACHED: ""}),
    )), Wait, MachinePhase.PENDING, (n.HOST_CLAIMED, ConditionStatus.FALSE, n.NO_MATCHING_HOST)),
    Case("free host", lambda: b.observed(hosts=(b.host("h2"), b.host("h1"))), ClaimHost,
         MachinePhase.PENDING),
    Case("claimed: network first", lambda: b.observed(hosts=(b.host("h1", consumer=M),)),
         EnsureIpamHost, MachinePhase.PENDING, (n.HOST_CLAIMED, ConditionStatus.TRUE, n.CLAIMED)),
    Case("network pending", lambda: b.observed(hosts=(b.host("h1", consumer=M),),
                                               ipamhost=b.ipamhost("Pending")),
         Wait, MachinePhase.PENDING, (n.NETWORK_READY, ConditionStatus.FALSE, "Pending")),
    Case("network error", lambda: b.observed(hosts=(b.host("h1", consumer=M),),
                                             ipamhost=b.ipamhost("Error", messages=["bad"])),
         Wait, MachinePhase.PENDING, (n.NETWORK_READY, ConditionStatus.FALSE, "Error")),
    Case("network ready: LCMMachine", lambda: b.observed(hosts=(b.host("h1", consumer=M),),
                                                         ipamhost=b.ipamhost()),
         WriteLCMMachine, MachinePhase.PENDING,
         (n.NETWORK_READY, ConditionStatus.TRUE, "OK")),
    Case("stale LCMMachine is rewritten", lambda: b.observed(
        hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(),
        lcm=b.lcm({**lcm_spec(), "release": "old"})), WriteLCMMachine, MachinePhase.PENDING),
    Case("agent secret missing", lambda: b.observed(
        hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()),
        agent="agent Secret racksmith-system/racksmith-agent not found"),
         Wait, MachinePhase.PENDING,
         (n.AGENT_CONFIG_READY, ConditionStatus.FALSE, "AgentSecretMissing")),
    Case("no image anywhere", lambda: b.observed(
        hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()),
        release=b.release(os_image=None)),
         Wait, MachinePhase.PENDING, (n.IMAGE_KNOWN, ConditionStatus.FALSE, "NoImage")),
    Case("user data next", lambda: b.observed(
        hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec())),
         WriteUserData, MachinePhase.PENDING),
    Case("default image used", lambda: b.observed(
        hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()),
        release=b.release(os_image=None), default_image=b.IMAGE, user_data=b.user_data()),
         ProvisionHost, MachinePhase.PROVISIONING),
    Case("host carries the image: provisioning", lambda: b.observed(
        hosts=(b.host("h1", consumer=M, image=b.IMAGE, user_data="m1-user-data", online=True),),
        ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()), user_data=b.user_data()),
         Wait, MachinePhase.PROVISIONING),
    Case("host provisioning", lambda: b.observed(**provisioned(hosts=(
        b.host("h1", consumer=M, state="provisioning", image=b.IMAGE),))),
         Wait, MachinePhase.PROVISIONING,
         (n.HOST_PROVISIONED, ConditionStatus.FALSE, "Provisioning")),
    Case("provisioned without agent secret or image still deploys",
         lambda: b.observed(**provisioned(), agent="gone", release=b.release(os_image=None)),
         Wait, MachinePhase.DEPLOYING, (n.READY, ConditionStatus.FALSE, "Deploying")),
    Case("agent ready, no node", lambda: b.observed(**provisioned(
        lcm=b.lcm(lcm_spec(), phase="Ready"))),
         Wait, MachinePhase.DEPLOYING, (n.READY, ConditionStatus.FALSE, "NodeNotReady")),
    Case("agent on an old generation", lambda: b.observed(**provisioned(
        lcm=b.lcm(lcm_spec(), phase="Ready", observed=1, generation=2)), node=b.node(
            labels={"node-role.kubernetes.io/node": ""})),
         Wait, MachinePhase.DEPLOYING, (n.READY, ConditionStatus.FALSE, "Deploying")),
    Case("node without role labels", lambda: b.observed(**provisioned(), node=b.node()),
         SyncNodeRoles, MachinePhase.DEPLOYING),
    Case("node not ready", lambda: b.observed(**provisioned(
        lcm=b.lcm(lcm_spec(), phase="Ready")),
        node=b.node(ready=False, labels={"node-role.kubernetes.io/node": ""})),
         Wait, MachinePhase.DEPLOYING, (n.READY, ConditionStatus.FALSE, "NodeNotReady")),
    Case("everything ready", lambda: b.observed(**provisioned(
        lcm=b.lcm(lcm_spec(), phase="Ready")), node=b.node(
            labels={"node-role.kubernetes.io/node": ""})),
         Wait, MachinePhase.READY, (n.READY, ConditionStatus.TRUE, "Ready")),
    Case("claimed host vanished after Pending", lambda: b.observed(b.machine(status={
        "phase": "Provisioning", "hostRef": {"name": "h1"}})),
         Wait, MachinePhase.FAILED, (n.HOST_CLAIMED, ConditionStatus.FALSE, n.HOST_GONE)),
    # --- deletion
    Case("delete: cordon", lambda: b.observed(b.machine(deleting=True), **provisioned(),
                                              node=b.node()),
         CordonNode, MachinePhase.DELETING),
    Case("delete: evict", lambda: b.observed(
        b.machine(deleting=True), **provisioned(), node=b.node(unschedulable=True),
        pods=(b.pod("web"), b.pod("ds", daemonset=True), b.pod("mirror", mirror=True))),
         EvictPods, MachinePhase.DELETING, (n.DRAINED, ConditionStatus.FALSE, "Draining")),
    Case("delete: pods terminating", lambda: b.observed(
        b.machine(deleting=True), **provisioned(), node=b.node(unschedulable=True),
        pods=(b.pod("web", terminating=True), b.pod("ds", daemonset=True))),
         Wait, MachinePhase.DELETING, (n.DRAINED, ConditionStatus.FALSE, "Draining")),
    Case("delete: drained, node goes", lambda: b.observed(
        b.machine(deleting=True), **provisioned(), node=b.node(unschedulable=True),
        pods=(b.pod("ds", daemonset=True),)),
         DeleteNode, MachinePhase.DELETING, (n.DRAINED, ConditionStatus.TRUE, "Drained")),
    Case("delete: LCMMachine", lambda: b.observed(b.machine(deleting=True), **provisioned()),
         DeleteLCMMachine, MachinePhase.DELETING),
    Case("delete: release the host", lambda: b.observed(
        b.machine(deleting=True), **provisioned(lcm=None)), ReleaseHost, MachinePhase.DELETING),
    Case("delete: IpamHost", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}),
        **provisioned(lcm=None, hosts=(b.host("h1", state="provisioned"),))),
         DeleteIpamHost, MachinePhase.DELETING),
    Case("delete: user data", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}),
        **provisioned(lcm=None, ipamhost=None, hosts=(b.host("h1", state="provisioned"),))),
         DeleteUserData, MachinePhase.DELETING),
    Case("delete: host deprovisioning", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}),
        hosts=(b.host("h1", state="deprovisioning"),)),
         Wait, MachinePhase.DELETING, (n.HOST_CLAIMED, ConditionStatus.FALSE, "Releasing")),
    Case("delete: agent registered the node again", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}, "conditions": [
            {"type": n.DRAINED, "status": "True", "reason": "Drained"}]}),
        hosts=(b.host("h1"),), node=b.node()), DeleteNode, MachinePhase.DELETING),
    Case("delete: addresses still held", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}),
        hosts=(b.host("h1"),), ipamhost=b.ipamhost(deleting=True)),
         Wait, MachinePhase.DELETING),
    Case("delete: host taken by another machine", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}),
        hosts=(b.host("h1", state="provisioning",
                      consumer=b.machine("m2", uid="uid-m2")),)),
         RemoveFinalizer, MachinePhase.DELETING),
    Case("delete: all gone", lambda: b.observed(
        b.machine(deleting=True, status={"hostRef": {"name": "h1"}}), hosts=(b.host("h1"),)),
         RemoveFinalizer, MachinePhase.DELETING),
    Case("delete: never got a host", lambda: b.observed(b.machine(deleting=True)),
         RemoveFinalizer, MachinePhase.DELETING),
    Case("delete: finalizer already gone", lambda: b.observed(
        b.machine(deleting=True, finalizer=False)), Wait, MachinePhase.DELETING),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decide(case: Case) -> None:
    step = decide(case.world())
    assert isinstance(step.action, case.action), step.action
    assert step.phase is case.phase
    if case.condition is not None:
        kind, status, reason = case.condition
        assert cond(step, kind) == (status, reason), step.conditions


def test_claims_in_name_order_only_matching_hosts() -> None:
    m = b.machine(selector={"matchLabels": {"rack": "a"},
                            "matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]})
    step = decide(b.observed(m, hosts=(
        b.host("h3", labels={"rack": "a"}), b.host("h1", labels={"rack": "b"}),
        b.host("h2", labels={"rack": "a"}), b.host("h0", labels={"rack": "a", "gpu": "1"}))))
    assert step.action == ClaimHost(("h2", "h3"))


def test_no_match_names_the_selector_and_retries() -> None:
    m = b.machine(selector={"matchLabels": {"rack": "z"}})
    step = decide(b.observed(m, hosts=(b.host("h1", labels={"rack": "a"}),)))
    assert step.action == Wait(RETRY_NO_HOST)
    message = next(c.message for c in step.conditions if c.type == n.HOST_CLAIMED)
    assert "rack=z" in message


def test_waits_come_from_the_timings_of_the_input() -> None:
    fast = MachineTimings(retry_missing=0.1, retry_no_host=0.2, retry_drain=0.3,
                          retry_terminating=0.4, resync=0.5)
    assert decide(b.observed(cluster=None, timings=fast)).action == Wait(0.1)
    assert decide(b.observed(release=None, timings=fast)).action == Wait(0.1)
    assert decide(b.observed(timings=fast)).action == Wait(0.2)
    ready = b.observed(**provisioned(lcm=b.lcm(lcm_spec(), phase="Ready")), node=b.node(
        labels={"node-role.kubernetes.io/node": ""}), timings=fast)
    assert decide(ready).action == Wait(0.5)
    going = b.observed(b.machine(deleting=True), **provisioned(),
                       node=b.node(unschedulable=True),
                       pods=(b.pod("web", terminating=True),), timings=fast)
    assert decide(going).action == Wait(0.4)


def test_same_name_other_uid_is_not_ours() -> None:
    old = b.machine(uid="uid-old")
    step = decide(b.observed(hosts=(b.host("h1", consumer=old), b.host("h2"))))
    assert step.action == ClaimHost(("h2",))


def test_ipamhost_spec_lists_inspected_nics_with_the_boot_nic_primary() -> None:
    step = decide(b.observed(hosts=(b.host("h1", consumer=M),)))
    assert isinstance(step.action, EnsureIpamHost)
    spec = step.action.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert spec == {"machineRef": {"name": "m1"}, "nicMACmap": [
        {"name": "eno1", "mac": "52:54:00:00:00:01", "primary": True},
        {"name": "eno2", "mac": "52:54:00:00:00:02", "primary": False}]}
    assert step.host_ref is not None and step.host_ref.name == "h1"


def test_lcm_spec_carries_the_netplan_first_and_role_items() -> None:
    worker = lcm_spec()
    assert worker["machineRef"] == {"name": "m1"}
    assert (worker["clusterName"], worker["release"]) == ("demo", "rel-1")
    assert [i["name"] for i in worker["stateItems"]] == [NETPLAN_ITEM, "containerd"]
    master = lcm_spec(["master", "etcd"])
    assert [i["name"] for i in master["stateItems"]] == [NETPLAN_ITEM, "containerd", "init"]


def test_invalid_roles_make_the_release_invalid() -> None:
    m = b.machine()
    m.spec.roles = []  # the schema allows an empty set; the role planner refuses it
    step = decide(b.observed(m, hosts=(b.host("h1", consumer=m),), ipamhost=b.ipamhost()))
    assert isinstance(step.action, Wait)
    assert cond(step, n.RELEASE_VALID) == (ConditionStatus.FALSE, "Invalid")


def test_user_data_is_the_cloud_config_with_the_agent_config() -> None:
    step = decide(b.observed(hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(),
                             lcm=b.lcm(lcm_spec())))
    assert isinstance(step.action, WriteUserData)
    assert "t0k3n" not in repr(step.action)
    assert step.action.token == "t0k3n"
    text = render_user_data(step.action.access, "t0k3n", "default", "m1")
    assert text == b.user_data()
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert doc["runcmd"] == [["racksmith", "agent", "--config", "/etc/racksmith/agent.yaml"]]
    (entry,) = doc["write_files"]
    assert (entry["path"], entry["permissions"]) == ("/etc/racksmith/agent.yaml", "0600")
    config = yaml.safe_load(entry["content"])
    assert config["server"] == "https://127.0.0.1:6443"
    assert config["token"] == "t0k3n"
    assert (config["namespace"], config["lcmMachine"], config["nodeName"]) == (
        "default", "m1", "m1")


def test_user_data_without_a_fresh_token_asks_for_a_new_one() -> None:
    world = dict(hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(),
                 lcm=b.lcm(lcm_spec()))
    for written in (None, b.user_data()):
        step = decide(b.observed(**world, user_data=written, agent_token=None))
        assert step.action == WriteUserData(b.AGENT, None)


def test_token_fresh_reads_the_binding_and_the_renewal_rule() -> None:
    def jwt(claims: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        return f"e30.{body}.sig"

    k8s = {"namespace": "default",
           "serviceaccount": {"name": "racksmith-host-m1", "uid": "s"},
           "secret": {"name": "m1-user-data", "uid": "sec-1"}}
    token = jwt({"iat": 1000, "exp": 2000, "kubernetes.io": k8s})
    assert token_fresh(token, "sec-1", 1500)
    assert not token_fresh(token, "sec-1", 1801)  # less than a fifth left
    assert not token_fresh(token, "sec-2", 1500)  # another Secret (re-created)
    assert not token_fresh(token, "", 1500)  # no Secret yet
    lcm_bound = {**k8s, "lcmmachine": {"name": "m1", "uid": "sec-1"}}
    del lcm_bound["secret"]
    assert not token_fresh(jwt({"iat": 1000, "exp": 2000, "kubernetes.io": lcm_bound}),
                           "sec-1", 1500)  # an older agent token: bound to the LCMMachine
    assert not token_fresh(jwt({"iat": 1000, "exp": 2000, "kubernetes.io": {
        "namespace": "default", "serviceaccount": {"name": "x", "uid": "s"}}}), "sec-1", 1500)
    assert not token_fresh("t0k3n", "sec-1", 1500)
    assert not token_fresh(None, "sec-1", 1500)
    assert token_of(b.user_data()) == b.TOKEN
    assert token_of("#cloud-config\nfoo: [") is None


def test_provision_sets_the_profile_and_never_touches_a_started_host() -> None:
    m = b.machine(profile="fast")
    world = dict(ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()), user_data=b.user_data())
    step = decide(b.observed(m, hosts=(b.host("h1", consumer=m),), **world))
    assert step.action == ProvisionHost("h1", b.IMAGE, "fast")
    # Another image in the release later: a provisioned host is left alone.
    other = b.release(os_image=b.IMAGE.model_copy(update={"url": "http://new"}))
    step = decide(b.observed(m, release=other, **world, hosts=(
        b.host("h1", consumer=m, state="provisioned", image=b.IMAGE),)))
    assert not isinstance(step.action, ProvisionHost)


def test_node_roles_exact_for_dedicated_master_others_untouched() -> None:
    m = b.machine(roles=["master", "etcd"])
    world = provisioned(lcm=b.lcm(lcm_spec(["master", "etcd"]), phase="Ready"))
    world["hosts"] = (b.host("h1", consumer=m, state="provisioned", image=b.IMAGE,
                             user_data="m1-user-data", online=True),)
    node = b.node(labels={"kubernetes.io/hostname": "m1", "node-role.kubernetes.io/node": ""},
                  taints=[{"key": "example.com/gpu", "effect": "NoSchedule"},
                          {"key": "node-role.kubernetes.io/infra", "effect": "NoSchedule"}])
    step = decide(b.observed(m, **world, node=node))
    assert isinstance(step.action, SyncNodeRoles)
    assert step.action.labels == {"kubernetes.io/hostname": "m1",
                                  "node-role.kubernetes.io/master": "",
                                  "node-role.kubernetes.io/etcd": ""}
    assert list(step.action.taints) == [
        {"key": "example.com/gpu", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/etcd", "effect": "NoSchedule"}]
    synced = b.node(labels=step.action.labels, taints=list(step.action.taints))
    again = decide(b.observed(m, **world, node=synced))
    assert again.phase is MachinePhase.READY


def test_ready_fields() -> None:
    step = decide(b.observed(**provisioned(lcm=b.lcm(lcm_spec(), phase="Ready")),
                             node=b.node(labels={"node-role.kubernetes.io/node": ""})))
    assert step.ready is not None
    assert step.ready.node_ref.name == "m1" and step.ready.node_ref.kind == "Node"
    assert step.ready.release == "rel-1"
    assert [(a.type, a.address) for a in step.ready.addresses] == [
        (AddressType.INTERNAL_IP, "10.10.0.11"), (AddressType.WORKLOAD_IP, "10.20.0.11"),
        (AddressType.HOSTNAME, "m1")]


def test_eviction_skips_daemonset_and_mirror_pods() -> None:
    step = decide(b.observed(b.machine(deleting=True), **provisioned(),
                             node=b.node(unschedulable=True),
                             pods=(b.pod("web"), b.pod("ds", daemonset=True),
                                   b.pod("mirror", mirror=True), b.pod("db"))))
    assert isinstance(step.action, EvictPods)
    assert [p.name for p in step.action.pods] == ["web", "db"]


def test_release_clears_the_profile_only_when_we_set_it() -> None:
    m = b.machine(deleting=True)
    ours = b.host("h1", consumer=m, state="provisioned",
                  annotations={n.PROFILE_SET_ANNOTATION: "m1"})
    step = decide(b.observed(m, hosts=(ours,)))
    assert step.action == ReleaseHost("h1", clear_profile=True)
    theirs = b.host("h1", consumer=m, state="provisioned")
    assert decide(b.observed(m, hosts=(theirs,))).action == ReleaseHost("h1", False)


def test_a_missing_cluster_keeps_the_phase_so_no_second_host_is_claimed() -> None:
    """A Failed machine (its host vanished) whose Cluster goes missing stays
    Failed; when the Cluster is back it still claims no other host (written
    back as Pending, it used to claim h2)."""
    failed = b.machine(status={"phase": "Failed", "hostRef": {"name": "h1"}})
    for missing in ({"cluster": None}, {"release": None}):
        step = decide(b.observed(failed, hosts=(b.host("h2"),), **missing))
        assert step.phase is MachinePhase.FAILED
        assert isinstance(step.action, Wait)
    back = decide(b.observed(failed, hosts=(b.host("h2"),)))
    assert not isinstance(back.action, ClaimHost)
    assert back.phase is MachinePhase.FAILED
    # A machine that never got past Pending still waits as Pending.
    assert decide(b.observed(cluster=None)).phase is MachinePhase.PENDING


def test_a_vanished_host_rewrites_host_provisioned_too() -> None:
    """HostGone replaces what HostProvisioned said of the host while it lived
    ("host h1 is deleting"), not only HostClaimed and Ready."""
    step = decide(b.observed(b.machine(status={
        "phase": "Deploying", "hostRef": {"name": "h1"}, "conditions": [
            {"type": n.HOST_PROVISIONED, "status": "False", "reason": "Deleting",
             "message": "host h1 is deleting"}]})))
    by_type = {c.type: c for c in step.conditions}
    for kind in (n.HOST_CLAIMED, n.HOST_PROVISIONED, n.READY):
        assert by_type[kind].status is ConditionStatus.FALSE
        assert by_type[kind].reason == n.HOST_GONE
        assert "h1 is gone" in by_type[kind].message


def _cluster_with_endpoint(status: str, reason: str) -> Any:
    cluster = b.cluster()
    return cluster.model_copy(update={"status": ClusterStatus.model_validate({"conditions": [{
        "type": "ControlPlaneEndpointValid", "status": status, "reason": reason,
        "message": "spec.apiServer.vip 10.9.0.5 is in none of the control-plane networks",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]})})


def test_a_cluster_whose_endpoint_is_refused_gets_nothing_deployed() -> None:
    """A Pending machine of a cluster whose VIP is refused claims no host; one
    whose endpoint is only not known yet goes on; one past Pending finishes."""
    refused = _cluster_with_endpoint("False", "VIPOutsideControlPlaneNetwork")
    step = decide(b.observed(cluster=refused, hosts=(b.host("h1"),)))
    assert step.action == Wait(None) and step.phase is MachinePhase.PENDING
    assert cond(step, n.CLUSTER_ENDPOINT_VALID) == (ConditionStatus.FALSE,
                                                    "VIPOutsideControlPlaneNetwork")
    waiting = _cluster_with_endpoint("False", "WaitingForEndpoint")
    assert isinstance(decide(b.observed(cluster=waiting, hosts=(b.host("h1"),))).action,
                      ClaimHost)
    deployed = b.machine(status={"phase": "Deploying"})
    step = decide(b.observed(deployed, cluster=refused, **provisioned()))
    assert cond(step, n.CLUSTER_ENDPOINT_VALID) is None


def test_missing_certificates_are_named_for_the_machine_s_role() -> None:
    """A worker waits for the cluster CA and its kubelet's certificate; a
    control-plane machine for the certificate authorities."""
    for roles, wanted in ((["node"], "the cluster CA and its kubelet's certificate"),
                          (["master", "etcd"], "the cluster's certificate authorities")):
        step = decide(b.observed(b.machine(roles=roles), hosts=(b.host("h1", consumer=M),),
                                 ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec(roles)),
                                 pki_files="Secret demo-ca is missing"))
        message = next(c.message for c in step.conditions
                       if c.type == n.CLUSTER_CERTIFICATES_READY)
        assert message == f"Secret demo-ca is missing: the machine gets {wanted} in its user data"


def test_a_control_plane_machine_waits_for_the_cluster_pki_and_carries_it() -> None:
    """A master's user data carries the cluster's CAs (kubeadm's files, 0600);
    without them it waits, saying which Secret is missing."""
    world = dict(hosts=(b.host("h1", consumer=M),), ipamhost=b.ipamhost(),
                 lcm=b.lcm(lcm_spec()))
    step = decide(b.observed(**world, pki_files="Secret demo-etcd is missing"))
    assert isinstance(step.action, Wait)
    assert cond(step, n.CLUSTER_CERTIFICATES_READY) == (ConditionStatus.FALSE,
                                                        "CertificatesMissing")
    files = {"/etc/kubernetes/pki/ca.crt": b"CERT", "/etc/kubernetes/pki/ca.key": b"KEY"}
    step = decide(b.observed(**world, pki_files=files))
    assert isinstance(step.action, WriteUserData) and step.action.files == files
    assert "KEY" not in repr(step.action)
    text = render_user_data(step.action.access, "t0k3n", "default", "m1", files)
    entries = yaml.safe_load(text)["write_files"]
    assert entries[0]["path"] == "/etc/racksmith/agent.yaml"
    assert [(e["path"], e["permissions"], base64.b64decode(e["content"])) for e in
            entries[1:]] == [("/etc/kubernetes/pki/ca.crt", "0600", b"CERT"),
                             ("/etc/kubernetes/pki/ca.key", "0600", b"KEY")]
    # Written with the files, it is current: the next step moves on.
    step = decide(b.observed(**world, pki_files=files, user_data=text))
    assert not isinstance(step.action, WriteUserData)


def _cluster_with(status: dict[str, Any], **api: Any) -> Any:
    cluster = b.cluster()
    spec = cluster.spec.model_copy(update={
        "api_server": cluster.spec.api_server.model_copy(update=api)}) if api else cluster.spec
    return cluster.model_copy(update={"spec": spec,
                                      "status": ClusterStatus.model_validate(status)})


def test_an_even_number_of_masters_holds_machines_not_yet_rendered() -> None:
    """``ControlPlaneQuorum=False``: a machine without an LCMMachine waits in
    Pending, saying why; one already rendered goes on."""
    even = _cluster_with({"conditions": [{
        "type": "ControlPlaneQuorum", "status": "False", "reason": "EvenControlPlaneMachines",
        "message": "2 control-plane machines", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    step = decide(b.observed(cluster=even, hosts=(b.host("h1"),)))
    assert step.action == Wait(None) and step.phase is MachinePhase.PENDING
    assert cond(step, n.CLUSTER_ENDPOINT_VALID) == (ConditionStatus.FALSE,
                                                    "EvenControlPlaneMachines")
    rendered = b.observed(cluster=even, hosts=(b.host("h1", consumer=M),),
                          ipamhost=b.ipamhost(), lcm=b.lcm(lcm_spec()))
    assert cond(decide(rendered), n.CLUSTER_ENDPOINT_VALID) is None


def test_a_master_of_a_vip_cluster_gets_the_vip_items_once_the_router_id_is_known() -> None:
    m = b.machine(roles=["master", "etcd"])
    world = dict(hosts=(b.host("h1", consumer=m),), ipamhost=b.ipamhost())
    waiting = _cluster_with({}, vip="10.10.0.5")
    step = decide(b.observed(m, cluster=waiting, **world))
    assert step.action == Wait(None)
    assert cond(step, n.API_VIP_READY) == (ConditionStatus.FALSE, "WaitingForRouterID")
    known = _cluster_with({"virtualRouterID": 7}, vip="10.10.0.5")
    step = decide(b.observed(m, cluster=known, vip_peers=(Peer("m1", "10.10.0.11"),),
                             **world))
    assert isinstance(step.action, WriteLCMMachine)
    items = {i.name: i for i in step.action.spec.state_items}
    config = items["racksmith-keepalived-config"].params["content"]
    assert "virtual_router_id 7" in config and "interface eno1" in config
    kubeadm = items["init"].params["cluster"]
    assert kubeadm["apiServerBindPort"] == 6444 and kubeadm["advertiseAddress"] == "10.10.0.11"
    assert cond(step, n.API_VIP_READY) == (ConditionStatus.TRUE, "Rendered")
    worker = b.machine(roles=["node"])
    step = decide(b.observed(worker, cluster=known, hosts=(b.host("h1", consumer=worker),),
                             ipamhost=b.ipamhost()))
    assert isinstance(step.action, WriteLCMMachine)
    assert not any(i.name.startswith("racksmith-keep") for i in step.action.spec.state_items)
    assert cond(step, n.API_VIP_READY) is None
