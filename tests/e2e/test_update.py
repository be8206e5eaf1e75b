"""A cluster update end to end, on the session's demo cluster (real Ironic,
the Redfish emulator, the emulated OS boot, host agents with emulated
kubelets): 3 control-plane + etcd machines and 6 workers in 2 racks and 2
update groups, the reference workload controller holding its locks, a
replicated web app with a PodDisruptionBudget, all observed through an event
log of kubectl watches.

Bumping the Cluster's release to racksmith-1.1.0 (which adds a kernel package
that needs a reboot) creates a ClusterUpdatePlan; commencing its steps
updates and reboots every node, once. Along the way:

- an alert listed in an UpdateAutoPause fires while the control plane
  updates: the steps not started lose ``commence`` and the plan shows
  AutoPaused with the alert; re-commencing resumes;
- a third party's NodeWorkloadLock set to failed pauses its node with the
  lock's message in the plan; setting it inactive resumes it;
- ``racksmith up`` is killed with SIGKILL while a worker is in maintenance
  and started again: the update resumes, no node is rebooted twice, none is
  left cordoned;
- a pod whose PodDisruptionBudget can never allow an eviction blocks its
  node's drain: the plan names the pod and the budget within the drain
  timeout; deleting the budget lets the drain finish.

The event log then shows that at no moment were two etcd members down, more
machines of a group in maintenance than it allows, a budget's Ready pods
below its minimum, or a pod drained from a node before the node was cordoned
and all its NodeWorkloadLocks were inactive. A GracefulRebootRequest then
reboots one worker: cordoned, drained, rebooted through its BMC, uncordoned.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e import eventlog as ev
from tests.e2e.demo import (
    ALL_MACHINES,
    EXAMPLES,
    HARDWARE,
    HOSTS,
    ROOT,
    guide_blocks,
    host_root,
    run_block,
    wait_for,
)
from tests.e2e.rack import Rack, start_rack

TARGET = "racksmith-1.1.0"
SOURCE = "racksmith-1.0.0"
PLAN = f"demo-{TARGET}"
ALERT = "RacksmithE2EAlert"
MASTERS = ["demo-master-1", "demo-master-2", "demo-master-3"]
WEB_NS = "e2e-web"
INSTANCE_LABEL = "workloads.racksmith.io/instance"
GROUP_LABEL = "lcm.racksmith.io/update-group"
GROUP_CONCURRENCY = {"demo-workers-a": 2, "demo-workers-b": 1}


DELETED_BY_TEST_CLUSTER = "demo-worker-2"


@pytest.fixture
def rack(demo_rack: Rack, demo_ready: dict[str, dict[str, Any]]) -> Rack:
    """The demo cluster as test_cluster leaves it: without the worker its
    deletion test removes (deleted here when this module runs without it,
    e.g. alone), so that 6 workers remain."""
    def gone() -> bool:
        return demo_rack.kubectl("get", "machine", DELETED_BY_TEST_CLUSTER,
                                 check=False).returncode != 0

    if not gone():
        demo_rack.kubectl("delete", "machine", DELETED_BY_TEST_CLUSTER, "--wait=false")
        wait_for(demo_rack, f"Machine {DELETED_BY_TEST_CLUSTER} gone", gone, timeout=600)
    return demo_rack


def _apply(rack: Rack, doc: dict[str, Any]) -> None:
    rack.kubectl("apply", "-f", "-", input_text=json.dumps(doc))


def _plan(rack: Rack) -> dict[str, Any] | None:
    res = rack.kubectl("get", "clusterupdateplan", PLAN, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def _machine_states(plan: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in ((plan or {}).get("status") or {}).get("machines", [])}


def _commence(rack: Rack, plan: dict[str, Any], only_not_started: bool = False) -> None:
    status = {s["id"]: s.get("phase") for s in (plan.get("status") or {}).get("steps", [])}
    ops = [{"op": "replace", "path": f"/spec/steps/{i}/commence", "value": True}
           for i, step in enumerate(plan["spec"]["steps"])
           if not (only_not_started and status.get(step["id"]) == "Completed")]
    rack.kubectl("patch", "clusterupdateplan", PLAN, "--type", "json", "-p", json.dumps(ops))


def _nmrs(rack: Rack) -> dict[str, dict[str, Any]]:
    """The cluster's NodeMaintenanceRequests (in its own API), by node."""
    return {o["spec"]["nodeName"]: o
            for o in rack.cluster().get("nodemaintenancerequests")["items"]}


