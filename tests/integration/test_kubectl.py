"""The genuine kubectl builds 1.27, 1.30 and 1.33 against a real server process.

One server (``racksmith apiserver`` over TLS with a token, started and
stopped by PID: the harness's ``server_process``) serves every version;
each version works in its own namespace so the runs do not see each other's
objects.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.harness.manifests import WIDGET_CRD, widget
from tests.harness.process import ServerProc, kubectl_path

VERSIONS = [27, 30, 33]


class Kubectl:
    def __init__(self, minor: int, server: ServerProc, workdir: Path) -> None:
        self.bin = str(kubectl_path(minor))
        self.server = server
        self.workdir = workdir
        self.home = workdir / "home"
        self.home.mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "KUBECONFIG": str(self.server.kubeconfig),
                "PATH": "/usr/bin:/bin"}

    def run(self, *args: str, input_text: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([self.bin, *args], input=input_text, capture_output=True,
                             text=True, env=self.env(), timeout=timeout, cwd=self.workdir)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({res.returncode}):\n"
                                 f"{res.stdout}\n{res.stderr}\n--- server log ---\n"
                                 f"{self.server.log()[-3000:]}")
        return res

    def apply(self, text: str, *extra: str) -> str:
        return self.run("apply", "-f", "-", *extra, input_text=text).stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([self.bin, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(),
                                cwd=self.workdir)


@pytest.fixture(params=VERSIONS, ids=[f"kubectl-1.{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, server_process: ServerProc,
            tmp_path: Path) -> Kubectl:
    k = Kubectl(request.param, server_process, tmp_path)
    k.apply(WIDGET_CRD)
    ns = f"ns{request.param}"
    if k.run("get", "namespace", ns, check=False).returncode != 0:
        k.run("create", "namespace", ns)
    k.ns = ns  # type: ignore[attr-defined]
    return k


def _ns(k: Kubectl) -> str:
    return str(k.ns)  # type: ignore[attr-defined]


def test_api_resources_lists_builtin_racksmith_and_user_kinds(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    for name in ("baremetalhosts", "volumes", "nodeworkloadlocks", "widgets", "pods",
                 "poddisruptionbudgets", "customresourcedefinitions", "leases"):
        assert f"\n{name} " in out or out.startswith(name), name
    assert "wdg" in out


def test_apply_create_unchanged_configured(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    assert "created" in kubectl.apply(widget("a1", namespace=ns))
    assert "unchanged" in kubectl.apply(widget("a1", namespace=ns))
    assert "configured" in kubectl.apply(widget("a1", color="green", namespace=ns))
    got = json.loads(kubectl.run("get", "widget", "a1", "-n", ns, "-o", "json").stdout)
    assert got["spec"]["color"] == "green"
    assert got["spec"]["size"] == 3
    assert got["metadata"]["generation"] == 2


def test_get_table_yaml_json_jsonpath_wide(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    kubectl.apply(widget("t1", color="blue", size=7, namespace=ns))
    table = kubectl.run("get", "widgets", "-n", ns).stdout
    header = table.splitlines()[0].split()
    assert header == ["NAME", "COLOR", "SIZE", "PHASE", "AGE"]
    row = next(line for line in table.splitlines() if line.startswith("t1 "))
    assert row.split()[:3] == ["t1", "blue", "7"]
    wide = kubectl.run("get", "widgets", "-n", ns, "-o", "wide").stdout
    assert "OWNER" in wide.splitlines()[0] and "alice" in wide
    assert "color: blue" in kubectl.run("get", "widget", "t1", "-n", ns, "-o", "yaml").stdout
    assert json.loads(kubectl.run("get", "widget", "t1", "-n", ns, "-o", "json").stdout)[
        "kind"] == "Widget"
    assert kubectl.run("get", "widget", "t1", "-n", ns, "-o",
                       "jsonpath={.spec.size}").stdout == "7"
    assert "t1" in kubectl.run("get", "wdg", "-n", ns, "-o", "name").stdout


def test_get_watch_sees_a_change_from_another_command(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    kubectl.apply(widget("w1", namespace=ns))
    proc = kubectl.popen("get", "widgets", "-n", ns, "-w")
    lines: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not any(line.startswith("w1 ") for line in lines):
            assert time.monotonic() < deadline, lines
            time.sleep(0.1)
        kubectl.run("patch", "widget", "w1", "-n", ns, "--type=merge", "-p",
                    '{"spec":{"size":9}}')
        while not any(line.split()[:3] == ["w1", "red", "9"] for line in lines):
            assert time.monotonic() < deadline, lines
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()


def test_label_annotate_patch_merge_json_status_and_wait(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    kubectl.apply(widget("p1", namespace=ns))
    kubectl.run("label", "widget", "p1", "-n", ns, "tier=gold")
    kubectl.run("annotate", "widget", "p1", "-n", ns, "note=hello")
    kubectl.run("patch", "widget", "p1", "-n", ns, "--type=merge", "-p",
                '{"spec":{"size":5}}')
    kubectl.run("patch", "widget", "p1", "-n", ns, "--type=json", "-p",
                '[{"op":"test","path":"/spec/size","value":5},'
                '{"op":"replace","path":"/spec/color","value":"green"}]')
    kubectl.run("patch", "widget", "p1", "-n", ns, "--subresource=status", "--type=merge",
                "-p", '{"status":{"phase":"Ready"}}')
    kubectl.run("wait", "--for=jsonpath={.status.phase}=Ready", "widget/p1", "-n", ns,
                "--timeout=30s")
    got = json.loads(kubectl.run("get", "widget", "p1", "-n", ns, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"tier": "gold"}
    assert got["metadata"]["annotations"]["note"] == "hello"
    assert got["spec"] == {"color": "green", "size": 5, "owner": "alice"}
    assert got["status"] == {"phase": "Ready"}
    assert "p1" in kubectl.run("get", "widgets", "-n", ns, "-l", "tier=gold").stdout
    assert "p1" in kubectl.run("get", "widgets", "-n", ns, "-l", "tier in (gold,silver)").stdout
    assert "p1" not in kubectl.run("get", "widgets", "-n", ns, "-l", "tier!=gold").stdout
    assert "p1" in kubectl.run("get", "widgets", "-n", ns,
                               "--field-selector", "spec.color=green").stdout
    # a failing JSON-patch test changes nothing
    bad = kubectl.run("patch", "widget", "p1", "-n", ns, "--type=json", "-p",
                      '[{"op":"test","path":"/spec/size","value":6},'
                      '{"op":"replace","path":"/spec/color","value":"red"}]', check=False)
    assert bad.returncode != 0
    assert kubectl.run("get", "widget", "p1", "-n", ns, "-o",
                       "jsonpath={.spec.color}").stdout == "green"


def test_describe_shows_events(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    kubectl.apply(widget("d1", namespace=ns))
    uid = kubectl.run("get", "widget", "d1", "-n", ns, "-o",
                      "jsonpath={.metadata.uid}").stdout
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kubectl.apply(f"""\
apiVersion: v1
kind: Event
metadata:
  name: d1.polished
  namespace: {ns}
