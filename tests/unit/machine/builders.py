"""Builders of the objects the Machine planner decides from (plain models, no API)."""

from __future__ import annotations

from typing import Any

from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.observed import NodeView, Observed, PodView
from racksmith.controllers.machine.userdata import AgentAccess, render_user_data
from racksmith.kinds.cluster import Cluster, ClusterRelease, Machine
from racksmith.kinds.ipam import IpamHost
from racksmith.kinds.lcm import LCMMachine
from racksmith.kinds.metal import BareMetalHost, Image

NS = "default"
UID = "uid-m1"
IMAGE = Image(url="http://images.example/os.qcow2", checksum="abc")
AGENT = AgentAccess("https://127.0.0.1:6443", b"-----BEGIN CERTIFICATE-----\nx\n")
TOKEN = "t0k3n"
"""The agent token in the user data the builders render (a fresh one, say)."""
NETCONFIG: dict[str, Any] = {
    "version": 2,
    "ethernets": {
        "eno1": {"addresses": ["10.10.0.11/24"]},
        "eno2": {"addresses": ["10.20.0.11/24"]},
    },
}
DELETED_AT = "2025-01-01T00:00:00Z"


def machine(name: str = "m1", *, roles: list[str] | None = None, finalizer: bool = True,
            deleting: bool = False, selector: dict[str, Any] | None = None,
            status: dict[str, Any] | None = None, profile: str | None = None,
            uid: str = UID) -> Machine:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "generation": 1,
                            "finalizers": [n.FINALIZER] if finalizer else []}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    spec: dict[str, Any] = {"clusterName": "demo", "roles": roles or ["node"]}
    if selector is not None:
        spec["hostSelector"] = selector
    if profile is not None:
        spec["hostProfile"] = profile
    return Machine.model_validate({"metadata": meta, "spec": spec, "status": status})


def cluster() -> Cluster:
    return Cluster.model_validate({
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {"release": "rel-1", "networks": {"controlPlaneCIDRs": ["10.10.0.0/24"],
                                                  "workloadPlaneCIDRs": ["10.20.0.0/24"]}},
    })


def release(os_image: Image | None = IMAGE) -> ClusterRelease:
    return ClusterRelease.model_validate({
        "metadata": {"name": "rel-1"},
        "spec": {"version": "1.0.0", "kubernetesVersion": "1.30.0",
                 "osImage": os_image.model_dump(by_alias=True) if os_image else None,
                 "stateItems": [
                     {"name": "containerd", "phase": "configuration", "type": "package",
                      "params": {"name": "containerd", "version": "1.7"}},
                     {"name": "init", "phase": "join", "type": "kubeadm", "roles": ["master"],
                      "params": {"phase": "init"}},
                 ]},
    })


def host(name: str, *, state: str = "available", labels: dict[str, str] | None = None,
         consumer: Machine | None = None, annotations: dict[str, str] | None = None,
         image: Image | None = None, user_data: str | None = None, online: bool = False,
         error: str | None = None) -> BareMetalHost:
    spec: dict[str, Any] = {"bootMACAddress": "52:54:00:00:00:01", "online": online}
    if consumer is not None:
        spec["consumerRef"] = {"apiVersion": Machine.info.api_version, "kind": "Machine",
                               "name": consumer.metadata.name, "namespace": NS,
                               "uid": consumer.metadata.uid}
    if image is not None:
        spec["image"] = image.model_dump(by_alias=True)
    if user_data is not None:
        spec["userData"] = {"name": user_data}
    return BareMetalHost.model_validate({
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec,
        "status": {"provisioning": {"state": state}, "errorMessage": error,
                   "hardware": {"nics": [
                       {"name": "eno1", "mac": "52:54:00:00:00:01", "pxe": True},
                       {"name": "eno2", "mac": "52:54:00:00:00:02"}]}},
    })


def ipamhost(state: str | None = "OK", *, messages: list[str] | None = None,
             deleting: bool = False) -> IpamHost:
    meta: dict[str, Any] = {"name": "m1", "namespace": NS}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    return IpamHost.model_validate({
        "metadata": meta,
        "spec": {"machineRef": {"name": "m1"}, "nicMACmap": [
            {"name": "eno1", "mac": "52:54:00:00:00:01", "primary": True},
            {"name": "eno2", "mac": "52:54:00:00:00:02", "primary": False}]},
        "status": {"state": state, "netconfig": NETCONFIG if state == "OK" else None,
                   "messages": messages or []},
    })


def lcm(spec: dict[str, Any], *, phase: str | None = None, observed: int | None = 1,
        generation: int = 1, deleting: bool = False) -> LCMMachine:
    meta: dict[str, Any] = {"name": "m1", "namespace": NS, "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    status = None if phase is None else {"phase": phase, "observedGeneration": observed,
                                         "release": "rel-1"}
    return LCMMachine.model_validate({"metadata": meta, "spec": spec, "status": status})


def node(*, ready: bool = True, unschedulable: bool = False,
         labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None) -> NodeView:
    return NodeView.from_raw({
        "metadata": {"name": "m1", "labels": labels or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def pod(name: str, *, daemonset: bool = False, mirror: bool = False,
        terminating: bool = False) -> PodView:
    return PodView(NS, name, daemonset=daemonset, mirror=mirror, terminating=terminating)


def user_data(name: str = "m1") -> str:
    return render_user_data(AGENT, TOKEN, NS, name)


def observed(m: Machine | None = None, **kw: Any) -> Observed:
    base: dict[str, Any] = {"cluster": cluster(), "release": release(), "agent": AGENT,
                            "agent_token": TOKEN}
    base.update(kw)
    return Observed(machine=m or machine(), **base)