def _alertmanager(rack: Rack) -> str:
    return f"http://127.0.0.1:{rack.ports['alertmanager']}"


def _post_alert(rack: Rack, ends: datetime) -> None:
    body = json.dumps([{"labels": {"alertname": ALERT, "severity": "critical"},
                        "annotations": {"summary": "e2e"},
                        "startsAt": datetime.now(UTC).isoformat(),
                        "endsAt": ends.isoformat()}]).encode()
    req = urllib.request.Request(f"{_alertmanager(rack)}/api/v2/alerts", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


class WebApp:
    """Two replicas of a web app on distinct workers, a PDB (minAvailable 1),
    and this test playing its ReplicaSet: an evicted replica is recreated on
    a schedulable worker (the emulated kubelet marks it Ready)."""

    def __init__(self, rack: Rack, workers: list[str]) -> None:
        self.rack = rack.cluster()
        self.workers = workers
        self.stopped = threading.Event()
        self.counter = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        _apply(self.rack, {"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": WEB_NS}})
        _apply(self.rack, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "web", "namespace": WEB_NS},
                           "spec": {"minAvailable": 1,
                                    "selector": {"matchLabels": {"app": "web"}}}})
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(30)

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                self._reconcile()
            except Exception:  # the API server is being restarted
                pass
            self.stopped.wait(1.0)

    def _reconcile(self) -> None:
        pods = self.rack.get("pods", "-n", WEB_NS, "-l", "app=web")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(live) >= 2:
            return
        nodes = {n["metadata"]["name"]: n for n in self.rack.get("nodes")["items"]}
        used = {p["spec"].get("nodeName") for p in live}
        for name in self.workers:
            node = nodes.get(name)
            if node is None or node["spec"].get("unschedulable") or name in used:
                continue
            self.counter += 1
            _apply(self.rack, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"web-{self.counter}-{int(time.time())}",
                             "namespace": WEB_NS, "labels": {"app": "web"}},
                "spec": {"nodeName": name,
                         "containers": [{"name": "web", "image": "nginx:1.27"}]}})
            return


def _lock_status(rack: Rack, name: str, status: dict[str, Any]) -> None:
    rack.cluster().kubectl("patch", "nodeworkloadlock", name, "--subresource=status",
                           "--type", "merge", "-p", json.dumps({"status": status}))


