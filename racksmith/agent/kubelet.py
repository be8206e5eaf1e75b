"""The emulated kubelet: an emulated host's Node and its Lease, inside the agent.

Owns, in emulated mode only and while ``<root>/etc/kubernetes/kubelet.conf``
exists (contracts, "The agent"): creating Node ``nodeName`` when absent
(labels ``kubernetes.io/{hostname,os,arch}``, ``spec.unschedulable: true``
at creation only), renewing Lease ``kube-node-lease/<node>`` every
``kubelet_status`` seconds and, on the same tick, posting the Node's status
through the status subresource (addresses, capacity/allocatable, nodeInfo,
Ready True and Memory/Disk/PIDPressure False) when it changed or
``kubelet_report`` seconds have passed since it was last posted — as the
kubelet does since node leases (nodeStatusReportFrequency): the Lease is the
heartbeat, so an idle fleet writes once per node and tick, not twice. A
Lease found missing (the Node was deleted, and the Lease with it) makes the
next tick look the Node up again. ``nodeInfo.bootID`` is the
content of ``/proc/sys/kernel/random/boot_id`` read when the kubelet starts
(the emulated OS boot writes a new uuid4 there at every boot; the node name
when the file is missing).

It also plays the kubelet for the pods bound to the node: on the same tick
(once at start, then every ``kubelet_status`` seconds) and, like a real
kubelet, as soon as its watch of the pods with ``spec.nodeName=<node>`` sees
one change (:meth:`EmulatedKubelet.follow_pods`), it lists those pods and,
for each one without a ``Ready=True``
condition, not being deleted and not finished (Succeeded/Failed), writes
through the pod status subresource phase Running, ``startTime`` (if unset),
conditions PodScheduled/Initialized/ContainersReady/Ready True (others kept)
and a running, ready status per container. Nothing runs: the pods only look
running.

The Node, its Lease and its pods are the cluster's (``AgentKube``'s node
side): once kubelet.conf carries the kubelet's client certificate, the
cluster's own API (the tick that first sees it registers the Node there);
before, the management API. An endpoint that does not answer yet fails the
tick, logged (never a credential), and the next one tries again.

Addresses: InternalIP is the first address of the netplan file
``/etc/netplan/60-racksmith.yaml`` inside a ``controlPlaneCIDRs`` network
(tried in order) of the kubeadm config's cluster context, else the first
address; plus Hostname. Capacity comes from ``/etc/racksmith/hardware.json``
(``cpus``, ``memoryBytes``). Role labels and taints are the Machine
controller's. Started by ``main``; the kubeadm executor wakes it through
:meth:`EmulatedKubelet.sync` as soon as kubelet.conf is written.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import structlog
import yaml

from racksmith.agent import kubeadm
from racksmith.agent.config import AgentTiming
from racksmith.agent.host import Host
from racksmith.agent.kube import AgentKube, rfc3339
from racksmith.clock import Clock, wait_event
from racksmith.planners.release import NETPLAN_PATH
from racksmith.runtime.source import Source

__all__ = [
    "BOOT_ID_PATH",
    "HARDWARE_PATH",
    "EmulatedKubelet",
    "capacity_from_hardware",
    "internal_ip",
    "netplan_addresses",
    "pod_needs_running",
    "running_pod_status",
]

HARDWARE_PATH = "/etc/racksmith/hardware.json"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_POD_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
_FINISHED = ("Succeeded", "Failed")
MAX_PODS = "110"
_NETPLAN_SECTIONS = ("ethernets", "bonds", "vlans", "bridges")
_PRESSURES = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)

log = structlog.get_logger("racksmith.agent.kubelet")


def netplan_addresses(document: Any) -> list[str]:
    """Every address (without prefix) of a netplan document, in file order."""
    network = document.get("network") if isinstance(document, dict) else None
    if not isinstance(network, dict):
        return []
    found: list[str] = []
    for section, devices in network.items():
        if section not in _NETPLAN_SECTIONS or not isinstance(devices, dict):
            continue
        for device in devices.values():
            addresses = device.get("addresses") if isinstance(device, dict) else None
            entries: Iterable[Any] = addresses if isinstance(addresses, list) else []
            for entry in entries:
                # An entry is "ip/prefix" or a one-key mapping {"ip/prefix": {options}}.
                text = next(iter(entry), None) if isinstance(entry, dict) else entry
                if isinstance(text, str) and text:
                    found.append(text.split("/")[0])
    return found


def internal_ip(addresses: list[str], cidrs: Iterable[str]) -> str | None:
    """The first address inside the first matching CIDR (in order), else the first address."""
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        for address in addresses:
            try:
                if ipaddress.ip_address(address) in network:
                    return address
            except ValueError:
                continue
    return addresses[0] if addresses else None


def capacity_from_hardware(hardware: Mapping[str, Any]) -> dict[str, str]:
    """Node capacity (cpu, memory, pods) from hardware.json."""
    capacity = {"pods": MAX_PODS}
    cpus = hardware.get("cpus")
    if isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > 0:
        capacity["cpu"] = str(cpus)
    memory = hardware.get("memoryBytes")
    if isinstance(memory, int) and not isinstance(memory, bool) and memory > 0:
        capacity["memory"] = f"{memory // 1024}Ki"
    return capacity


def pod_needs_running(pod: Mapping[str, Any]) -> bool:
    """The pod is bound here and does not look running yet: no ``Ready=True``
    condition, not being deleted, not finished."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in _FINISHED:
        return False
    conditions = status.get("conditions") or []
    return not any(isinstance(c, Mapping) and c.get("type") == "Ready"
                   and c.get("status") == "True" for c in conditions)


