"""The Machine and Cluster controllers against the real embedded API server.

The real BareMetalHost controller runs with the in-memory fixture
provisioner, so hosts really go available → provisioned → deprovisioning →
available. The parts written elsewhere are played by the test itself: it
renders the IpamHost (status OK with a netconfig), reports the LCMMachine
Ready as the host agent would, and registers the Node with a Ready
condition as a kubelet would. Every wait polls under a bound. The tests
share the module's API server, each in its own namespace; what a test made,
the agent Secret, releases and Nodes included, is deleted after it
(``tests.harness``).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.controllers.cluster import cluster_controller
from racksmith.controllers.machine import FINALIZER, MachineTimings, machine_controller
from racksmith.runtime import Controller
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.tokens import token_claims
from tests.harness import api
from tests.harness.api import optional
from tests.harness.baremetal import bmh_controller, fixture_provisioner
from tests.harness.controllers import ReconcileSpy, managed
from tests.harness.fixture_provisioner import FixtureProvisioner
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

METAL, CLUSTER, IPAM, LCM = ("metal3.io", "cluster.racksmith.io", "ipam.racksmith.io",
                             "lcm.racksmith.io")
V = "v1alpha1"
TOKEN = "agent-t0ken-d0-not-leak"
"""A shared agent token an older release left in the agent Secret: never used."""
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
IMAGE = {"url": "http://images.example/os.qcow2", "checksum": "abc", "checksumType": "sha256"}
TIMINGS = MachineTimings(retry_missing=0.2, retry_no_host=0.5, retry_drain=0.2,
                         retry_terminating=0.2, resync=1.0)
NETCONFIG = {"version": 2, "ethernets": {
    "eno1": {"match": {"macaddress": "52:54:00:00:00:01"}, "set-name": "eno1",
             "addresses": ["10.10.0.11/24"]},
    "eno2": {"match": {"macaddress": "52:54:00:00:00:02"}, "set-name": "eno2",
             "addresses": ["10.20.0.11/24"]}}}
ROLE = "node-role.kubernetes.io/"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


class World(api.World):
    """The test's view of the API, and the parts it plays (IPAM, agent, kubelet)."""

    async def machine(self, name: str, roles: list[str], rack: str) -> None:
        await self.create(CLUSTER, "machines", {
            "apiVersion": f"{CLUSTER}/{V}", "kind": "Machine", "metadata": {"name": name},
            "spec": {"clusterName": "demo", "roles": roles,
                     "hostSelector": {"matchLabels": {"rack": rack}}}})

    async def phase(self, name: str) -> str | None:
        obj = await self.get(CLUSTER, "machines", name)
        return ((obj or {}).get("status") or {}).get("phase")

    async def in_phase(self, name: str, *phases: str) -> None:
        async def check() -> bool:
            return await self.phase(name) in phases
        await eventually(check, f"machine {name} in phase {' or '.join(phases)}")

    async def condition(self, group: str, plural: str, name: str, kind: str
                        ) -> dict[str, Any] | None:
        obj = await self.get(group, plural, name)
        for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
            if cond["type"] == kind:
                return dict(cond)
        return None

    async def host_state(self, name: str) -> str | None:
        obj = await self.get(METAL, "baremetalhosts", name)
        return (((obj or {}).get("status") or {}).get("provisioning") or {}).get("state")

    async def host_in(self, name: str, state: str) -> None:
        async def check() -> bool:
            return await self.host_state(name) == state
        await eventually(check, f"host {name} {state}")

    # --- the parts played by the test -----------------------------------------

    async def render_network(self, machine: str) -> None:
        """The IpamHost controller's part: state OK with a netconfig."""
        await self.exists(f"IpamHost {machine}",
                          lambda: self.get(IPAM, "ipamhosts", machine))
        await self.put_status(IPAM, "ipamhosts", machine,
                              {"state": "OK", "netconfig": NETCONFIG})

    async def agent_ready(self, machine: str) -> None:
        """The agent's part: every item applied for the current generation."""
        lcm = await self.exists(f"LCMMachine {machine}",
                                lambda: self.get(LCM, "lcmmachines", machine))
        await self.put_status(LCM, "lcmmachines", machine, {
            "phase": "Ready", "observedGeneration": lcm["metadata"]["generation"],
            "release": lcm["spec"]["release"],
            "items": [{"name": i["name"], "state": "Applied"} for i in lcm["spec"]["stateItems"]]})

    async def kubelet(self, machine: str) -> None:
        """The kubelet's part: Node ``machine``, Ready, with labels of its own."""
        await self.core.create_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": machine, "labels": {"kubernetes.io/hostname": machine}},
            "spec": {"taints": [{"key": "example.com/dedicated", "value": "x",
                                 "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})

    async def pod(self, name: str) -> Any:
        return await optional(self.core.read_namespaced_pod(name, self.ns))


@contextlib.asynccontextmanager
async def running(client: ApiClient, backend: FixtureProvisioner | None = None
                  ) -> AsyncIterator[Controller]:
    """The BareMetalHost, Machine and Cluster controllers; yields the Machine one."""
    backend = backend if backend is not None else fixture_provisioner()
    machines = machine_controller(client, workers=2, timings=TIMINGS)
    controllers = [bmh_controller(client, backend), machines, cluster_controller(client)]
    async with managed(client, controllers, identity="machine-test"):
        yield machines


async def setup(world: World, hosts: dict[str, str]) -> None:
    """The agent Secret, a release, a cluster and available hosts (name → rack)."""
    with contextlib.suppress(ApiException):
        await world.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "racksmith-system"}})
    await world.core.create_namespaced_secret("racksmith-system", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "racksmith-agent"},
        "data": {"server": b64("https://127.0.0.1:6443"), "ca.crt": b64(CA_PEM),
                 "token": b64(TOKEN)}})
    await world.create(CLUSTER, "clusterreleases", {
        "apiVersion": f"{CLUSTER}/{V}", "kind": "ClusterRelease",
        "metadata": {"name": "rel-1"},
        "spec": {"version": "1.0.0", "kubernetesVersion": "1.30.0", "osImage": IMAGE,
                 "stateItems": [
                     {"name": "containerd", "phase": "configuration", "type": "package",
                      "params": {"name": "containerd", "version": "1.7"}},
                     {"name": "init", "phase": "join", "type": "kubeadm", "roles": ["master"],
                      "params": {"phase": "init"}}]}}, namespace=None)
    await world.create(CLUSTER, "clusters", {
        "apiVersion": f"{CLUSTER}/{V}", "kind": "Cluster", "metadata": {"name": "demo"},
        "spec": {"release": "rel-1", "networks": {"controlPlaneCIDRs": ["10.10.0.0/24"],
                                                  "workloadPlaneCIDRs": ["10.20.0.0/24"]}}})
    for name, rack in hosts.items():
        await world.core.create_namespaced_secret(world.ns, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-bmc"},
            "data": {"username": b64("admin"), "password": b64("pw")}})
        await world.create(METAL, "baremetalhosts", {
            "apiVersion": f"{METAL}/{V}", "kind": "BareMetalHost",
            "metadata": {"name": name, "labels": {"rack": rack}},
            "spec": {"bmc": {"address": f"redfish://bmc-{name}.example/redfish/v1/Systems/1",
                             "credentialsName": f"{name}-bmc"},
                     "bootMACAddress": "52:54:00:00:00:01"}})
    for name in hosts:
        await world.host_in(name, "available")


