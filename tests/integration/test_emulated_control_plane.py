"""The emulated kubeadm brings up a cluster's stacked control plane on three
emulated hosts, with the real programs: ``racksmith apiserver`` standing in
for kube-apiserver, Debian's etcd and HAProxy, each a static pod the
emulated kubelet runs as a process (``racksmith.agent.staticpods``).

The first host initialises (a new one-member etcd, ``ClusterStatus`` in
``kube-system/kubeadm-config``), the other two join (``etcdctl member add``,
then their own member and API server). The cluster answers at the loopback
image of its VIP through every host's HAProxy, with the admin certificate
kubeadm issued. Then one host's API server and etcd member are killed with
SIGKILL (its kubelet paused, so they stay dead): the endpoint keeps
answering, and the cluster keeps its data (a ConfigMap written before is
read after). Every process is stopped by PID at the end, also when the
test fails."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.agent.clusterplane import HAPROXY_CFG, ControlPlaneHost, parse_cluster_status
from racksmith.agent.host import EmulatedHost, HostError
from racksmith.agent.staticpods import StaticPods
from racksmith.backup.service import snapshot_cluster
from racksmith.controllers import CLUSTER_RBAC_FILE, cluster_rbac_manifest
from racksmith.controllers.backup import ClusterStore, SnapshotFailed
from racksmith.controlplane.identities import identity_secret
from racksmith.controlplane.pki import ClusterPki, issue_client
from racksmith.loopback import LoopbackMap
from racksmith.planners.release import NETPLAN_PATH

VIP = "10.10.0.5"
MASTERS = {f"m{i}": f"10.10.0.10{i}" for i in (1, 2, 3)}


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.network = LoopbackMap(tmp / "network.json")
        self.pki = ClusterPki.generate()
        self.hosts: dict[str, EmulatedHost] = {}
        self.pods: dict[str, StaticPods] = {}
        for name, address in MASTERS.items():
            root = tmp / name / "root"
            root.mkdir(parents=True, mode=0o700)
            host = EmulatedHost(root)
            for path, data in self.pki.kubeadm_files().items():
                host.write_file(f"/etc/kubernetes/pki/{path}", data, 0o600)
            host.write_file(NETPLAN_PATH, yaml.safe_dump({"network": {"ethernets": {
                "eno1": {"addresses": [f"{address}/24"]}}}}).encode(), 0o600)
            host.write_file(CLUSTER_RBAC_FILE, cluster_rbac_manifest(), 0o600)
            self.hosts[name] = host
            self.pods[name] = StaticPods(host, restart_backoff=0.5, stop_timeout=5.0)
        self.paused: set[str] = set()

    def plane(self, name: str) -> ControlPlaneHost:
        cluster = {"name": "demo", "apiServerVIP": VIP, "apiServerPort": 6443,
                   "controlPlaneCIDRs": ["10.10.0.0/24"], "roles": ["master"],
                   "initNode": "m1"}
        return ControlPlaneHost(self.hosts[name], name, cluster, MASTERS[name], self.network,
                                ready_timeout=90.0)

    async def kubelets(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for name, pods in self.pods.items():
                if name not in self.paused:
                    await asyncio.to_thread(pods.sync)
            try:
                await asyncio.wait_for(stop.wait(), 0.3)
            except TimeoutError:
                pass

    def ssl(self, user: str = "admin") -> ssl.SSLContext:
        root = self.hosts["m2"].root / "etc/kubernetes/pki"
        context = ssl.create_default_context(cafile=str(root / "ca.crt"))
        context.load_cert_chain(str(root / f"{user}.crt"), str(root / f"{user}.key"))
        return context

    def call(self, path: str, method: str = "GET", body: dict[str, Any] | None = None,
             user: str = "admin") -> tuple[int, dict[str, Any]]:
        url = f"https://{self.network.image(VIP)}:6443{path}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.ssl(user), timeout=5) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, {}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """One cluster's control plane, formed once for the module's tests (the
    last one kills a member)."""
    rig = Rig(tmp_path_factory.mktemp("cp"))
    try:
        asyncio.run(_form(rig))
        yield rig
    finally:
        for pods in rig.pods.values():
            pods.stop_all()


def _etcd_members(rig: Rig) -> list[dict[str, Any]]:
    pki = rig.hosts["m1"].root / "etc/kubernetes/pki/etcd"
    endpoint = f"https://{rig.network.image(MASTERS['m2'])}:2379"
    out = subprocess.run(
        ["/usr/bin/etcdctl", f"--endpoints={endpoint}", f"--cacert={pki / 'ca.crt'}",
         f"--cert={pki / 'healthcheck-client.crt'}", f"--key={pki / 'healthcheck-client.key'}",
         "-w", "json", "member", "list"], env={"ETCDCTL_API": "3"},
        capture_output=True, check=True, timeout=30)
    members: list[dict[str, Any]] = json.loads(out.stdout)["members"]
    return members


def _until(what: str, check: Any, limit: float = 60.0) -> Any:
    deadline = time.monotonic() + limit
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.3)
    raise AssertionError(f"{what}: not reached in {limit}s (last: {last!r})")


async def _retried(apply: Any, now: dt.datetime, limit: float = 90.0) -> None:
    """As the agent does: a step that waits (HostError) is tried again."""
    deadline = time.monotonic() + limit
    while True:
        try:
            await apply(now)
            return
        except HostError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def _form(rig: Rig) -> None:
    stop = asyncio.Event()
    kubelets = asyncio.create_task(rig.kubelets(stop))
    try:
        now = dt.datetime.now(dt.UTC)
        with pytest.raises(HostError, match="waiting for the control plane"):
            await rig.plane("m2").apply(now)  # nothing answers yet: a join waits
        await rig.plane("m1").apply(now)
        for name in ("m2", "m3"):
            await _retried(rig.plane(name).apply, now)
        for name in MASTERS:  # a second pass proposes nothing but the proxies' backends
            plane = rig.plane(name)
            await plane.apply(dt.datetime.now(dt.UTC))
            assert await plane.plan(dt.datetime.now(dt.UTC)) == []
    finally:
        stop.set()
        await kubelets


def test_three_hosts_form_a_stacked_control_plane(rig: Rig) -> None:
    # every host runs its three static pods
    for name, pods in rig.pods.items():
        assert sorted(pods.manifests()) == ["etcd", "haproxy", "kube-apiserver"], name
        assert all(pods.pid(p) for p in pods.manifests()), name
    members = _etcd_members(rig)
    assert sorted(m["name"] for m in members) == sorted(MASTERS)
    code, cm = _until("the endpoint answers", lambda: rig.call(
        "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"))
    assert code == 200
    assert [m.name for m in parse_cluster_status(cm["data"]["ClusterStatus"])] == \
        sorted(MASTERS)
    code, _ = rig.call("/api/v1/namespaces/default/configmaps", "POST", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"},
        "data": {"k": "v"}})
    assert code == 201


def test_the_endpoint_proxy_follows_the_members_between_passes(rig: Rig) -> None:
    """A member that joined after a host's last kubeadm pass (here: a config
    that lost its backends) is put back by ``refresh_proxy`` from the
    cluster's ClusterStatus; an up-to-date proxy is left alone."""
    host = rig.hosts["m1"]
    good = host.read_file(HAPROXY_CFG)
    assert good is not None
    host.write_file(HAPROXY_CFG, good.split(b"backend")[0], 0o600)
    assert asyncio.run(rig.plane("m1").refresh_proxy()) is True
    assert host.read_file(HAPROXY_CFG) == good
    assert asyncio.run(rig.plane("m1").refresh_proxy()) is False