def running_pod_status(pod: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The status the emulated kubelet writes for ``pod``: Running and Ready."""
    status = pod.get("status") or {}
    stamp = rfc3339(now)
    kept = [c for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") not in _POD_CONDITIONS]
    ours = [{"type": kind, "status": "True", "lastProbeTime": None,
             "lastTransitionTime": stamp} for kind in _POD_CONDITIONS]
    containers = (pod.get("spec") or {}).get("containers") or []
    start = status.get("startTime") or stamp
    return {
        "phase": "Running",
        "startTime": start,
        "conditions": [*kept, *ours],
        "containerStatuses": [
            {"name": str(c.get("name") or ""), "image": str(c.get("image") or ""),
             "imageID": "", "ready": True, "started": True, "restartCount": 0,
             "state": {"running": {"startedAt": stamp}}}
            for c in containers if isinstance(c, Mapping)
        ],
    }


def _without_heartbeats(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without its conditions' ``lastHeartbeatTime`` (what tells
    whether a status changed)."""
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                         for c in status.get("conditions") or []]
    return out


class EmulatedKubelet:
    """Registers and keeps alive the Node of an emulated host (module docstring)."""

    def __init__(
        self, host: Host, kube: AgentKube, node_name: str, clock: Clock,
        timing: AgentTiming = AgentTiming(),
    ) -> None:
        self.host = host
        self.kube = kube
        self.node_name = node_name
        self.clock = clock
        self.timing = timing
        self._started: datetime | None = None
        self._boot_id: str | None = None
        self._node_uid: str | None = None
        self._posted: tuple[float, dict[str, Any]] | None = None
        """When the Node's status was last posted, and what (heartbeat times left out)."""
        self._leased = False
        """The Lease was there (or made) at the last tick."""
        self.failed_ticks = 0
        """Ticks of :meth:`run` whose sync failed (and were retried at the next)."""
        self._generation = kube.generation
        """The API the node side used at the last tick (``AgentKube.generation``)."""
        self._lock = asyncio.Lock()

    def is_configured(self) -> bool:
        return self.host.exists(kubeadm.KUBELET_CONF)

    async def sync(self) -> bool:
        """One kubelet tick: register the Node if absent, post its status if
        it changed or is due, renew the Lease.

        Returns False (doing nothing) while kubelet.conf does not exist.
        """
        async with self._lock:
            if not self.is_configured():
                return False
            now = self.clock.wall()
            if self._started is None:
                self._started = now
                self._boot_id = self._read_boot_id()
            context = kubeadm.read_cluster_context(self.host)
            status = self._status(context, now)
            await self.kube.refresh()
            if self.kube.generation != self._generation:
                self._generation = self.kube.generation
                self.forget()  # another API (the cluster's): register there
            if self._node_uid is None:
                node = await self.kube.get_node(self.node_name)
                if node is None:
                    node = await self.kube.create_node(self._node(status))
                    if node is not None:
                        log.info("node registered", node=self.node_name)
                    else:
                        node = await self.kube.get_node(self.node_name)
                self._node_uid = ((node or {}).get("metadata") or {}).get("uid")
            await self._post_status(status)
            had_lease = self._leased
            renewed = await self.kube.renew_lease(
                self.node_name, self._node_uid, self.timing.lease_duration, now
            )
            self._leased = True
            if had_lease and not renewed:
                self.forget()  # the Lease was gone: was the Node deleted?
            await self.run_pods(now)
            return True

    def forget(self) -> None:
        """Look the Node up and post its status at the next tick."""
        self._node_uid = None
        self._posted = None
        self._leased = False

    async def _post_status(self, status: dict[str, Any]) -> None:
        shape = _without_heartbeats(status)
        at = self.clock.now()
        posted = self._posted
        if posted is not None and posted[1] == shape and \
                at - posted[0] < self.timing.kubelet_report:
            return
        await self.kube.patch_node_status(self.node_name, status)
        self._posted = (at, shape)

    async def run_pods(self, now: datetime) -> int:
        """Make every pod bound to the node that does not look running yet
        Running and Ready (module docstring); returns how many were written."""
        written = 0
        for pod in await self.kube.node_pods(self.node_name):
            if not pod_needs_running(pod):
                continue
            meta = pod.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            if await self.kube.patch_pod_status(namespace, name, running_pod_status(pod, now)):
                log.info("pod running", node=self.node_name, pod=f"{namespace}/{name}")
                written += 1
        return written

    async def follow_pods(self, source: Source, stop: asyncio.Event) -> None:
        """Run the pods bound here as soon as the watch ``source`` (the node's
        pods) reports a change, until ``stop`` is set: a pod placed on this
        node looks running at once, not at the next status tick."""
        wake = asyncio.Event()

        async def feed() -> None:
            async for _key in source.keys():
                wake.set()

        async def relay_stop() -> None:
            await stop.wait()
            wake.set()

        helpers = [asyncio.create_task(feed(), name="racksmith-kubelet-pods"),
                   asyncio.create_task(relay_stop(), name="racksmith-kubelet-pods-stop")]
        try:
            while not stop.is_set():
                await wake.wait()
                wake.clear()
                if stop.is_set() or not self.is_configured():
                    continue
                try:
                    async with self._lock:
                        await self.run_pods(self.clock.wall())
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the next change or status tick retries
                    log.warning("kubelet pod sync failed", node=self.node_name,
                                error=str(exc))
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``kubelet_status`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API may be away; the next tick retries
                log.warning("kubelet sync failed", node=self.node_name, error=str(exc))
                self.failed_ticks += 1
                self.forget()
            await wait_event(self.clock, stop, self.timing.kubelet_status)

    def _node(self, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"unschedulable": True},
            "status": status,
        }

    def _status(self, context: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        addresses: list[dict[str, str]] = []
        netplan = self.host.read_file(NETPLAN_PATH)
        if netplan is not None:
            try:
                found = netplan_addresses(yaml.safe_load(netplan))
            except yaml.YAMLError:
                found = []
            cidrs = context.get("controlPlaneCIDRs") or []
            ip = internal_ip(found, cidrs if isinstance(cidrs, list) else [])
            if ip is not None:
                addresses.append({"type": "InternalIP", "address": ip})
        addresses.append({"type": "Hostname", "address": self.node_name})
        capacity = capacity_from_hardware(self._hardware())
        version = str(context.get("kubernetesVersion") or "")
        if version and not version.startswith("v"):
            version = f"v{version}"
        since = rfc3339(self._started or now)
        beat = rfc3339(now)
        conditions = [
            {"type": kind, "status": "False", "reason": reason, "message": message,
             "lastHeartbeatTime": beat, "lastTransitionTime": since}
            for kind, reason, message in _PRESSURES
        ]
        conditions.append({
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status (emulated)",
            "lastHeartbeatTime": beat, "lastTransitionTime": since,
        })
        return {
            "addresses": addresses,
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "Racksmith emulated OS",
                "kernelVersion": "emulated",
                "containerRuntimeVersion": "emulated://0",
                "kubeletVersion": version,
                "kubeProxyVersion": version,
                "machineID": self.node_name,
                "systemUUID": self.node_name,
                "bootID": self._boot_id or self.node_name,
            },
        }

    def _read_boot_id(self) -> str | None:
        raw = self.host.read_file(BOOT_ID_PATH)
        text = raw.decode(errors="replace").strip() if raw is not None else ""
        return text or None

    def _hardware(self) -> dict[str, Any]:
        raw = self.host.read_file(HARDWARE_PATH)
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