def no_token(*objects: Any) -> None:
    for obj in objects:
        assert TOKEN not in json.dumps(obj, default=str)
        assert "eyJ" not in json.dumps(obj, default=str)  # no JWT either


async def deploy(world: World, machine: str) -> None:
    """Play IPAM, agent and kubelet for ``machine`` until it is Ready."""
    await world.render_network(machine)
    await world.exists(f"LCMMachine {machine}", lambda: world.get(LCM, "lcmmachines", machine))
    await world.in_phase(machine, "Deploying")
    await world.agent_ready(machine)
    await world.kubelet(machine)
    await world.in_phase(machine, "Ready")


async def test_machines_become_nodes_and_go_away(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    async with running(client):
        await setup(world, {"h1": "a", "h2": "b"})
        await world.machine("master-1", ["master", "etcd"], "a")
        await world.machine("worker-1", ["node"], "b")

        # Claimed, with the network asked for.
        ipamhost = await world.exists("IpamHost master-1",
                                      lambda: world.get(IPAM, "ipamhosts", "master-1"))
        machine = await world.get(CLUSTER, "machines", "master-1")
        assert machine is not None and FINALIZER in machine["metadata"]["finalizers"]
        assert ipamhost["spec"]["machineRef"] == {"name": "master-1"}
        assert ipamhost["spec"]["nicMACmap"][0] == {
            "name": "eno1", "mac": "52:54:00:00:00:01", "primary": True}
        assert ipamhost["metadata"]["labels"] == {"cluster.racksmith.io/machine": "master-1",
                                                  "cluster.racksmith.io/cluster": "demo"}
        owner = ipamhost["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "Machine", machine["metadata"]["uid"], True)
        host = await world.get(METAL, "baremetalhosts", "h1")
        assert host is not None
        assert host["spec"]["consumerRef"] == {
            "apiVersion": f"{CLUSTER}/{V}", "kind": "Machine", "name": "master-1",
            "namespace": ns, "uid": machine["metadata"]["uid"]}

        # Provisioning: image, user data, power.
        await world.render_network("master-1")
        # Provisioning lasts a few fixture polls: Deploying may come first.
        await world.in_phase("master-1", "Provisioning", "Deploying")
        host = await world.get(METAL, "baremetalhosts", "h1")
        assert host is not None
        assert host["spec"]["image"] == IMAGE
        assert host["spec"]["userData"]["name"] == "master-1-user-data"
        assert host["spec"]["online"] is True
        secret = await world.core.read_namespaced_secret("master-1-user-data", ns)
        text = base64.b64decode(secret.data["userData"]).decode()
        assert text.startswith("#cloud-config\n")
        cloud = yaml.safe_load(text)
        config = yaml.safe_load(cloud["write_files"][0]["content"])
        # A control-plane machine gets the cluster's certificate authorities in
        # kubeadm's layout (0600), the very ones of the cluster's Secrets.
        pki = {f["path"]: f for f in cloud["write_files"][1:]}
        assert sorted(pki) == [f"/etc/kubernetes/pki/{p}" for p in (
            "ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt",
            "front-proxy-ca.key", "sa.key", "sa.pub")]
        assert all(f["permissions"] == "0600" and f["encoding"] == "b64" for f in pki.values())
        cluster_ca = await world.core.read_namespaced_secret("demo-ca", ns)
        assert pki["/etc/kubernetes/pki/ca.key"]["content"] == cluster_ca.data["tls.key"]
        host_token = config.pop("token")
        assert config == {"server": "https://127.0.0.1:6443",
                          "certificateAuthorityData": b64(CA_PEM),
                          "namespace": ns, "lcmMachine": "master-1", "nodeName": "master-1"}
        # the host's own token: its own ServiceAccount, bound to the very
        # Secret that carries it (deleting the Secret revokes the token)
        lcm = await world.get(LCM, "lcmmachines", "master-1")
        assert lcm is not None
        claims = token_claims(host_token)
        assert claims is not None
        assert (claims.namespace, claims.service_account, claims.bound_kind,
                claims.bound_name, claims.bound_uid) == (
            ns, "racksmith-host-master-1", "secret", "master-1-user-data",
            secret.metadata.uid)
        assert claims.seconds == TIMINGS.agent_token_seconds
        # ... with a Role of its own: its LCMMachine by name, its status, its tokens
        role = await world.rbac.read_namespaced_role("racksmith-host-master-1", ns)
        assert {(tuple(r.resources), tuple(r.resource_names or ())) for r in role.rules} == {
            (("lcmmachines",), ("master-1",)), (("lcmmachines/status",), ("master-1",)),
            (("serviceaccounts/token",), ("racksmith-host-master-1",))}
        binding = await world.rbac.read_namespaced_role_binding("racksmith-host-master-1", ns)
        assert [(s.kind, s.name) for s in binding.subjects] == [
            ("ServiceAccount", "racksmith-host-master-1")]
        assert [o.kind for o in role.metadata.owner_references] == ["Machine"]
        assert cloud["runcmd"] == [["racksmith", "agent", "--config",
                                    "/etc/racksmith/agent.yaml"]]
        assert [i["name"] for i in lcm["spec"]["stateItems"]] == [
            "racksmith-netplan", "containerd", "init"]
        assert (lcm["spec"]["release"], lcm["spec"]["clusterName"]) == ("rel-1", "demo")

        # The host provisions, the agent deploys, the node registers: Ready.
        await world.host_in("h1", "provisioned")
        await deploy(world, "master-1")
        await deploy(world, "worker-1")
        worker = await world.core.read_namespaced_secret("worker-1-user-data", ns)
        assert len(yaml.safe_load(base64.b64decode(worker.data["userData"]))[
            "write_files"]) == 1  # a worker gets no certificate authority
        machine = await world.get(CLUSTER, "machines", "master-1")
        assert machine is not None
        status = machine["status"]
        assert status["nodeRef"]["name"] == "master-1"
        assert status["hostRef"]["name"] == "h1"
        assert status["release"] == "rel-1"
        assert status["observedGeneration"] == machine["metadata"]["generation"]
        assert status["addresses"] == [
            {"type": "InternalIP", "address": "10.10.0.11"},
            {"type": "WorkloadIP", "address": "10.20.0.11"},
            {"type": "Hostname", "address": "master-1"}]
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

        async def roles_on(node: str, labels: dict[str, str], taints: list[Any]) -> bool:
            got = await world.node(node)
            if got is None:
                return False
            return (got["metadata"]["labels"] == labels
                    and (got["spec"].get("taints") or []) == taints)
        own_taint = {"key": "example.com/dedicated", "value": "x", "effect": "NoSchedule"}
        master_labels = {"kubernetes.io/hostname": "master-1", f"{ROLE}master": "",
                         f"{ROLE}etcd": ""}
        master_taints = [own_taint, {"key": f"{ROLE}master", "effect": "NoSchedule"},
                         {"key": f"{ROLE}etcd", "effect": "NoSchedule"}]
        await eventually(lambda: roles_on("master-1", master_labels, master_taints),
                         "master roles on its node")
        await eventually(lambda: roles_on(
            "worker-1", {"kubernetes.io/hostname": "worker-1", f"{ROLE}node": ""}, [own_taint]),
            "worker roles on its node")

        async def counts(total: int, ready: int, release: str | None) -> bool:
            obj = await world.get(CLUSTER, "clusters", "demo")
            st = (obj or {}).get("status") or {}
            return (st.get("machinesTotal"), st.get("machinesReady"), st.get("release")) == (
                total, ready, release)
        await eventually(lambda: counts(2, 2, "rel-1"), "cluster 2/2 on rel-1")
        ready = await world.condition(CLUSTER, "clusters", "demo", "Ready")
        assert ready is not None and ready["status"] == "True"
        await world.has_event("demo", "ClusterReady", type="Normal")

        # Deleting the worker: cordon, drain (a PDB refuses first), release.
        await world.core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"nodeName": "worker-1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready",
                                                           "status": "True"}]}})
        await world.core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "agent-x", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                "uid": "ds-uid"}]},
            "spec": {"nodeName": "worker-1", "containers": [{"name": "c", "image": "a"}]}})
        await world.policy.create_namespaced_pod_disruption_budget(ns, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        await world.delete(CLUSTER, "machines", "worker-1")
        await world.in_phase("worker-1", "Deleting")

        async def refused() -> bool:
            cond = await world.condition(CLUSTER, "machines", "worker-1", "Drained")
            return cond is not None and cond["reason"] == "EvictionRefused"
        await eventually(refused, "the PDB refuses the eviction")
        cond = await world.condition(CLUSTER, "machines", "worker-1", "Drained")
        assert cond is not None and cond["status"] == "False"
        assert "disruption budget" in cond["message"]
        node = await world.node("worker-1")
        assert node is not None and node["spec"]["unschedulable"] is True
        assert await world.pod("web") is not None
        await world.has_event("worker-1", "EvictionRefused")

        # The budget goes; the next attempt evicts (nudged instead of waiting 10 s).
        await world.policy.delete_namespaced_pod_disruption_budget("web", ns)
        await world.custom.patch_namespaced_custom_object(
            CLUSTER, V, ns, "machines", "worker-1",
            {"metadata": {"annotations": {"test/nudge": "1"}}},
            _content_type="application/merge-patch+json")
        await world.gone("pod web", lambda: world.pod("web"))
        await world.gone("Node worker-1", lambda: world.node("worker-1"))
        await world.gone("LCMMachine worker-1", lambda: world.get(LCM, "lcmmachines",
                                                                   "worker-1"))
        await world.gone("Machine worker-1", lambda: world.get(CLUSTER, "machines", "worker-1"))
        assert await world.pod("agent-x") is not None  # DaemonSet pods stay
        host = await world.get(METAL, "baremetalhosts", "h2")
        assert host is not None
        assert await world.host_state("h2") == "available"
        for key in ("consumerRef", "image", "userData"):
            assert key not in host["spec"]
        assert host["spec"]["online"] is False
        assert await world.get(IPAM, "ipamhosts", "worker-1") is None
        with pytest.raises(ApiException) as err:
            await world.core.read_namespaced_secret("worker-1-user-data", ns)
        assert err.value.status == 404
        await eventually(lambda: counts(1, 1, "rel-1"), "cluster 1/1")
        # The Cluster's Ready transitions, each told once (about the Cluster).
        await world.has_events("demo", "ClusterReady", "ClusterNotReady")

        async def ready_again() -> bool:
            told = {e.message for e in await world.events("demo") if e.reason == "ClusterReady"}
            return "1/1 machines Ready" in told
        await eventually(ready_again, "the Cluster told Ready again")
        cluster_events = await world.events("demo")
        assert {e.involved_object.kind for e in cluster_events} == {"Cluster"}
        assert sorted((e.reason, e.message, e.count) for e in cluster_events
                      if e.reason == "ClusterReady") == [
            ("ClusterReady", "1/1 machines Ready", 1), ("ClusterReady", "2/2 machines Ready", 1)]
        [not_ready] = [e for e in cluster_events if e.reason == "ClusterNotReady"]
        assert not_ready.type == "Warning" and "waiting for worker-1" in not_ready.message

        # The token is in the user data Secret only.
        no_token(await world.get(CLUSTER, "machines", "master-1"),
                 [e.to_dict() for e in await world.events("master-1")],
                 [e.to_dict() for e in await world.events("worker-1")])
        assert host_token not in json.dumps([
            await world.get(CLUSTER, "machines", "master-1"),
            [e.to_dict() for e in await world.events("master-1")]], default=str)


async def test_two_machines_one_host_and_no_match(client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    async with running(client):
        await setup(world, {"h1": "a"})
        await world.machine("m-a", ["node"], "a")
        await world.machine("m-b", ["node"], "a")
        await world.machine("m-z", ["node"], "z")

        async def claimed() -> list[str]:
            out = []
            for name in ("m-a", "m-b"):
                cond = await world.condition(CLUSTER, "machines", name, "HostClaimed")
                if cond is not None and cond["status"] == "True":
                    out.append(name)
            return out

        async def settled() -> bool:
            if len(await claimed()) != 1:
                return False
            loser = "m-b" if (await claimed()) == ["m-a"] else "m-a"
            cond = await world.condition(CLUSTER, "machines", loser, "HostClaimed")
            return cond is not None and cond["reason"] == "NoMatchingHost"
        await eventually(settled, "exactly one machine claims h1")
        (winner,) = await claimed()
        loser = "m-b" if winner == "m-a" else "m-a"
        host = await world.get(METAL, "baremetalhosts", "h1")
        assert host is not None and host["spec"]["consumerRef"]["name"] == winner
        machine = await world.get(CLUSTER, "machines", loser)
        assert machine is not None and machine["status"]["phase"] == "Pending"
        assert machine["status"].get("hostRef") is None
        await world.has_event(loser, "NoMatchingHost")

        async def no_match() -> bool:
            cond = await world.condition(CLUSTER, "machines", "m-z", "HostClaimed")
            return cond is not None and cond["reason"] == "NoMatchingHost"
        await eventually(no_match, "m-z finds no host")
        cond = await world.condition(CLUSTER, "machines", "m-z", "HostClaimed")
        assert cond is not None and cond["status"] == "False" and "rack=z" in cond["message"]
        await world.has_event("m-z", "NoMatchingHost")
        assert await world.get(IPAM, "ipamhosts", "m-z") is None

        # The cluster counts them all, none Ready.
        async def counted() -> bool:
            obj = await world.get(CLUSTER, "clusters", "demo")
            st = (obj or {}).get("status") or {}
            return (st.get("machinesTotal"), st.get("machinesReady")) == (3, 0)
        await eventually(counted, "cluster counts 3 machines")
        found = await world.condition(CLUSTER, "clusters", "demo", "ReleaseFound")
        assert found is not None and found["status"] == "True"


async def test_a_restart_repeats_nothing(client: ApiClient, ns: str) -> None:
    """Controllers stopped while the host provisions and started again (new
    processes would start from the same API state): still one host, one deploy."""
    world = World(client, ns)
    backend = fixture_provisioner(steps={"provision": 30})
    async with running(client, backend):
        await setup(world, {"h1": "a", "h2": "a"})
        await world.machine("m", ["node"], "a")
        await world.render_network("m")
        await world.in_phase("m", "Provisioning")
    async with running(client, backend):
        await world.host_in("h1", "provisioned")
        await deploy(world, "m")
    assert sum(backend.deploys.values()) == 1
    h2 = await world.get(METAL, "baremetalhosts", "h2")
    assert h2 is not None and "consumerRef" not in h2["spec"]
    assert await world.host_state("h2") == "available"
    claims = [e for e in await world.events("m") if e.reason == "HostClaimed"]
    assert len(claims) == 1
    assert claims[0].count == 1  # a second claim would only have bumped the count


async def test_deployed_machines_stay_on_their_release_until_pinned(client: ApiClient,
                                                                    ns: str) -> None:
    """The release pin: a Cluster release change moves no deployed machine;
    the Machine annotation ``lcm.racksmith.io/release`` does; a new machine
    joins at the cluster's release."""
    world = World(client, ns)
    async with running(client) as machines:
        spy = ReconcileSpy(machines)
        await setup(world, {"h1": "a", "h2": "a"})
        rel1 = await world.get(CLUSTER, "clusterreleases", "rel-1", namespace=None)
        assert rel1 is not None
        rel2_items = [*rel1["spec"]["stateItems"], {
            "name": "linux-image", "phase": "configuration", "type": "package",
            "requiresReboot": True, "params": {"name": "linux-image", "version": "6.8"}}]
        await world.create(CLUSTER, "clusterreleases", {
            "apiVersion": f"{CLUSTER}/{V}", "kind": "ClusterRelease",
            "metadata": {"name": "rel-2"},
            "spec": {**rel1["spec"], "version": "1.1.0", "stateItems": rel2_items}},
            namespace=None)
        await world.machine("old", ["node"], "a")
        await world.render_network("old")
        await world.host_in("h1", "provisioned")
        await deploy(world, "old")
        lcm = await world.get(LCM, "lcmmachines", "old")
        assert lcm is not None and lcm["spec"]["release"] == "rel-1"
        generation = lcm["metadata"]["generation"]

        patch: Any = world.custom.patch_namespaced_custom_object  # _content_type is untyped
        await patch(CLUSTER, V, ns, "clusters", "demo", {"spec": {"release": "rel-2"}},
                    _content_type="application/merge-patch+json")
        looked = spy.finished[ObjectKey(ns, "old")]
        # A new machine joins at the cluster's (new) release ...
        await world.machine("new", ["node"], "a")
        await world.render_network("new")
        new_lcm = await world.exists("LCMMachine new",
                                     lambda: world.get(LCM, "lcmmachines", "new"))
        assert new_lcm["spec"]["release"] == "rel-2"
        assert "linux-image" in [i["name"] for i in new_lcm["spec"]["stateItems"]]
        # ... and the deployed one, looked at again since the change (it is
        # re-checked every second at rest), stays.
        await spy.reconciled(ObjectKey(ns, "old"), looked + 2, "the cluster's new release")
        lcm = await world.get(LCM, "lcmmachines", "old")
        assert lcm is not None
        assert (lcm["spec"]["release"], lcm["metadata"]["generation"]) == ("rel-1", generation)
        assert await world.phase("old") == "Ready"

        # A pin to a release that does not exist: ReleaseFound False naming it.
        await patch(CLUSTER, V, ns, "machines", "old",
                    {"metadata": {"annotations": {"lcm.racksmith.io/release": "rel-9"}}},
                    _content_type="application/merge-patch+json")

        async def missing() -> bool:
            found = await world.condition(CLUSTER, "machines", "old", "ReleaseFound")
            return found is not None and found["status"] == "False" \
                and "rel-9" in found["message"]
        await eventually(missing, "ReleaseFound False naming rel-9")

        # The pin to rel-2: the LCMMachine re-renders; the agent deploys it.
        await patch(CLUSTER, V, ns, "machines", "old",
                    {"metadata": {"annotations": {"lcm.racksmith.io/release": "rel-2"}}},
                    _content_type="application/merge-patch+json")

        async def rerendered() -> bool:
            got = await world.get(LCM, "lcmmachines", "old")
            return got is not None and got["spec"]["release"] == "rel-2"
        await eventually(rerendered, "LCMMachine old rendered from rel-2")
        await world.in_phase("old", "Deploying")
        await world.agent_ready("old")
        await world.in_phase("old", "Ready")

        async def moved() -> bool:
            got = await world.get(CLUSTER, "machines", "old")
            return ((got or {}).get("status") or {}).get("release") == "rel-2"
        await eventually(moved, "machine old runs rel-2")
