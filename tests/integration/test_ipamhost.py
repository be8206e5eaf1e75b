"""The IpamHost and L2Template controllers against the real embedded API
server: rendering with claimed addresses, idempotent re-reconciles, racing
hosts, every error state, release on deletion and the template-change
confirmation.

The controllers (with the Subnet controller, which validates the pools the
claims need) run on the runtime over a kubernetes_asyncio client made from
the server's kubeconfig. Every wait polls under a bound; nothing asserts on
time. The tests share the module's API server, each in its own namespace
(``tests.harness``).
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from racksmith.apiserver.server import ApiServer
from racksmith.controllers.ipam import subnet_controller
from racksmith.controllers.ipamhost import (
    CONFIRM_GENERATION,
    FINALIZER,
    INTERFACE_LABEL,
    IPAMHOST_LABEL,
    RENDERED_GENERATION,
    IpamHostReconciler,
    IpamHostTimings,
    ipamhost_controller,
    l2template_controller,
)
from racksmith.controllers.ipamhost.host import CONTROLLER_NAME as IPAMHOST
from racksmith.runtime import Manager, ObjectKey
from racksmith.runtime.errors import Conflict
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from tests.harness import api
from tests.harness.api import MERGE as MERGE_PATCH
from tests.harness.controllers import finished_reconciles, managed, reconciled_again
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, VERSION = "ipam.racksmith.io", "v1alpha1"
TIMINGS = IpamHostTimings(pending_retry=0.3)

TWO_NICS = textwrap.dedent("""\
    version: 2
    ethernets:
      {{ nic(0) }}:
        match:
          macaddress: "{{ mac(0) }}"
        set-name: {{ nic(0) }}
        addresses: [{{ ip("0:mgmt") }}]
        gateway4: {{ gateway_from_subnet("mgmt") }}
      {{ nic(1) }}:
        match:
          macaddress: "{{ mac(1) }}"
        set-name: {{ nic(1) }}
        addresses: [{{ ip("1:storage") }}]
    """)
LAYOUT = [{"subnetName": "mgmt"}, {"subnetName": "storage"}]


@contextlib.asynccontextmanager
async def running(client: ApiClient, *, hosts: bool = True) -> AsyncIterator[Manager]:
    controllers = [subnet_controller(client, workers=2)]
    if hosts:
        controllers += [ipamhost_controller(client, workers=2, timings=TIMINGS),
                        l2template_controller(client, workers=1)]
    async with managed(client, controllers, identity="ipamhost-test") as manager:
        yield manager


@pytest_asyncio.fixture(loop_scope="module")
async def controllers(client: ApiClient) -> AsyncIterator[Manager]:
    async with running(client) as manager:
        yield manager


class World(api.World):
    """Creates and reads the objects of one test."""

    async def make(self, plural: str, name: str, spec: dict[str, Any], *,
                   group: str = GROUP, kind: str = "", **meta: Any) -> dict[str, Any]:
        body = {"apiVersion": f"{group}/{VERSION}", "kind": kind,
                "metadata": {"name": name, **meta}, "spec": spec}
        return await self.create(group, plural, body)

    async def read(self, plural: str, name: str) -> dict[str, Any] | None:
        return await self.get(GROUP, plural, name)

    async def subnet(self, name: str, cidr: str, gateway: str | None = None,
                     **spec: Any) -> None:
        await self.make("subnets", name, {"cidr": cidr, **spec,
                                            **({"gateway": gateway} if gateway else {})},
                          kind="Subnet")

        async def judged() -> bool:
            obj = await self.read("subnets", name)
            conds = ((obj or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c.get("observedGeneration") ==
                       obj["metadata"]["generation"] for c in conds)  # type: ignore[index]
        await eventually(judged, f"subnet {name} judged")

    async def template(self, name: str, np: str = TWO_NICS, *,
                       labels: dict[str, str] | None = None, **spec: Any) -> None:
        await self.make("l2templates", name, {
            "npTemplate": np, "l3Layout": LAYOUT, "autoIfMappingPrio": ["eno"], **spec},
            kind="L2Template", labels=labels or {})

    async def host(self, name: str, template: str | None = "tpl", nics: int = 2,
                   **spec: Any) -> None:
        nic_map = [{"name": f"eno{i + 1}", "mac": f"0c:c4:7a:{name[-1:].encode().hex()}:00:"
                    f"{i + 1:02x}"} for i in range(nics)]
        body: dict[str, Any] = {"nicMACmap": nic_map, "machineRef": {"name": name}, **spec}
        if template:
            body["l2TemplateRef"] = template
        await self.make("ipamhosts", name, body, kind="IpamHost")

    async def host_in(self, name: str, state: str) -> dict[str, Any]:
        found: dict[str, Any] = {}

        async def check() -> bool:
            obj = await self.read("ipamhosts", name)
            if obj and (obj.get("status") or {}).get("state") == state:
                found.update(obj)
                return True
            return False
        await eventually(check, f"ipamhost {name} in state {state}")
        return found

    async def ipaddrs(self, host: str | None = None) -> list[dict[str, Any]]:
        sel = f"{IPAMHOST_LABEL}={host}" if host else ""
        return await self.items(GROUP, "ipaddrs", label_selector=sel)

    async def allocatable(self, subnet: str) -> int | None:
        obj = await self.read("subnets", subnet)
        return ((obj or {}).get("status") or {}).get("allocatable")


@pytest.fixture
def world(client: ApiClient, ns: str) -> World:
    return World(client, ns)


def cond(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


async def two_subnets(world: World) -> None:
    await world.subnet("mgmt", "10.10.0.0/24", "10.10.0.1")
    await world.subnet("storage", "10.20.0.0/24")


async def test_renders_netplan_with_own_macs_and_addresses(
    client: ApiClient, world: World, controllers: Manager
) -> None:
    await two_subnets(world)
    await world.template("tpl")
    await world.host("host-a")
    obj = await world.host_in("host-a", "OK")
    eth = obj["status"]["netconfig"]["ethernets"]
    assert eth == {
        "eno1": {"match": {"macaddress": "0c:c4:7a:61:00:01"}, "set-name": "eno1",
                 "addresses": ["10.10.0.2/24"], "gateway4": "10.10.0.1"},
        "eno2": {"match": {"macaddress": "0c:c4:7a:61:00:02"}, "set-name": "eno2",
                 "addresses": ["10.20.0.1/24"]},
    }
    assert obj["status"]["l2TemplateRef"] == "tpl"
    assert obj["metadata"]["annotations"][RENDERED_GENERATION] == "1"
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert cond(obj, "Ready")["status"] == "True"
    ips = await world.ipaddrs("host-a")
    assert sorted(obj["status"]["ipAddresses"]) == sorted(i["metadata"]["name"] for i in ips)
    by_iface = {i["metadata"]["labels"][INTERFACE_LABEL]: i for i in ips}
    assert by_iface["0"]["spec"]["address"] == "10.10.0.2"
    assert by_iface["0"]["spec"]["mac"] == "0c:c4:7a:61:00:01"
    assert by_iface["1"]["spec"]["address"] == "10.20.0.1"
    assert all(i["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
               for i in ips)

    # Re-reconciling, from this or a fresh replica, allocates nothing new.
    before = sorted((i["metadata"]["name"], i["metadata"]["uid"]) for i in ips)
    replica = IpamHostReconciler(client)
    for _ in range(3):
        await replica.reconcile(ObjectKey(world.ns, "host-a"))
    assert sorted((i["metadata"]["name"], i["metadata"]["uid"])
                  for i in await world.ipaddrs()) == before
    again = await world.read("ipamhosts", "host-a")
    assert again is not None and again["status"] == obj["status"]

    async def template_valid() -> bool:
        tpl = await world.read("l2templates", "tpl")
        conds = {c["type"]: c for c in ((tpl or {}).get("status") or {}).get("conditions", [])}
        return conds.get("Valid", {}).get("status") == "True" and \
            conds.get("ChangeConfirmed", {}).get("status") == "True"
    await eventually(template_valid, "template Valid and ChangeConfirmed")


async def test_racing_hosts_never_share_an_address(client: ApiClient, world: World,
                                                   api_server: ApiServer) -> None:
    names = [f"race-{i}" for i in range(6)]
    async with running(client, hosts=False):
        await two_subnets(world)
        await world.template("tpl")
        for name in names:
            await world.host(name)
        # Two replicas (own clients) reconcile every host at once, each host
        # on both: different hosts race for the same lowest addresses.
        clients = [await api_client_from_kubeconfig(api_server.kubeconfig_path)
                   for _ in range(2)]
        try:
            replicas = [IpamHostReconciler(c) for c in clients]
            raced = await asyncio.gather(*(r.reconcile(ObjectKey(world.ns, n))
                                           for n in names for r in replicas),
                                         return_exceptions=True)
            # A replica that lost the race on the same host gets a Conflict
            # (the runtime requeues it); nothing else may fail.
            assert all(not isinstance(r, BaseException) or isinstance(r, Conflict)
                       for r in raced), raced
            # Whatever a same-host race left behind converges on a re-reconcile.
            await asyncio.gather(*(replicas[0].reconcile(ObjectKey(world.ns, n)) for n in names))
        finally:
            for c in clients:
                await c.close()
    ips = await world.ipaddrs()
    addresses = [i["spec"]["address"] for i in ips]
    assert len(addresses) == len(set(addresses)) == 2 * len(names)
    for name in names:
        obj = await world.read("ipamhosts", name)
        assert obj is not None and obj["status"]["state"] == "OK"
        held = {i["metadata"]["name"] for i in ips
                if i["metadata"]["labels"][IPAMHOST_LABEL] == name}
        assert set(obj["status"]["ipAddresses"]) == held and len(held) == 2
        rendered = [a for e in obj["status"]["netconfig"]["ethernets"].values()
                    for a in e["addresses"]]
        assert sorted(a.split("/")[0] for a in rendered) == sorted(
            i["spec"]["address"] for i in ips if i["metadata"]["name"] in held)


async def test_unknown_subnet_is_an_error(world: World, controllers: Manager) -> None:
    await world.subnet("mgmt", "10.10.0.0/24", "10.10.0.1")
    await world.template("tpl")  # its layout names "storage", which does not exist
    await world.host("host-b")
    obj = await world.host_in("host-b", "Error")
    assert any("'storage'" in m and "not found" in m for m in obj["status"]["messages"])
    ready = cond(obj, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "SubnetNotFound"
    assert "storage" in ready["message"]

    async def warned() -> bool:
        return any(e.reason == "SubnetNotFound" and e.type == "Warning"
                   for e in await world.events("host-b"))
    await eventually(warned, "a Warning event about the subnet")
    assert await world.ipaddrs("host-b") == []
    # Creating the subnet fixes it (the host waits on it).
    await world.subnet("storage", "10.20.0.0/24")
    await world.host_in("host-b", "OK")


async def test_nic_index_beyond_the_hosts_nics(world: World, controllers: Manager) -> None:
    await two_subnets(world)
    np = TWO_NICS + "  {{ nic(2) }}:\n    dhcp4: true\n"
    await world.template("tpl", np)
    await world.host("host-c")
    obj = await world.host_in("host-c", "Error")
    assert any("NIC index 2 is out of range" in m for m in obj["status"]["messages"]), obj
    assert cond(obj, "Ready")["reason"] == "RenderFailed"
    assert await world.ipaddrs("host-c") == []


async def test_exhausted_subnet_is_pending_until_an_address_comes_back(
    world: World, controllers: Manager
) -> None:
    # One free address in mgmt: the first host gets it, the second waits.
    await world.subnet("mgmt", "10.10.0.0/29", "10.10.0.1",
                       excludeRanges=["10.10.0.3-10.10.0.6"])
    await world.subnet("storage", "10.20.0.0/24")
    await world.template("tpl")
    await world.host("host-1")
    await world.host_in("host-1", "OK")
    await world.host("host-2")
    obj = await world.host_in("host-2", "Pending")
    assert any("subnet mgmt is exhausted" in m for m in obj["status"]["messages"]), obj
    assert cond(obj, "Ready")["reason"] == "AddressesPending"
    # The storage address it could claim stays held (and is listed), not leaked.
    held = await world.ipaddrs("host-2")
    assert [i["spec"]["subnetRef"]["name"] for i in held] == ["storage"]
    assert obj["status"]["ipAddresses"] == [held[0]["metadata"]["name"]]

    await world.delete(GROUP, "ipamhosts", "host-1")
    obj = await world.host_in("host-2", "OK")
    assert obj["status"]["netconfig"]["ethernets"]["eno1"]["addresses"] == ["10.10.0.2/29"]
    assert len(await world.ipaddrs("host-2")) == 2


async def test_deleting_the_ipamhost_releases_its_addresses(
    world: World, controllers: Manager
) -> None:
    await two_subnets(world)
    await world.template("tpl")
    await world.host("host-d")
    await world.host_in("host-d", "OK")

    async def used() -> bool:
        return await world.allocatable("mgmt") == 252
    await eventually(used, "mgmt shows one address allocated")
    # A second finalizer keeps the host around, so the garbage collector
    # (which follows the IPaddrs' owner references) cannot be what frees them.
    obj = await world.read("ipamhosts", "host-d")
    assert obj is not None
    obj["metadata"]["finalizers"] = [*obj["metadata"]["finalizers"], "test/hold"]
    await world.custom.replace_namespaced_custom_object(GROUP, VERSION, world.ns, "ipamhosts",
                                                        "host-d", obj)
    await world.delete(GROUP, "ipamhosts", "host-d")

    async def finalized() -> bool:
        o = await world.read("ipamhosts", "host-d")
        return o is not None and o["metadata"].get("finalizers") == ["test/hold"]
    await eventually(finalized, "the controller removes its finalizer")
    assert await world.ipaddrs() == []
    await world.custom.patch_namespaced_custom_object(
        GROUP, VERSION, world.ns, "ipamhosts", "host-d", {"metadata": {"finalizers": None}},
        **MERGE_PATCH)

    async def gone() -> bool:
        return await world.read("ipamhosts", "host-d") is None
    await eventually(gone, "the IpamHost is gone (finalizer removed)")
    assert await world.ipaddrs() == []

    async def back() -> bool:
        return await world.allocatable("mgmt") == 253 and \
            await world.allocatable("storage") == 254
    await eventually(back, "subnets' allocatable back to full")


async def test_template_change_waits_for_confirmation(
    world: World, controllers: Manager
) -> None:
    await two_subnets(world)
    await world.template("tpl")
    await world.host("host-e")
    old = await world.host_in("host-e", "OK")
    addresses = sorted(i["spec"]["address"] for i in await world.ipaddrs("host-e"))

    tpl = await world.read("l2templates", "tpl")
    assert tpl is not None
    tpl["spec"]["npTemplate"] = TWO_NICS.replace("    set-name: {{ nic(1) }}\n",
                                                 "    set-name: {{ nic(1) }}\n"
                                                 "    mtu: 9000\n")
    tpl = await world.custom.replace_namespaced_custom_object(
        GROUP, VERSION, world.ns, "l2templates", "tpl", tpl)
    assert tpl["metadata"]["generation"] == 2

    async def held() -> bool:
        obj = await world.read("ipamhosts", "host-e")
        conds = {c["type"]: c for c in (obj or {}).get("status", {}).get("conditions", [])}
        return conds.get("TemplateChangePending", {}).get("status") == "True"
    await eventually(held, "host condition TemplateChangePending True")
    obj = await world.read("ipamhosts", "host-e")
    assert obj is not None
    assert obj["status"]["netconfig"] == old["status"]["netconfig"]
    assert obj["metadata"]["annotations"][RENDERED_GENERATION] == "1"
    assert 'confirm-generation: "2"' in cond(obj, "TemplateChangePending")["message"]

    async def unconfirmed() -> bool:
        t = await world.read("l2templates", "tpl")
        conds = {c["type"]: c for c in (t or {}).get("status", {}).get("conditions", [])}
        c = conds.get("ChangeConfirmed", {})
        return c.get("status") == "False" and c.get("reason") == "ConfirmationRequired"
    await eventually(unconfirmed, "template ChangeConfirmed False")
    t = await world.read("l2templates", "tpl")
    assert t is not None
    assert f'{CONFIRM_GENERATION}: "2"' in cond(t, "ChangeConfirmed")["message"]
    assert "host-e" in cond(t, "ChangeConfirmed")["message"]

    # A wrong confirmation (an old generation) changes nothing.
    idle = finished_reconciles(controllers.metrics, IPAMHOST)
    await world.custom.patch_namespaced_custom_object(
        GROUP, VERSION, world.ns, "l2templates", "tpl",
        {"metadata": {"annotations": {CONFIRM_GENERATION: "1"}}}, **MERGE_PATCH)
    await reconciled_again(controllers.metrics, IPAMHOST, "the wrong confirmation",
                           since=idle, more=1)
    obj = await world.read("ipamhosts", "host-e")
    assert obj is not None and obj["metadata"]["annotations"][RENDERED_GENERATION] == "1"

    await world.custom.patch_namespaced_custom_object(
        GROUP, VERSION, world.ns, "l2templates", "tpl",
        {"metadata": {"annotations": {CONFIRM_GENERATION: "2"}}}, **MERGE_PATCH)

    async def rerendered() -> bool:
        o = await world.read("ipamhosts", "host-e") or {}
        eno2 = ((o.get("status") or {}).get("netconfig") or {}).get("ethernets", {}).get("eno2")
        return (eno2 or {}).get("mtu") == 9000
    await eventually(rerendered, "host re-rendered from generation 2")
    obj = await world.host_in("host-e", "OK")
    assert obj["metadata"]["annotations"][RENDERED_GENERATION] == "2"
    assert cond(obj, "TemplateChangePending")["status"] == "False"
    assert sorted(i["spec"]["address"] for i in await world.ipaddrs("host-e")) == addresses

    async def confirmed() -> bool:
        t = await world.read("l2templates", "tpl")
        conds = {c["type"]: c for c in (t or {}).get("status", {}).get("conditions", [])}
        return conds.get("ChangeConfirmed", {}).get("status") == "True"
    await eventually(confirmed, "template ChangeConfirmed True")


async def test_machine_selector_and_cluster_vip(world: World, controllers: Manager) -> None:
    await two_subnets(world)
    np = TWO_NICS + "    routes: [{to: '{{ cluster_api_lb_ip() }}/32', via: 10.20.0.254}]\n"
    await world.template("picked", np, labels={"rack": "r1"})
    await world.template("fallback", default=True)
    await world.make("clusters", "c1", {"release": "r", "apiServer": {"vip": "10.10.0.100"}},
                       group="cluster.racksmith.io", kind="Cluster")
    await world.make("machines", "m-1", {"clusterName": "c1",
                                           "l2TemplateSelector": {"matchLabels": {"rack": "r1"}}},
                       group="cluster.racksmith.io", kind="Machine")
    await world.host("m-1", template=None)
    obj = await world.host_in("m-1", "OK")
    assert obj["status"]["l2TemplateRef"] == "picked"
    assert obj["status"]["netconfig"]["ethernets"]["eno2"]["routes"] == [
        {"to": "10.10.0.100/32", "via": "10.20.0.254"}]
    # No selector: the default template.
    await world.make("machines", "m-2", {"clusterName": "c1"},
                       group="cluster.racksmith.io", kind="Machine")
    await world.host("m-2", template=None)
    obj = await world.host_in("m-2", "OK")
    assert obj["status"]["l2TemplateRef"] == "fallback"


class _KilledAfterClaims(IpamHostReconciler):
    """A replica that dies after claiming, before writing anything else."""

    async def _commit(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("killed")


async def test_killed_after_claiming_converges_without_double_allocation(
    client: ApiClient, world: World
) -> None:
    async with running(client, hosts=False):
        await two_subnets(world)
        await world.template("tpl")
        await world.host("host-k")
        with pytest.raises(RuntimeError, match="killed"):
            await _KilledAfterClaims(client).reconcile(ObjectKey(world.ns, "host-k"))
        claimed = sorted(i["metadata"]["name"] for i in await world.ipaddrs("host-k"))
        assert len(claimed) == 2
        obj = await world.read("ipamhosts", "host-k")
        assert obj is not None and "status" not in obj
        await IpamHostReconciler(client).reconcile(ObjectKey(world.ns, "host-k"))
    obj = await world.read("ipamhosts", "host-k")
    assert obj is not None and obj["status"]["state"] == "OK"
    assert sorted(obj["status"]["ipAddresses"]) == claimed
    assert sorted(i["metadata"]["name"] for i in await world.ipaddrs()) == claimed