involvedObject:
  apiVersion: example.com/v1
  kind: Widget
  name: d1
  namespace: {ns}
  uid: {uid}
reason: Polished
message: the widget was polished
type: Normal
firstTimestamp: "{now}"
lastTimestamp: "{now}"
count: 1
source:
  component: polisher
""")
    out = kubectl.run("describe", "widget", "d1", "-n", ns).stdout
    assert "Events:" in out
    assert "Polished" in out and "the widget was polished" in out


def test_delete_with_finalizer_waits_for_a_controller(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    kubectl.apply(widget("f1", namespace=ns, extra=""))
    kubectl.run("patch", "widget", "f1", "-n", ns, "--type=merge", "-p",
                '{"metadata":{"finalizers":["example.com/hold"]}}')
    # -v=6: kubectl logs each request as its answer arrives, its watch too
    proc = kubectl.popen("delete", "widget", "f1", "-n", ns, "--timeout=60s", "-v=6")
    try:
        assert proc.stderr is not None
        requests = []
        for line in proc.stderr:  # ends if kubectl exits
            requests.append(line)
            if "watch=true" in line:
                break
        assert "watch=true" in requests[-1], "".join(requests)
        assert "200 OK" in requests[-1]
        # kubectl now waits on its watch, and the object is there to wait for
        ts = kubectl.run("get", "widget", "f1", "-n", ns, "-o",
                         "jsonpath={.metadata.deletionTimestamp}").stdout
        assert ts, "the object went while its finalizer was set"
        assert proc.poll() is None, "kubectl delete returned while the finalizer was set"
        # the "controller": removes its finalizer, as a reconcile would
        kubectl.run("patch", "widget", "f1", "-n", ns, "--type=json", "-p",
                    '[{"op":"remove","path":"/metadata/finalizers"}]')
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "deleted" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert kubectl.run("get", "widget", "f1", "-n", ns, check=False).returncode != 0


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "widgets.spec").stdout
    assert "The colour of the widget." in out and "color" in out
    out = kubectl.run("explain", "baremetalhosts.spec.bmc").stdout
    assert "address" in out and "credentialsName" in out


def test_server_side_apply_and_diff(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    out = kubectl.apply(widget("s1", namespace=ns), "--server-side")
    assert "serverside-applied" in out
    got = json.loads(kubectl.run("get", "widget", "s1", "-n", ns, "-o", "json",
                                 "--show-managed-fields").stdout)
    managers = {m["manager"]: m for m in got["metadata"]["managedFields"]}
    assert managers["kubectl"]["operation"] == "Apply"
    same = kubectl.run("diff", "-f", "-", input_text=widget("s1", namespace=ns), check=False)
    assert same.returncode == 0, same.stdout + same.stderr
    changed = kubectl.run("diff", "-f", "-", input_text=widget("s1", color="blue",
                                                                namespace=ns), check=False)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "+  color: blue" in changed.stdout
    # diff is a dry run: nothing changed
    assert kubectl.run("get", "widget", "s1", "-n", ns, "-o",
                       "jsonpath={.spec.color}").stdout == "red"


def test_create_and_delete_namespace(kubectl: Kubectl) -> None:
    name = f"scratch-{_ns(kubectl)}"
    kubectl.run("create", "namespace", name)
    kubectl.apply(widget("inside", namespace=name))
    assert "Active" in kubectl.run("get", "namespace", name).stdout
    kubectl.run("delete", "namespace", name, "--timeout=60s")
    assert kubectl.run("get", "namespace", name, check=False).returncode != 0


def test_get_nodes_pods_events(kubectl: Kubectl) -> None:
    for resource in ("nodes", "pods", "events"):
        res = kubectl.run("get", resource, "-A")
        assert res.returncode == 0


def test_invalid_object_is_rejected_with_field_path(kubectl: Kubectl) -> None:
    ns = _ns(kubectl)
    res = kubectl.run("apply", "-f", "-", input_text=widget("bad", color="purple", size=20,
                                                            namespace=ns), check=False)
    assert res.returncode != 0
    assert "spec.color" in res.stderr and "Unsupported value" in res.stderr
    assert "spec.size" in res.stderr
    res = kubectl.run("apply", "-f", "-", input_text=widget("bad", namespace=ns) +
                      "  bogus: 1\n", check=False)
    assert res.returncode != 0
    assert 'unknown field "spec.bogus"' in res.stderr
    assert kubectl.run("get", "widget", "bad", "-n", ns, check=False).returncode != 0


BMH = """\
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata: {{name: {name}, namespace: {ns}}}
spec:
  bmc: {{address: "{address}", credentialsName: {name}-bmc-secret}}
