"""The host agent against the real in-process API server: an emulated host
(a tmp root) applies the LCMMachine the release planner renders, registers
its Node through the emulated kubelet (addresses, capacity, Ready, Lease),
uncordons it, then re-applies with changed=false everywhere; a dry run
changes nothing; a failing real command stops the pass with phase Failed.

The tests share the module's API server, each in its own namespace; the
Node, its Lease and everything else a test made are deleted after it
(``tests.harness``)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api, CustomObjectsApi

from racksmith.agent import run_agent
from racksmith.agent.config import AgentTiming
from racksmith.agent.kube import api_client
from racksmith.agent.token import TokenRenewer
from racksmith.apiserver.server import ApiServer
from racksmith.clock import FakeClock
from racksmith.kinds.cluster import Cluster, ClusterRelease
from racksmith.planners.release import PlannedRelease, item_hash, plan_state_items
from racksmith.runtime.client import as_client
from racksmith.runtime.hostaccess import issue_host_token
from racksmith.runtime.resources import LCMMACHINES
from racksmith.runtime.tokens import token_claims
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

NAME = "m-0"
GROUP, VERSION, PLURAL = "lcm.racksmith.io", "v1alpha1", "lcmmachines"
TIMING = AgentTiming(poll=0.2, heartbeat=1, reverify=300, backoff_base=0.2, backoff_cap=1,
                     kubelet_status=0.3)
NETCONFIG = {"version": 2, "ethernets": {
    "eno1": {"addresses": ["192.168.0.5/24"]},
    "eno2": {"addresses": ["10.10.0.5/24"]}}}
TEST_SECONDS = 20


def planned() -> PlannedRelease:
    release = ClusterRelease.model_validate({
        "metadata": {"name": "demo-1.0.0"},
        "spec": {"version": "1.0.0", "kubernetesVersion": "1.30.1", "stateItems": [
            {"name": "containerd", "phase": "configuration", "type": "package",
             "params": {"name": "containerd", "version": "1.7.2"}},
            {"name": "kubelet", "phase": "configuration", "type": "package",
             "params": {"name": "kubelet", "version": "1.30.1-1.1"}},
            {"name": "containerd-service", "phase": "configuration", "type": "service",
             "params": {"name": "containerd", "enabled": True, "running": True}},
            {"name": "kubelet-service", "phase": "configuration", "type": "service",
             "params": {"name": "kubelet", "enabled": True, "running": True}},
            {"name": "sysctl", "phase": "configuration", "type": "command",
             "params": {"command": ["sysctl", "--system"],
                        "creates": "/var/lib/racksmith/sysctl.done"}},
            {"name": "kubeadm-join", "phase": "join", "type": "kubeadm",
             "params": {"phase": "join"}},
            {"name": "uncordon", "phase": "uncordon", "type": "command",
             "params": {"command": ["kubectl", "uncordon", "$(NODE_NAME)"]}},
        ]},
    })
    cluster = Cluster.model_validate({
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"release": "demo-1.0.0", "apiServer": {"vip": "10.10.0.100"},
                 "networks": {"controlPlaneCIDRs": ["10.10.0.0/24"]}},
    })
    result = plan_state_items(release, ["node"], cluster, NETCONFIG)
    assert isinstance(result, PlannedRelease), result
    return result


def lcm_machine(plan: PlannedRelease, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LCMMachine",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {"machineRef": {"name": NAME}, "clusterName": "demo", "release": plan.release,
                 "stateItems": [i.model_dump(mode="json", by_alias=True)
                                for i in plan.state_items()]},
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc/racksmith").mkdir(parents=True)
    (root / "etc/racksmith/hardware.json").write_text(
        json.dumps({"cpus": 4, "memoryBytes": 8 * 2**30, "disks": []}))
    return root


async def host_token(client: ApiClient, namespace: str) -> str:
    """The host's own token, as the Machine controller asks for it: its
    ServiceAccount ``racksmith-host-m-0``, bound to Secret ``m-0-user-data``
    (so the agent runs with its own Role, under the host restriction)."""
    return await issue_host_token(as_client(client), namespace, NAME)


async def write_config(api_server: ApiServer, client: ApiClient, root: Path,
                       namespace: str) -> Path:
    assert api_server.ca_pem is not None
    path = root / "etc/racksmith/agent.yaml"
    path.write_text(yaml.safe_dump({
        "server": api_server.url,
        "certificateAuthorityData": base64.b64encode(api_server.ca_pem).decode(),
        "token": await host_token(client, namespace), "namespace": namespace,
        "lcmMachine": NAME, "nodeName": NAME}))
    path.chmod(0o600)
    return path


def tree(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


async def get_lcm(custom: CustomObjectsApi, namespace: str) -> dict[str, Any]:
    obj: dict[str, Any] = await custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, NAME)
    return obj


async def test_agent_deploys_registers_node_and_is_idempotent(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    custom, core = CustomObjectsApi(client), CoreV1Api(client)
    leases = CoordinationV1Api(client)
    plan = planned()
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL,
                                              lcm_machine(plan, ns))
    config = await write_config(api_server, client, root, ns)
    stop = asyncio.Event()
    agent = asyncio.create_task(run_agent(config, root=root, emulated=True, stop=stop,
                                          timing=TIMING, handle_signals=False))
    try:
        async with asyncio.timeout(TEST_SECONDS):
            async def ready() -> dict[str, Any] | None:
                obj = await get_lcm(custom, ns)
                status = obj.get("status") or {}
                return obj if status.get("phase") == "Ready" else None

            obj = await eventually(ready, "LCMMachine Ready")
            status = obj["status"]
            assert status["observedGeneration"] == obj["metadata"]["generation"]
            assert status["release"] == plan.release
            assert status["agentVersion"].startswith("racksmith-agent/")
            assert {i["name"]: i["hash"] for i in status["items"]} == plan.hashes()
            assert all(i["state"] == "Applied" and i["changed"] for i in status["items"])
            assert plan.hashes() == {i.name: item_hash(i) for i in plan.state_items()}

            node = await core.read_node(NAME)
            assert node.spec.unschedulable in (None, False)  # uncordoned by the last item
            assert node.metadata.labels["kubernetes.io/hostname"] == NAME
            addresses = {(a.type, a.address) for a in node.status.addresses}
            assert addresses == {("InternalIP", "10.10.0.5"), ("Hostname", NAME)}
            assert node.status.capacity == {"cpu": "4", "memory": "8388608Ki", "pods": "110"}
            assert node.status.node_info.kubelet_version == "v1.30.1"
            conditions = {c.type: c.status for c in node.status.conditions}
            assert conditions == {"Ready": "True", "MemoryPressure": "False",
                                  "DiskPressure": "False", "PIDPressure": "False"}

            lease = await leases.read_namespaced_lease(NAME, "kube-node-lease")
            assert lease.spec.holder_identity == NAME
            assert lease.spec.lease_duration_seconds == 40
            assert lease.metadata.owner_references[0].name == NAME
            first_renew = lease.spec.renew_time

            async def renewed() -> bool:
                again = await leases.read_namespaced_lease(NAME, "kube-node-lease")
                return bool(again.spec.renew_time != first_renew)

            await eventually(renewed, "the Lease renewed")

            # Nothing outside the root; packages/services as JSON; the journal.
            emulated = root / "var/lib/racksmith/emulated"
            assert json.loads((emulated / "packages.json").read_text()) == {
                "containerd": {"version": "1.7.2"}, "kubelet": {"version": "1.30.1-1.1"}}
            assert (root / "var/log/racksmith-commands.log").read_text() == "sysctl --system\n"
            assert (root / "etc/netplan/60-racksmith.yaml").exists()
            assert (root / "etc/kubernetes/kubelet.conf").exists()
    finally:
        stop.set()
        assert await asyncio.wait_for(agent, 10) == 0

    # Again on the unchanged host: every item reports changed=false.
    assert await run_agent(config, root=root, emulated=True, once=True, timing=TIMING) == 0
    status = (await get_lcm(custom, ns))["status"]
    assert status["phase"] == "Ready"
    assert [(i["name"], i["changed"]) for i in status["items"]] == [
        (name, False) for name in plan.hashes()]

    # A dry run prints "up to date" for every item and writes nothing.
    before = (await get_lcm(custom, ns))["metadata"]["resourceVersion"]
    out = io.StringIO()
    assert await run_agent(config, root=root, emulated=True, dry_run=True, out=out) == 0
    assert out.getvalue().splitlines() == [f"{name}: up to date" for name in plan.hashes()]
    assert (await get_lcm(custom, ns))["metadata"]["resourceVersion"] == before


async def test_dry_run_on_a_fresh_host_lists_actions_and_changes_nothing(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    custom = CustomObjectsApi(client)
    plan = planned()
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL,
                                              lcm_machine(plan, ns))
    config = await write_config(api_server, client, root, ns)
    files_before = tree(root)
    out = io.StringIO()
    assert await run_agent(config, root=root, emulated=True, dry_run=True, out=out) == 0
    lines = out.getvalue().splitlines()
    assert "racksmith-netplan: write /etc/netplan/60-racksmith.yaml" in lines[0]
    assert ("containerd: record package containerd=1.7.2 in "
            "/var/lib/racksmith/emulated/packages.json") in lines
    assert f"uncordon: patch Node {NAME} spec.unschedulable=false (kubectl uncordon)" in lines
    assert tree(root) == files_before
    assert "status" not in await get_lcm(custom, ns)
    with pytest.raises(Exception, match="Not Found"):
        await CoreV1Api(client).read_node(NAME)


async def test_failing_item_fails_the_machine_and_stops_later_items(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    custom = CustomObjectsApi(client)
    items = [
        {"name": "first", "phase": "configuration", "type": "file",
         "params": {"path": "/etc/first", "content": "1"}},
        {"name": "broken", "phase": "configuration", "type": "command",
         "params": {"command": ["sh", "-c", "echo no luck >&2; exit 7"]}},
        {"name": "after", "phase": "configuration", "type": "file",
         "params": {"path": "/etc/after", "content": "2"}},
    ]
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LCMMachine",
            "metadata": {"name": NAME, "namespace": ns},
            "spec": {"machineRef": {"name": NAME}, "clusterName": "demo", "release": "r",
                     "stateItems": items}}
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    config = await write_config(api_server, client, root, ns)
    # Real mode (a tmp root, a harmless failing process).
    assert await run_agent(config, root=root, once=True, timing=TIMING) == 1
    status = (await get_lcm(custom, ns))["status"]
    assert status["phase"] == "Failed"
    by_name = {i["name"]: i for i in status["items"]}
    assert by_name["first"]["state"] == "Applied"
    assert by_name["broken"]["state"] == "Failed"
    assert "exit code 7: no luck" in by_name["broken"]["error"]
    assert by_name["after"]["state"] == "Pending"
    assert (root / "etc/first").read_text() == "1"
    assert not (root / "etc/after").exists()

    # Emulated: a relative path is rejected the same way.
    items[1] = {"name": "broken", "phase": "configuration", "type": "file",
                "params": {"path": "etc/relative", "content": "x"}}
    obj = await get_lcm(custom, ns)
    obj["spec"]["stateItems"] = items
    await custom.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME, obj)
    assert await run_agent(config, root=root, emulated=True, once=True, timing=TIMING) == 1
    status = (await get_lcm(custom, ns))["status"]
    assert status["phase"] == "Failed"
    assert status["observedGeneration"] == 2
    broken = {i["name"]: i for i in status["items"]}["broken"]
    assert "must be absolute" in broken["error"]
    assert not (root / "etc/after").exists()


async def test_cli_runs_until_sigterm_and_dry_runs(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    custom = CustomObjectsApi(client)
    plan = planned()
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL,
                                              lcm_machine(plan, ns))
    config = await write_config(api_server, client, root, ns)
    argv = [sys.executable, "-m", "racksmith.cli.main", "agent", "--config", str(config),
            "--root", str(root), "--emulated"]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        async def ready() -> bool:
            status = (await get_lcm(custom, ns)).get("status") or {}
            return status.get("phase") == "Ready"

        await eventually(ready, "LCMMachine Ready (CLI)", limit=30)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 15)
        assert proc.returncode == 0, err.decode()[-2000:]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    dry = await asyncio.create_subprocess_exec(
        *argv, "--dry-run", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(dry.communicate(), 30)
    assert dry.returncode == 0, err.decode()[-2000:]
    assert out.decode().splitlines() == [f"{name}: up to date" for name in plan.hashes()]


def at(unix: float) -> FakeClock:
    return FakeClock(wall_start=datetime.fromtimestamp(unix, UTC))


async def test_the_agent_renews_its_token_before_it_runs_out(
        api_server: ApiServer, client: ApiClient, ns: str, root: Path) -> None:
    await CustomObjectsApi(client).create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, lcm_machine(planned(), ns))
    config = await write_config(api_server, client, root, ns)
    first = yaml.safe_load(config.read_text())["token"]
    claims = token_claims(first)
    assert claims is not None
    agent_client = api_client(api_server.url, first,
                              base64.b64encode(api_server.ca_pem or b"").decode(), root)
    try:
        # not due yet: nothing asked, nothing written
        early = TokenRenewer(agent_client, config, first,
                             at(claims.issued + 60), check_every=60)
        assert not await early.renew_if_due()
        assert yaml.safe_load(config.read_text())["token"] == first
        # a fifth of its life left: a new token, bound the same, in the file and in use
        late = TokenRenewer(agent_client, config, first,
                            at(claims.expires - claims.seconds / 10), check_every=60)
        assert await late.renew_if_due()
        second = yaml.safe_load(config.read_text())["token"]
        renewed = token_claims(second)
        assert second != first and renewed is not None
        assert (renewed.bound_kind, renewed.bound_name, renewed.bound_uid,
                renewed.seconds) == ("secret", f"{NAME}-user-data", claims.bound_uid,
                                     claims.seconds)
        assert config.stat().st_mode & 0o777 == 0o600
        assert agent_client.configuration.api_key["BearerToken"] == second
        lcm = await as_client(agent_client).get(LCMMACHINES, ns, NAME, live=True)
        assert lcm is not None  # the new token works
    finally:
        await agent_client.close()
