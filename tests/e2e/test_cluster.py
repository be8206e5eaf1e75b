"""The demo cluster end to end: ``racksmith up --emulate-hosts 10
--apply-emulated-hosts --apply examples/cluster`` (what ``make up`` runs, plus
four workers for the maintenance tests) with
real Ironic, sushy-tools, the emulated ramdisk, the emulated OS boot and the
host agent with its emulated kubelet, observed with kubectl.

The cluster reaches Ready: 10 Nodes Ready with exactly the MetalK8s role
labels and taints; each host's netplan (in status and on the host) holds its
own allocated addresses and MACs; no address is allocated twice; re-applying
every state item changes nothing; deleting a worker Machine returns its host
to available and its addresses to the pool.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.controlplane.jointoken import parse_join
from racksmith.planners.roles import plan_node_roles
from tests.e2e.demo import (
    ALL_MACHINES,
    MACHINES,
    ROLE_PREFIX,
    ROOT,
    guide_blocks,
    host_root,
    run_block,
    wait_for,
)
from tests.e2e.rack import Rack, state
from tests.harness.files import loose_modes
from tests.harness.netns import Segment

KEEPALIVED = shutil.which("keepalived") or "/usr/sbin/keepalived"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


@pytest.fixture
def rack(demo_rack: Rack) -> Rack:
    return demo_rack


@pytest.fixture
def ready(demo_ready: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return demo_ready

def test_cluster_becomes_ready_with_metalk8s_roles(rack: Rack,
                                                   ready: dict[str, dict[str, Any]]) -> None:
    cluster = wait_for(rack, "cluster Ready", lambda: _cluster_ready(rack), timeout=120)
    assert cluster["status"]["machinesReady"] == len(ALL_MACHINES)
    assert cluster["status"]["machinesTotal"] == len(ALL_MACHINES)
    # The Nodes are the cluster's: in its own API, none in the management API.
    assert rack.get("nodes")["items"] == []
    inside = rack.cluster()
    nodes = {n["metadata"]["name"]: n for n in inside.get("nodes")["items"]}
    assert sorted(nodes) == sorted(ALL_MACHINES)
    hosts_used = set()
    for name, machine in ready.items():
        node = nodes[name]
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True", (name, conditions)
        assert not node["spec"].get("unschedulable"), name
        planned = plan_node_roles(machine["spec"]["roles"])
        assert not isinstance(planned, list)
        role_labels = {k: v for k, v in node["metadata"]["labels"].items()
                       if k.startswith(ROLE_PREFIX)}
        assert role_labels == planned.labels, (name, role_labels)
        role_taints = [t for t in node["spec"].get("taints") or []
                       if t["key"].startswith(ROLE_PREFIX)]
        assert sorted((t["key"], t["effect"]) for t in role_taints) == sorted(
            (t.key, t.effect) for t in planned.taints), (name, role_taints)
        assert machine["status"]["nodeRef"]["name"] == name
        hosts_used.add(machine["status"]["hostRef"]["name"])
        capacity = node["status"]["capacity"]
        assert int(capacity["cpu"]) > 0 and capacity["memory"]
    assert len(hosts_used) == len(ALL_MACHINES)
    # The dedicated roles: masters are tainted, workers are not, infra is.
    assert _taint_keys(nodes["demo-worker-1"]) == set()
    assert _taint_keys(nodes["demo-infra-1"]) == {ROLE_PREFIX + "infra"}
    assert _taint_keys(nodes["demo-master-1"]) == {ROLE_PREFIX + "master", ROLE_PREFIX + "etcd"}
    # Every node's lease is renewed by its kubelet.
    leases = {x["metadata"]["name"]
              for x in inside.get("leases", "-n", "kube-node-lease")["items"]}
    assert set(MACHINES) <= leases


def test_the_cluster_serves_its_own_api_on_its_control_plane_hosts(
        rack: Rack, ready: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """The demo's three masters run kubeadm's stacked control plane as static
    pods (an API server, an etcd member and the endpoint's HAProxy each),
    formed by the emulated kubeadm: the cluster's own kubeconfig reaches it
    at its endpoint, its ClusterStatus names the three masters, and the
    management plane's probe says it is reachable."""
    cluster = wait_for(rack, "ControlPlaneReachable", lambda: next(
        (c for c in rack.get("clusters", "demo")["status"].get("conditions") or []
         if c["type"] == "ControlPlaneReachable" and c["status"] == "True"), None),
        timeout=120)
    assert cluster["reason"] == "Reachable"
    out = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "kubeconfig",
                          "--cluster", "default/demo", "--data-dir", str(rack.data_dir)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, check=True)
    kubeconfig = tmp_path / "demo.kubeconfig"
    kubeconfig.write_text(out.stdout)
    readyz = rack.kubectl("--kubeconfig", str(kubeconfig), "get", "--raw", "/readyz")
    assert readyz.stdout.strip() == "ok"
    status = rack.kubectl("--kubeconfig", str(kubeconfig), "-n", "kube-system", "get",
                          "configmap", "kubeadm-config", "-o",
                          "jsonpath={.data.ClusterStatus}").stdout
    masters = [m for m in MACHINES if "master" in m]
    assert sorted(yaml.safe_load(status)["apiEndpoints"]) == masters
    for machine in masters:
        root = host_root(rack, ready[machine]["status"]["hostRef"]["name"])
        manifests = sorted(p.stem for p in (root / "etc/kubernetes/manifests").glob("*.yaml"))
        assert manifests == ["etcd", "haproxy", "kube-apiserver"], machine
    # What the real kubeadm joins with: every host's user data carries the
    # cluster's bootstrap token (the certificate key on masters only), and
    # the token is in the cluster's own API, where kube's authenticator reads it.
    join = parse_join(rack.get("secret", "demo-join"))
    assert join is not None
    for machine in MACHINES:
        root = host_root(rack, ready[machine]["status"]["hostRef"]["name"])
        joining = root / "etc/kubernetes/racksmith/join.yaml"
        assert joining.stat().st_mode & 0o777 == 0o600
        text = joining.read_text()
        assert join.token in text, machine
        assert (join.certificate_key in text) == (machine in masters), machine
    found = wait_for(rack, "the bootstrap token in the cluster's API", lambda: [
        s for s in json.loads(rack.kubectl(
            "--kubeconfig", str(kubeconfig), "-n", "kube-system", "get", "secrets", "-o",
            "json").stdout)["items"]
        if s.get("type") == "bootstrap.kubernetes.io/token"] or None, timeout=60)
    ids = {base64.b64decode(s["data"]["token-id"]).decode() for s in found}
    assert join.token_id in ids