"""


def test_a_bmc_address_scheme_metal3_does_not_parse_is_refused(kubectl: Kubectl) -> None:
    """Metal3's schemes apply (a bare host:port is IPMI; the idrac and ilo5
    ones); any other gets a 422 naming the field and the supported schemes."""
    ns = _ns(kubectl)
    for i, address in enumerate(("10.0.0.7:6230", "idrac-virtualmedia://10.0.0.8/redfish/v1/"
                                 "Systems/System.Embedded.1", "ilo5-redfish://10.0.0.9",
                                 "redfish-uefihttp+http://10.0.0.10:8000/redfish/v1/Systems/1")):
        kubectl.run("apply", "-f", "-", input_text=BMH.format(name=f"ok{i}", ns=ns,
                                                              address=address))
    res = kubectl.run("apply", "-f", "-", check=False, input_text=BMH.format(
        name="bad", ns=ns, address="ilo4://10.0.0.11"))
    assert res.returncode != 0
    assert "spec.bmc.address" in res.stderr and "ilo4://10.0.0.11" in res.stderr
    assert "idrac-virtualmedia" in res.stderr and "redfish-uefihttp" in res.stderr
    assert kubectl.run("get", "bmh", "bad", "-n", ns, check=False).returncode != 0


DRAIN_SITE = """\
apiVersion: v1
kind: Node
metadata: {{name: {node}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: acc-budget, namespace: {ns}}}
spec:
  minAvailable: 2
  selector: {{matchLabels: {{app: acc}}}}
"""
DRAIN_POD = """\
---
apiVersion: v1
kind: Pod
metadata: {{name: {pod}, namespace: {ns}, labels: {{app: acc}}}}
spec:
  nodeName: {node}
  containers: [{{name: c, image: "busybox:1"}}]
status:
  phase: Running
  conditions: [{{type: Ready, status: "True"}}]
"""


@pytest.mark.parametrize("kubectl", [27, 33], ids=["kubectl-1.27", "kubectl-1.33"],
                         indirect=True)
def test_drain_stops_at_a_disruption_budget_and_its_timeout(kubectl: Kubectl) -> None:
    """`kubectl drain` of a node whose two Ready pods a PDB (minAvailable: 2)
    protects prints the budget's refusal, gives up at its --timeout and exits
    non-zero (kubectl 1.27 and 1.33: the oldest and newest builds). A refusal
    with a Retry-After header would be retried silently inside client-go and
    drain would hang past its --timeout: the run's own subprocess limit
    (60 s) then fails the test."""
    ns = _ns(kubectl)
    node = f"acc-node-{ns}"
    kubectl.apply(DRAIN_SITE.format(node=node, ns=ns) + "".join(
        DRAIN_POD.format(pod=pod, node=node, ns=ns) for pod in ("p1", "p2")))
    kubectl.run("cordon", node)
    res = kubectl.run("drain", node, "--ignore-daemonsets", "--force", "--timeout=2s",
                      check=False)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "Cannot evict pod as it would violate the pod's disruption budget." in res.stderr, \
        res.stderr
    assert "global timeout reached: 2s" in res.stderr, res.stderr
    left = kubectl.run("get", "pods", "-n", ns, "-l", "app=acc", "-o", "name").stdout.split()
    assert sorted(left) == ["pod/p1", "pod/p2"]