def _wait_plan(rack: Rack, what: str, pred: Any, timeout: float) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        plan = _plan(rack)
        return plan if plan is not None and pred(plan) else None
    try:
        result: dict[str, Any] = wait_for(rack, what, check, timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nplan: {json.dumps(_plan(rack), indent=1)[-6000:]}") from None
    return result


def _condition(plan: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (plan.get("status") or {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def _boot_ids(rack: Rack) -> dict[str, str]:
    return {n["metadata"]["name"]: (n["status"].get("nodeInfo") or {}).get("bootID", "")
            for n in rack.cluster().get("nodes")["items"]}


def _cluster_kubeconfig(rack: Rack) -> Path:
    path = rack.cluster().kubeconfig
    assert path is not None
    return path


def _cluster_answers(rack: Rack, kubeconfig: Path) -> None:
    """The cluster's ConfigMap kube-system/kubeadm-config reads back through its
    endpoint (a read during etcd's leader election may be a 503: retried)."""
    deadline = time.monotonic() + 60
    res = None
    while time.monotonic() < deadline:
        res = rack.kubectl("--kubeconfig", str(kubeconfig), "-n", "kube-system", "get",
                           "configmap", "kubeadm-config", "-o", "name", check=False, timeout=30)
        if res.returncode == 0 and "kubeadm-config" in res.stdout:
            return
        time.sleep(1)
    raise AssertionError(f"the cluster's endpoint did not answer: {res}")


def _static_pods(rack: Rack, machine: str) -> Path:
    """The pid files of the static pods of ``machine``'s host."""
    host = next(m for m in rack.get("machines")["items"]
                if m["metadata"]["name"] == machine)["status"]["hostRef"]["name"]
    return host_root(rack, host) / "run" / "static-pods"


def _kill_member(pods: Path) -> None:
    """SIGKILL the API server and etcd member of a control-plane host."""
    for pod in ("kube-apiserver", "etcd"):
        pid = json.loads((pods / f"{pod}.json").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)


def test_release_update_rolls_through_the_cluster(rack: Rack) -> None:
    machines = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
    workers = sorted(n for n in machines if n not in MASTERS)
    assert len(workers) == 6, workers
    groups = {n: machines[n]["metadata"]["labels"][GROUP_LABEL] for n in workers}
    racks = {machines[n]["metadata"]["labels"]["metal.racksmith.io/rack"] for n in workers}
    assert racks == {"rack-a", "rack-b"} and set(groups.values()) == set(GROUP_CONCURRENCY)
    for group, concurrency in GROUP_CONCURRENCY.items():
        rack.kubectl("patch", "updategroup", group, "--type", "merge", "-p",
                     json.dumps({"spec": {"concurrentUpdates": concurrency}}))
    rack.kubectl("patch", "cluster", "demo", "--type", "merge", "-p", json.dumps(
        {"spec": {"update": {"drainTimeoutSeconds": 20, "onDrainTimeout": "Pause"}}}))
    _apply(rack, {"apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "UpdateAutoPause",
                  "metadata": {"name": "e2e", "namespace": "default"},
                  "spec": {"alerts": [ALERT]}})
    rack.kubectl("apply", "-f", str(ROOT / "examples" / "update"))

    # The reference workload controller's instances are up on the workers.
    inside = rack.cluster()  # the cluster's own API: its pods, PDBs, locks, requests

    def instances() -> list[dict[str, Any]] | None:
        pods = inside.get("pods", "-n", "racksmith-workloads", "-l", INSTANCE_LABEL)["items"]
        ready = [p for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in (p.get("status") or {}).get("conditions", []))]
        return ready if len(ready) >= 4 and len(ready) == len(pods) else None
    placed = wait_for(rack, "reference instances Ready", instances, timeout=180)

    # The workloads: the web app (PDB minAvailable 1), a pod no budget lets go,
    # and a lock that fails.
    web = WebApp(rack, workers)
    web.start()
    wait_for(rack, "web replicas Ready", lambda: len([
        p for p in inside.get("pods", "-n", WEB_NS, "-l", "app=web")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True"
               for c in (p.get("status") or {}).get("conditions", []))]) == 2, timeout=60)
    blocked_node = next(n for n in workers if groups[n] == "demo-workers-b")
    _apply(inside, {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "blocker", "namespace": WEB_NS,
                               "labels": {"app": "blocker"}},
                  "spec": {"nodeName": blocked_node,
                           "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    _apply(inside, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "blocker", "namespace": WEB_NS},
                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "blocker"}}}})
    # A third party's lock on a group-a worker that cannot be released yet.
    failing_node = "demo-worker-3"
    assert groups[failing_node] == "demo-workers-a"
    _apply(inside, {"apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "NodeWorkloadLock",
                  "metadata": {"name": f"e2e.{failing_node}"},
                  "spec": {"controllerName": "e2e", "nodeName": failing_node}})
    _lock_status(rack, f"e2e.{failing_node}", {"state": "failed",
                                                "errorMessage": "e2e: replica resync running"})

    boots_before = _boot_ids(rack)
    log = ev.EventLog(rack.home)
    cluster_kubeconfig = _cluster_kubeconfig(rack)
    log.start(cluster_kubeconfig)
    start_rv = 0
    try:
        # Bump the release: a plan appears, with nothing commenced.
        rack.kubectl("patch", "cluster", "demo", "--type", "merge", "-p",
                     json.dumps({"spec": {"release": TARGET}}))
        plan = _wait_plan(rack, "the update plan", lambda p: p["spec"]["steps"], 60)
        assert plan["spec"]["source"] == SOURCE and plan["spec"]["target"] == TARGET
        steps = plan["spec"]["steps"]
        assert [s["id"] for s in steps] == [
            "control-plane", "group-demo-workers-a", "group-demo-workers-b"], steps
        assert not any(s["commence"] for s in steps)
        assert all(s["duration"]["estimated"] and s["impact"] for s in steps)
        # The controller has judged this very plan (its status is of the plan's
        # generation) and started nothing.
        plan = _wait_plan(rack, "the plan judged, not started", lambda p: (
            p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]
            and p["status"].get("phase") == "NotStarted", 60)
        assert _nmrs(rack) == {}, "nothing may start before commence"

        _commence(rack, plan)
        # The control plane goes first, one machine at a time. An alert fires meanwhile.
        wait_for(rack, "a control-plane machine in maintenance",
                 lambda: set(_nmrs(rack)) & set(MASTERS), timeout=120)
        _post_alert(rack, datetime.now(UTC) + timedelta(hours=1))
        plan = _wait_plan(rack, "the plan AutoPaused",
                          lambda p: (p.get("status") or {}).get("phase") == "AutoPaused", 60)
        assert plan["status"]["firingAlerts"] == [ALERT]
        paused_steps = {s["id"]: s["commence"] for s in plan["spec"]["steps"]}
        assert paused_steps["group-demo-workers-a"] is False
        assert paused_steps["group-demo-workers-b"] is False
        # The control plane finishes; no worker starts while paused: the status
        # that records the finished step (written by the pass that would start
        # the next one) still says AutoPaused, and no worker is in maintenance.
        _wait_plan(rack, "the control plane updated, the plan still paused", lambda p: next(
            s for s in p["status"]["steps"] if s["id"] == "control-plane")["phase"]
            == "Completed" and p["status"].get("phase") == "AutoPaused", 600)
        assert not set(_nmrs(rack)) & set(workers), "a worker started while auto-paused"
        _post_alert(rack, datetime.now(UTC) - timedelta(seconds=1))  # resolved
        plan = _wait_plan(rack, "the alert gone from the plan",
                          lambda p: not p["status"].get("firingAlerts"), 60)
        _commence(rack, plan, only_not_started=True)

        # Group a: the failed lock pauses its node, with its message in the plan.
        plan = _wait_plan(rack, "the failed lock shown", lambda p: "replica resync running" in (
            _machine_states(p).get(failing_node, {}).get("message") or ""), 600)
        assert _machine_states(plan)[failing_node]["state"] == "LockFailed"
        assert (_condition(plan, "LockFailed") or {}).get("status") == "True"
        assert failing_node in _nmrs(rack)
        assert not inside.get("node", failing_node)["spec"].get("unschedulable"), \
            "a node with a failed lock must not be drained"
        _lock_status(rack, f"e2e.{failing_node}", {"state": "inactive", "release": TARGET,
                                                    "errorMessage": None})

        # Kill -9 the whole control plane while a worker is in maintenance.
        def worker_mid_update() -> bool:
            states = _machine_states(_plan(rack))
            return any(states.get(n, {}).get("state") in ("Applying", "Rebooting",
                                                          "WaitingForNode")
                       for n in workers)
        wait_for(rack, "a worker mid-update", worker_mid_update, timeout=600)
        log.stop()
        member = _static_pods(rack, "demo-master-1")
        # The API server comes back on the same address: the host agents know only it.
        port = urlsplit(rack.server.url).port
        rack.server.proc.send_signal(signal.SIGKILL)
        rack.server.proc.wait(30)
        # The cluster's own API does not depend on the management process; and
        # with one master's API server and etcd member killed -9 as well, its
        # endpoint keeps answering (the other two hold etcd's quorum).
        _cluster_answers(rack, cluster_kubeconfig)
        _kill_member(member)
        _cluster_answers(rack, cluster_kubeconfig)
        # Restarted re-applying the hosts' and the cluster's manifests (as a
        # second `make up` would): that must not undo what the controllers and
        # the operator changed since (the hosts' images, consumers and power,
        # the cluster's new release: conflicts, left as they are). Not the
        # machines' manifest: re-applying it would rightly re-create the
        # worker test_cluster deleted.
        restarted = start_rack(rack.data_dir, HOSTS, [
            "--port", str(port), "--apply-emulated-hosts",
            "--apply", str(EXAMPLES / "30-cluster.yaml")], hardware=HARDWARE)
        rack.server = restarted.server
        log.start(cluster_kubeconfig)

        # Group b: the blocker's budget never allows the eviction.
        plan = _wait_plan(rack, "the drain reported blocked", lambda p: (
            _condition(p, "Blocked") or {}).get("status") == "True", 900)
        message = _condition(plan, "Blocked")["message"]  # type: ignore[index]
        assert "blocker" in message and f"{WEB_NS}/blocker" in message, message
        assert blocked_node in message or "PodDisruptionBudget" in message, message
        assert _machine_states(plan)[blocked_node]["state"] == "Blocked"
        inside.kubectl("delete", "pdb", "-n", WEB_NS, "blocker")

        plan = _wait_plan(rack, "the plan Completed",
                          lambda p: p["status"].get("phase") == "Completed", 900)
    finally:
        log.stop()
        web.stop()

    # Every node runs the new release, rebooted exactly once, uncordoned.
    cluster = wait_for(rack, "cluster status.release", lambda: (
        c := rack.get("cluster", "demo"))["status"].get("release") == TARGET and c, timeout=120)
    assert cluster["spec"]["release"] == TARGET
    # A backup of the control plane was taken before the first step started.
    backup = rack.get("controlplanebackup", plan["status"]["backup"])
    assert backup["spec"]["reason"] == "PreUpdate", backup
    assert backup["status"]["phase"] == "Completed" and backup["status"]["verifiedAt"]
    first_start = min(m["startedAt"] for m in plan["status"]["machines"] if m.get("startedAt"))
    assert backup["status"]["completedAt"] <= first_start, (backup["status"], first_start)
    assert (_condition(plan, "BackupTaken") or {}).get("status") == "True"
    assert Path(backup["status"]["file"]).is_file()
    boots_after = _boot_ids(rack)
    for name in ALL_MACHINES:
        if name == "demo-worker-2":
            continue
        lcm = rack.get("lcmmachine", name)
        assert lcm["status"]["release"] == TARGET, name
        assert boots_after[name] != boots_before[name], f"{name} was not rebooted"
        node = inside.get("node", name)
        assert not node["spec"].get("unschedulable"), f"{name} left cordoned"
        assert "lcm.racksmith.io/cordoned-by" not in node["metadata"].get("annotations", {})
        packages = json.loads((host_root(rack, rack.get("machine", name)["status"]["hostRef"]
                                         ["name"]) / "var/lib/racksmith/emulated/packages.json")
                              .read_text())
        assert packages.get("linux-image", {}).get("version") == "6.8.0-50", (name, packages)
    assert inside.get("nodemaintenancerequests")["items"] == []
    assert inside.get("clustermaintenancerequests")["items"] == []
    # the management API holds none of the cluster's maintenance objects
    assert rack.get("nodemaintenancerequests")["items"] == []
    assert rack.get("nodes")["items"] == []
    inside.kubectl("delete", "nodeworkloadlock", f"e2e.{failing_node}")
    locks = inside.get("nodeworkloadlocks")["items"] + \
        inside.get("clusterworkloadlocks")["items"]
    assert locks and all((lk.get("status") or {}).get("state", "active") == "active"
                         for lk in locks), [(lk["metadata"]["name"], lk.get("status"))
                                            for lk in locks]
    progress = _machine_states(plan)
    assert {n for n, m in progress.items() if m.get("state") == "Done"} == set(
        ALL_MACHINES) - {"demo-worker-2"}

    # The event log: the invariants held at every moment.
    events = log.events()
    boot_ids: dict[str, set[str]] = {}
    for e in events:
        if e.kind == "nodes":
            boot = (e.obj.get("status", {}).get("nodeInfo") or {}).get("bootID")
            if boot:
                boot_ids.setdefault(e.key[2], set()).add(boot)
    twice = {n: b for n, b in boot_ids.items() if len(b) > 2}
    assert not twice, f"rebooted more than once: {twice}"
    problems = ev.replay(events, [
        ev.etcd_at_most_one_down(set(MASTERS)),
        ev.group_limits({**groups, **dict.fromkeys(MASTERS, "control")},
                        {**GROUP_CONCURRENCY, "control": 1}),
        ev.pdbs_hold({f"{WEB_NS}/web": 1, "racksmith-workloads/instances": len(placed) - 1}),
        ev.drained_only_when_unlocked(
            lambda pod: INSTANCE_LABEL in (pod["metadata"].get("labels") or {})),
    ], start_rv=start_rv, blind=log.blind)
    assert not log.errors, log.errors
    assert len(log.blind) == 1, log.blind  # the one restart
    if problems:
        first = int(problems[0].split()[1])
        context = ev.timeline(events, first - 120, first + 10)
        dump = rack.data_dir.parent / "update-timeline.txt"
        dump.write_text("\n".join([*problems, "", *context]) + "\n")
        pytest.fail("\n".join(problems[:20]) + f"\n--- timeline ({dump}) ---\n"
                    + "\n".join(context[-80:]))
    maintained = {e.obj["spec"]["nodeName"] for e in events
                  if e.kind == "nodemaintenancerequests"}
    assert maintained == set(ALL_MACHINES) - {"demo-worker-2"}
    # No pod was evicted twice: one Evicted Event per pod (the node flow's,
    # about the Node, in the cluster's API; a repeat would bump its count).
    evicted: dict[str, int] = {}
    for event in inside.get("events", "-A")["items"]:
        if event.get("reason") != "Evicted":
            continue
        evicted[event["message"]] = evicted.get(event["message"], 0) + int(
            event.get("count") or 1)
    assert evicted, "no eviction recorded"
    assert not {m: c for m, c in evicted.items() if c > 1}, evicted