def test_the_controllers_reach_the_cluster_as_identities_of_their_own(rig: Rig) -> None:
    """The init applied ``racksmith rbac --in-cluster``: the Machine controller's
    certificate (as the Cluster controller issues it) gets what its ACCESS
    declares and a 403 beyond it."""
    secret = identity_secret("default", "demo", "machine", rig.pki.ca)
    pki = rig.hosts["m2"].root / "etc/kubernetes/pki"
    for key, file in (("tls.crt", "machine.crt"), ("tls.key", "machine.key")):
        (pki / file).write_bytes(base64.b64decode(secret["data"][key]))
        (pki / file).chmod(0o600)
    assert rig.call("/api/v1/nodes", user="machine")[0] == 200
    assert rig.call("/api/v1/namespaces/kube-system/configmaps", user="machine")[0] == 403
    roles = rig.call("/apis/rbac.authorization.k8s.io/v1/clusterroles/"
                     "racksmith:controller:machine")[1]
    assert roles["rules"]


def _store(rig: Rig, endpoints: list[str]) -> ClusterStore:
    leaf = issue_client(rig.pki.etcd, "racksmith-backup")
    return ClusterStore(cluster="default/demo", endpoints=tuple(endpoints),
                        ca_pem=rig.pki.etcd.cert_pem, cert_pem=leaf.cert_pem,
                        key_pem=leaf.key_pem)