def test_the_masters_carry_the_api_vip_that_the_real_programs_accept(
        rack: Rack, ready: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Each master's LCMMachine carries the API VIP's keepalived and HAProxy
    items (docs/ha.md's command lists them); its agent wrote the files on
    the host, which Debian's ``haproxy -c`` and ``keepalived --config-test``
    (in a namespace with the master's interface) accept, with the VRRP
    password in a 0600 file from the user data and in no LCMMachine; kubeadm
    puts the master's API server behind HAProxy, on 6444."""
    blocks = [b for b in guide_blocks("ha.md") if "lcmmachine" in b]
    assert len(blocks) == 1
    assert run_block(rack, blocks[0]).split() == [
        "racksmith-netplan", "racksmith-keepalived", "racksmith-haproxy", "racksmith-curl",
        "racksmith-haproxy-config", "racksmith-keepalived-config",
        "racksmith-haproxy-service", "racksmith-keepalived-service"]
    secret = rack.get("secret", "demo-vrrp")
    password = base64.b64decode(secret["data"]["authPass"]).decode()
    masters = [m for m in MACHINES if "master" in m]
    peers: dict[str, tuple[str, str, Path]] = {}
    for machine in masters:
        assert password not in json.dumps(rack.get("lcmmachine", machine)), machine
        root = host_root(rack, ready[machine]["status"]["hostRef"]["name"])
        auth = root / "etc/keepalived/racksmith-vrrp-auth.conf"
        assert auth.stat().st_mode & 0o777 == 0o600
        assert auth.read_text() == f"auth_pass {password}\n"
        moves = {"/etc/keepalived/racksmith-vrrp-auth.conf": str(auth),
                 "/etc/kubernetes/pki/ca.crt": str(root / "etc/kubernetes/pki/ca.crt")}
        files = {}
        for name in ("haproxy/haproxy.cfg", "keepalived/keepalived.conf"):
            text = (root / "etc" / name).read_text()
            for old, new in moves.items():
                text = text.replace(old, new)
            files[name] = tmp_path / f"{machine}-{name.replace('/', '-')}"
            files[name].write_text(text)
        proxy = subprocess.run([HAPROXY, "-c", "-f", str(files["haproxy/haproxy.cfg"])],
                               capture_output=True, text=True, timeout=30)
        assert proxy.returncode == 0, proxy.stdout + proxy.stderr
        conf = files["keepalived/keepalived.conf"].read_text()
        interface = conf.split("    interface ", 1)[1].split()[0]
        with Segment() as segment:
            ns = segment.add_interface(f"m{machine[-1]}", interface)
            check = subprocess.run(["ip", "netns", "exec", ns, KEEPALIVED, "--config-test",
                                    "-f", str(files["keepalived/keepalived.conf"])],
                                   capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr
        services = json.loads((root / "var/lib/racksmith/emulated/services.json").read_text())
        assert services["keepalived"] == services["haproxy"] == {"enabled": True,
                                                                 "running": True}
        phase = "init" if (root / "etc/kubernetes/kubeadm-init.yaml").exists() else "join"
        docs = list(yaml.safe_load_all((root / f"etc/kubernetes/kubeadm-{phase}.yaml")
                                       .read_text()))
        local = docs[1]["localAPIEndpoint"] if phase == "init" else \
            docs[1]["controlPlane"]["localAPIEndpoint"]
        assert local["bindPort"] == 6444, machine
        assert local["advertiseAddress"] in conf, machine
        peers[machine] = (local["advertiseAddress"], conf, files["haproxy/haproxy.cfg"])
    # every master has every other as a VRRP peer and every one as a backend
    for machine, (_, conf, haproxy) in peers.items():
        for other, (address, _, _) in peers.items():
            assert f"server {other} {address}:6444" in haproxy.read_text(), (machine, other)
            if other != machine:
                assert f"        {address}\n" in conf, (machine, other)


def test_the_metal3_guide_runs_and_shows_metal3_s_columns(
        rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    blocks = guide_blocks("metal3.md")
    assert len(blocks) == 1
    out = run_block(rack, blocks[0]).splitlines()
    assert any(line.split()[:2] == ["baremetalhosts", "bmh,bmhost"] for line in out), out
    headers = [line.split() for line in out if line.startswith(("NAMESPACE", "NAME"))]
    assert ["NAMESPACE", "NAME", "STATE", "CONSUMER", "ONLINE", "ERROR", "AGE"] in headers
    assert ["NAMESPACE", "NAME", "STATUS", "STATE", "CONSUMER", "BMC", "ONLINE", "ERROR",
            "AGE"] in headers
    assert any("demo-master-1" in line and "provisioned" in line for line in out), out


def test_racksmith_status_says_ready(rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    res = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "status", "--kubeconfig",
                          str(rack.server.kubeconfig), "--wait", "--timeout", "2m"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cluster default/demo: Ready" in res.stdout
    assert "control plane: 3/3 Ready" in res.stdout
    assert "!" not in res.stdout


def test_racksmith_up_piped_prints_plain_lines(rack: Rack,
                                               ready: dict[str, dict[str, Any]]) -> None:
    """``racksmith up`` (what ``make up`` runs) with its output piped, as the
    demo rack runs it: plain lines, no terminal control sequence; the pty's
    live display is test_make_up_display's."""
    deadline = time.monotonic() + 60
    text = rack.server.log()
    while "the cluster is Ready" not in text and time.monotonic() < deadline:
        time.sleep(0.5)
        text = rack.server.log()
    assert "machines Ready — the cluster is Ready" in text, text[-3000:]
    assert "readyz: https://127.0.0.1:" in text
    assert "\x1b[" not in text, "no terminal control sequences when piped"


def test_the_support_dump_holds_no_secret_of_the_demo(
        rack: Rack, ready: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "support.tar.gz"
    res = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "support-dump",
                          "--data-dir", str(rack.data_dir), "--output", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                 for m in tar.getmembers() if m.isfile()}
    assert any(name.endswith("objects/metal3.io/baremetalhosts.yaml")
               for name in files)
    assert any(name.endswith("racksmith-agent.log") for name in files)
    secrets = [line.split(",", 1)[0] for line in
               (rack.data_dir / "tokens.csv").read_text().splitlines() if line.strip()]
    secrets += [yaml.safe_load(p.read_text())["token"] for p in
                (rack.data_dir / "emulator" / "hosts").glob("*/root/etc/racksmith/agent.yaml")]
    for item in rack.get("secrets", "-A")["items"]:
        for value in (item.get("data") or {}).values():
            decoded = base64.b64decode(value).decode("utf-8", "replace")
            secrets += [v for v in (value, decoded) if len(v) >= 8]
    assert len(secrets) > 2 * len(ready)
    everything = "\n".join(files.values())
    leaked = [s[:6] + "..." for s in secrets if s in everything]
    assert leaked == []


def test_the_data_dir_is_private(rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    """After `racksmith up` brought the cluster up (API server, controllers,
    Ironic, emulator, agents), nothing in the data dir is open to others
    (docs/security.md; ``home`` is this test's own kubectl HOME)."""
    assert loose_modes(rack.data_dir, ignore={"home"}) == []


def test_no_log_of_any_process_holds_a_token_or_a_bmc_password(
        rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    """The API server, controllers, Ironic, the emulator and every host's agent
    wrote their logs through a whole bring-up: none holds the API tokens (the
    admin's, each host's own) or the BMC passwords (docs/security.md, "Logs")."""
    secrets = [line.split(",", 1)[0] for line in
               (rack.data_dir / "tokens.csv").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert len(secrets) == 1  # the admin's: no component shares a token file entry
    agent_tokens = {yaml.safe_load(p.read_text())["token"] for p in
                    (rack.data_dir / "emulator" / "hosts").glob("*/root/etc/racksmith/agent.yaml")}
    assert len(agent_tokens) == len(ALL_MACHINES)  # one per host
    secrets.extend(agent_tokens)
    join = parse_join(rack.get("secret", "demo-join"))  # the cluster's bootstrap token
    assert join is not None
    secrets += [join.token, join.certificate_key]
    for doc in yaml.safe_load_all((rack.data_dir / "emulated-hosts.yaml").read_text()):
        if doc and doc.get("kind") == "Secret":
            secrets.append(base64.b64decode(doc["data"]["password"]).decode())
    assert len(secrets) >= 3 + 2 * len(ALL_MACHINES)
    logs = [p for p in rack.data_dir.rglob("*.log") if p.is_file()
            and not p.is_relative_to(rack.data_dir / "home")]
    assert any("ironic" in p.parts for p in logs) and any("racksmith-agent.log" == p.name
                                                           for p in logs)
    found = [(str(p.relative_to(rack.data_dir)), s[:4] + "...") for p in logs
             for s in secrets if s in p.read_text(errors="replace")]
    assert found == []


def test_netplan_holds_own_addresses_and_macs_and_nothing_is_allocated_twice(
        rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    ipaddrs = rack.get("ipaddrs")["items"]
    addresses = [x["spec"]["address"] for x in ipaddrs]
    assert len(addresses) == len(set(addresses)), addresses
    hosts = rack.hosts()
    for name, machine in ready.items():
        host = hosts[machine["status"]["hostRef"]["name"]]
        ipamhost = rack.get("ipamhost", name)
        assert ipamhost["status"]["state"] == "OK"
        netconfig = ipamhost["status"]["netconfig"]
        own = sorted(x["spec"]["address"] for x in ipaddrs
                     if x["metadata"]["labels"].get("ipam.racksmith.io/ipamhost") == name)
        assert len(own) == 2, (name, own)
        rendered = sorted(str(ipaddress.ip_interface(a).ip)
                          for eth in netconfig["ethernets"].values()
                          for a in eth.get("addresses", []))
        assert rendered == own, (name, rendered, own)
        macs = {nic["mac"].lower() for nic in host["status"]["hardware"]["nics"]}
        rendered_macs = {eth["match"]["macaddress"].lower()
                         for eth in netconfig["ethernets"].values()}
        assert rendered_macs <= macs, (name, rendered_macs, macs)
        # The same document is on the host, written by the agent.
        on_disk = yaml.safe_load((host_root(rack, host["metadata"]["name"])
                                  / "etc/netplan/60-racksmith.yaml").read_text())
        assert on_disk == {"network": netconfig}
        internal = [a["address"] for a in machine["status"]["addresses"]
                    if a["type"] == "InternalIP"]
        assert internal and ipaddress.ip_address(internal[0]) in ipaddress.ip_network(
            "10.10.0.0/24")


def test_reapplying_every_state_item_changes_nothing(
        rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    # One `racksmith agent --once` per host, all at once (they are independent).
    runs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, machine in ready.items():
            root = host_root(rack, machine["status"]["hostRef"]["name"])
            runs[name] = subprocess.Popen(
                [sys.executable, "-m", "racksmith.cli.main", "agent", "--config",
                 str(root / "etc/racksmith/agent.yaml"), "--root", str(root), "--emulated",
                 "--once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1",
                                   # the datacenter's addresses, as the emulated OS boot
                                   # gives its agents (the kubelet reaches its cluster)
                                   RACKSMITH_EMULATED_NETWORK=str(
                                       rack.data_dir / "emulator" / "network.json")))
        results = {name: (proc.communicate(timeout=180), proc.returncode)
                   for name, proc in runs.items()}
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, ((out, err), code) in results.items():
        assert code == 0, (name, out[-2000:], err[-2000:])
        lcm = rack.get("lcmmachine", name)
        items = lcm["status"]["items"]
        assert len(items) == len(lcm["spec"]["stateItems"])
        changed = [i["name"] for i in items if i.get("changed")]
        assert changed == [], (name, [i for i in items if i.get("changed")], out[-3000:])
        assert all(i["state"] == "Applied" for i in items)


def test_the_guide_examples_run(rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    blocks = [b for b in guide_blocks("cluster.md") if "kubectl delete" not in b]
    assert len(blocks) >= 2
    outputs = [run_block(rack, b) for b in blocks]
    assert "demo-master-1" in outputs[0]
    template = rack.get("l2template", "demo-two-nics")
    assert template["metadata"]["annotations"]["ipam.racksmith.io/confirm-generation"] == str(
        template["metadata"]["generation"])


def test_deleting_a_worker_returns_its_host_and_addresses(
        rack: Rack, ready: dict[str, dict[str, Any]]) -> None:
    machine = ready["demo-worker-2"]
    host_name = machine["status"]["hostRef"]["name"]
    before = {s["metadata"]["name"]: s["status"]["allocated"] for s in rack.get("subnets")["items"]}
    (delete,) = [b for b in guide_blocks("cluster.md")
                 if "kubectl delete machine demo-worker-2" in b]
    run_block(rack, delete, timeout=600)
    wait_for(rack, "the Machine gone",
             lambda: rack.kubectl("get", "machine", "demo-worker-2", check=False).returncode != 0,
             timeout=600)
    host = rack.hosts()[host_name]
    assert state(host) == "available", state(host)
    assert not host["spec"].get("consumerRef")
    assert not host["spec"].get("image")
    assert rack.kubectl("get", "node", "demo-worker-2", check=False).returncode != 0
    assert rack.kubectl("get", "lcmmachine", "demo-worker-2", check=False).returncode != 0
    left = [x for x in rack.get("ipaddrs")["items"]
            if x["metadata"]["labels"].get("ipam.racksmith.io/ipamhost") == "demo-worker-2"]
    assert left == []

    def released() -> bool:
        now = {s["metadata"]["name"]: s["status"]["allocated"]
               for s in rack.get("subnets")["items"]}
        return all(now[k] == v - 1 for k, v in before.items())

    wait_for(rack, "the subnets' allocated count down by one", released, timeout=60)
    # The other machines are untouched.
    phases = {m["metadata"]["name"]: (m.get("status") or {}).get("phase")
              for m in rack.get("machines")["items"]}
    assert phases == {n: "Ready" for n in ALL_MACHINES if n != "demo-worker-2"}


def _cluster_ready(rack: Rack) -> dict[str, Any] | None:
    cluster: dict[str, Any] = rack.get("cluster", "demo")
    conditions = {c["type"]: c["status"] for c in (cluster.get("status") or {})
                  .get("conditions", [])}
    return cluster if conditions.get("Ready") == "True" else None


def _taint_keys(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in node["spec"].get("taints") or []
            if t["key"].startswith(ROLE_PREFIX)}