def test_graceful_reboot_request_reboots_a_worker(rack: Rack) -> None:
    node = "demo-worker-1"
    before = _boot_ids(rack)[node]
    _apply(rack, {"apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "GracefulRebootRequest",
                  "metadata": {"name": "demo", "namespace": "default"},
                  "spec": {"machines": [node]}})
    wait_for(rack, "the reboot request Completed", lambda: (
        rack.get("gracefulrebootrequest", "demo").get("status") or {}).get("phase")
        == "Completed", timeout=600)
    assert _boot_ids(rack)[node] != before
    inside = rack.cluster()
    assert not inside.get("node", node)["spec"].get("unschedulable")
    assert inside.get("nodemaintenancerequests")["items"] == []


def test_the_guide_examples_run(rack: Rack) -> None:
    """Every bash block of docs/maintenance.md, on the updated cluster (the
    plan is Completed, so commencing and re-pointing the release change
    nothing); the hand-made lock of the third-party example is removed after."""
    blocks = guide_blocks("maintenance.md")
    assert len(blocks) >= 10
    try:
        outputs = [run_block(rack, b) for b in blocks]
    finally:
        rack.cluster().kubectl("delete", "nodeworkloadlock", "storage.demo-worker-1",
                               "--ignore-not-found")
        rack.kubectl("delete", "updateautopause", "demo", "--ignore-not-found")
    joined = "\n".join(outputs)
    assert PLAN in joined and "KubeNodeNotReady" in joined
    assert "Completed" in joined