def test_a_backup_of_the_cluster_store_is_an_etcd_snapshot_that_restores(
        rig: Rig, tmp_path: Path) -> None:
    """``snapshot_cluster`` (a ControlPlaneBackup naming the cluster) takes an
    etcd snapshot from the first member that answers, encrypted with the key
    file; taken again it is checked and kept; restored as docs/backup.md
    says, it holds the cluster's objects."""
    dead = "https://127.0.0.1:1"  # nothing listens: the next member is asked
    live = [f"https://{rig.network.image(a)}:2379" for a in MASTERS.values()]
    backups = tmp_path / "backups"
    key = os.urandom(32)
    snap = snapshot_cluster(backups, "pre-update", _store(rig, [dead, *live]), key)
    path = Path(snap.file)
    assert path.name == "racksmith-pre-update.etcd.db.enc" and snap.encrypted
    assert path.stat().st_mode & 0o777 == 0o600
    assert snap.resource_version > 0 and snap.objects > 0 and snap.size == path.stat().st_size
    again = snapshot_cluster(backups, "pre-update", _store(rig, [dead]), key)
    assert again.sha256 == snap.sha256  # checked and kept, not taken again
    assert sorted(p.name for p in backups.iterdir()) == [path.name]  # no scratch left
    with pytest.raises(SnapshotFailed, match="no etcd member of cluster default/demo"):
        snapshot_cluster(backups, "other", _store(rig, [dead]))
    # restore: decrypt (racksmith backup decrypt), etcdctl snapshot restore
    db = tmp_path / "restored.db"
    key_file = tmp_path / "backup.key"
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    subprocess.run([sys.executable, "-m", "racksmith.cli.main", "backup", "decrypt",
                    str(path), "--key-file", str(key_file), "--output", str(db)],
                   check=True, capture_output=True, timeout=60)
    assert db.stat().st_mode & 0o777 == 0o600
    restored = tmp_path / "member"
    subprocess.run(["/usr/bin/etcdctl", "snapshot", "restore", str(db),
                    f"--data-dir={restored}", "--name=restore",
                    "--initial-cluster=restore=http://127.0.0.1:0",
                    "--initial-advertise-peer-urls=http://127.0.0.1:0"],
                   env={"ETCDCTL_API": "3"}, check=True, capture_output=True, timeout=60)
    assert (restored / "member" / "snap" / "db").is_file()


def test_the_endpoint_survives_a_dead_member(rig: Rig) -> None:
    # kill -9 m1's API server and etcd member; its kubelet is paused
    rig.paused.add("m1")
    pods = rig.pods["m1"]
    for pod in ("kube-apiserver", "etcd"):
        pid = pods.pid(pod)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    # While etcd elects a new leader (m1's member may have led) a read is a
    # 503 from the store, which clients retry; then every answer is the data.
    _until("the endpoint serves the data again", lambda: rig.call(
        "/api/v1/namespaces/default/configmaps/before")[0] == 200, limit=30)
    for _ in range(20):  # every answer, not just one: HAProxy steers around the dead host
        code, cm = rig.call("/api/v1/namespaces/default/configmaps/before")
        assert code == 200 and cm["data"] == {"k": "v"}
    # the kubelet brings the dead static pods back
    rig.paused.discard("m1")
    for _ in range(50):
        pods.sync()
        if pods.pid("kube-apiserver") and pods.pid("etcd"):
            break
        time.sleep(0.3)
    assert pods.pid("kube-apiserver") and pods.pid("etcd")
