"""The state-item executors on an emulated host (tmp root) and on a real host
(a tmp root, harmless processes, packages and services through a recording
runner): check → actions, apply → changed, and changed=False the second time."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.agent import executors, kubeadm
from racksmith.agent.executors import ExecContext, ItemError
from racksmith.agent.host import CommandResult, EmulatedHost, HostError, RealHost
from racksmith.controlplane.jointoken import JOIN_FILE, ca_cert_hash, join_file, new_join
from racksmith.controlplane.pki import new_ca
from racksmith.kinds.cluster import StateItem

NODE = "m-0"


def item(type_: str, item_name: str = "it", item_phase: str = "configuration", /,
         **params: Any) -> StateItem:
    return StateItem.model_validate({"name": item_name, "phase": item_phase, "type": type_,
                                     "params": params})


class FakeNodes:
    """NodeControl double: one Node's spec.unschedulable (None: no Node)."""

    def __init__(self, unschedulable: bool | None) -> None:
        self.unschedulable = unschedulable
        self.patches: list[bool] = []

    async def is_unschedulable(self, node: str) -> bool | None:
        assert node == NODE
        return self.unschedulable

    async def set_unschedulable(self, node: str, value: bool) -> None:
        self.patches.append(value)
        self.unschedulable = value


class Recorder:
    """A Runner that records argv and answers from a table (argv prefix → result)."""

    def __init__(self, answers: Mapping[tuple[str, ...], CommandResult] | None = None) -> None:
        self.calls: list[tuple[list[str], dict[str, str] | None]] = []
        self.answers = dict(answers or {})

    async def __call__(self, argv: Sequence[str],
                       env: Mapping[str, str] | None) -> CommandResult:
        self.calls.append((list(argv), dict(env) if env else None))
        for prefix, result in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix:
                return result
        return CommandResult(0)


@pytest.fixture
def emulated(tmp_path: Path) -> ExecContext:
    return ExecContext(host=EmulatedHost(tmp_path), node_name=NODE, server="https://api:6443")


def real_ctx(root: Path, runner: Recorder | None = None, **kw: Any) -> ExecContext:
    host = RealHost(root, runner) if runner is not None else RealHost(root)
    return ExecContext(host=host, node_name=NODE, **kw)


def is_empty(directory: Path) -> bool:
    return not any(directory.iterdir())


# --- file ------------------------------------------------------------------------------


async def test_file_written_with_mode_then_unchanged(emulated: ExecContext,
                                                     tmp_path: Path) -> None:
    it = item("file", path="/etc/demo/a.conf", content="hello\n", mode="0600")
    assert await executors.apply(it, emulated) is True
    target = tmp_path / "etc/demo/a.conf"
    assert target.read_text() == "hello\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert await executors.apply(it, emulated) is False


async def test_file_default_mode_and_mode_only_change(emulated: ExecContext,
                                                      tmp_path: Path) -> None:
    it = item("file", path="/etc/b", content="x")
    assert await executors.apply(it, emulated) is True
    target = tmp_path / "etc/b"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    os.chmod(target, 0o600)
    actions = await executors.check(it, emulated)
    assert [a.text for a in actions] == ["chmod 0644 /etc/b"]
    assert await executors.apply(it, emulated) is True
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    target.write_text("changed by hand")
    assert [a.text for a in await executors.check(it, emulated)] == [
        "write /etc/b (1 bytes, mode 0644)"]
    assert await executors.apply(it, emulated) is True
    assert target.read_text() == "x"


@pytest.mark.parametrize("path", ["etc/relative", "/etc/../../escape", ""])
async def test_file_path_must_be_absolute_inside_root(emulated: ExecContext, tmp_path: Path,
                                                      path: str) -> None:
    with pytest.raises((HostError, ItemError)):
        await executors.apply(item("file", path=path, content="x"), emulated)
    assert not (tmp_path.parent / "escape").exists()


async def test_file_rejects_bad_params(emulated: ExecContext) -> None:
    with pytest.raises(ItemError, match="content"):
        await executors.apply(item("file", path="/a"), emulated)
    with pytest.raises(ItemError, match="mode"):
        await executors.apply(item("file", path="/a", content="", mode="rw"), emulated)


async def test_real_file_owner_checked_and_set(tmp_path: Path) -> None:
    ctx = real_ctx(tmp_path)
    import grp
    import pwd
    me = f"{pwd.getpwuid(os.getuid()).pw_name}:{grp.getgrgid(os.getgid()).gr_name}"
    it = item("file", path="/etc/owned", content="x", owner=me)
    texts = [a.text for a in await executors.check(it, ctx)]
    assert texts == ["write /etc/owned (1 bytes, mode 0644)", f"chown {me} /etc/owned"]
    assert await executors.apply(it, ctx) is True
    assert await executors.apply(it, ctx) is False


# --- package ---------------------------------------------------------------------------


async def test_emulated_package_json(emulated: ExecContext, tmp_path: Path) -> None:
    it = item("package", name="containerd", version="1.7.2")
    assert await executors.apply(it, emulated) is True
    state = json.loads((tmp_path / "var/lib/racksmith/emulated/packages.json").read_text())
    assert state == {"containerd": {"version": "1.7.2"}}
    assert await executors.apply(it, emulated) is False
    upgrade = item("package", name="containerd", version="1.7.3")
    assert await executors.apply(upgrade, emulated) is True
    anyver = item("package", name="containerd")
    assert await executors.apply(anyver, emulated) is False


async def test_real_package_through_dpkg_and_apt(tmp_path: Path) -> None:
    missing = Recorder({("dpkg-query",): CommandResult(1, "", "no packages found")})
    ctx = real_ctx(tmp_path, missing)
    it = item("package", name="kubelet", version="1.30.1-1.1")
    actions = await executors.check(it, ctx)
    assert [a.text for a in actions] == [
        "DEBIAN_FRONTEND=noninteractive apt-get install -y kubelet=1.30.1-1.1"]
    assert await executors.apply(it, ctx) is True
    assert missing.calls[-1] == (["apt-get", "install", "-y", "kubelet=1.30.1-1.1"],
                                 {"DEBIAN_FRONTEND": "noninteractive"})
    installed = Recorder({("dpkg-query",): CommandResult(0, "installed 1.30.1-1.1")})
    assert await executors.apply(it, real_ctx(tmp_path, installed)) is False
    assert [c[0][0] for c in installed.calls] == ["dpkg-query"]


async def test_real_package_install_failure_is_an_error(tmp_path: Path) -> None:
    runner = Recorder({("dpkg-query",): CommandResult(1),
                       ("apt-get",): CommandResult(100, "", "E: Unable to locate package")})
    with pytest.raises(HostError, match="Unable to locate package"):
        await executors.apply(item("package", name="nope"), real_ctx(tmp_path, runner))


# --- service ---------------------------------------------------------------------------


async def test_emulated_service_json(emulated: ExecContext, tmp_path: Path) -> None:
    it = item("service", name="kubelet", enabled=True, running=True)
    texts = [a.text for a in await executors.check(it, emulated)]
    assert texts == [
        "record service kubelet enable in /var/lib/racksmith/emulated/services.json",
        "record service kubelet start in /var/lib/racksmith/emulated/services.json"]
    assert await executors.apply(it, emulated) is True
    state = json.loads((tmp_path / "var/lib/racksmith/emulated/services.json").read_text())
    assert state == {"kubelet": {"enabled": True, "running": True}}
    assert await executors.apply(it, emulated) is False
    stopped = item("service", name="kubelet", enabled=True, running=False)
    assert [a.text for a in await executors.check(stopped, emulated)] == [
        "record service kubelet stop in /var/lib/racksmith/emulated/services.json"]


async def test_real_service_through_systemctl(tmp_path: Path) -> None:
    runner = Recorder({("systemctl", "is-enabled"): CommandResult(1),
                       ("systemctl", "is-active"): CommandResult(0)})
    ctx = real_ctx(tmp_path, runner)
    assert await executors.apply(item("service", name="containerd"), ctx) is True
    assert runner.calls[-1][0] == ["systemctl", "enable", "containerd"]
    assert ["systemctl", "start", "containerd"] not in [c[0] for c in runner.calls]


# --- command ---------------------------------------------------------------------------


async def test_emulated_command_is_journaled_then_creates_touched(emulated: ExecContext,
                                                                  tmp_path: Path) -> None:
    it = item("command", command=["systemctl", "restart", "kubelet-$(NODE_NAME)"],
              creates="/var/lib/done-$(NODE_NAME)")
    assert await executors.apply(it, emulated) is True
    journal = (tmp_path / "var/log/racksmith-commands.log").read_text().splitlines()
    assert journal == [f"systemctl restart kubelet-{NODE}"]
    assert (tmp_path / f"var/lib/done-{NODE}").exists()
    assert await executors.apply(it, emulated) is False
    assert len((tmp_path / "var/log/racksmith-commands.log").read_text().splitlines()) == 1


async def test_emulated_command_unless_counts_journaled_as_done(emulated: ExecContext,
                                                                tmp_path: Path) -> None:
    it = item("command", command="echo hi > /etc/x", unless=["test", "-e", "/etc/x"])
    assert await executors.apply(it, emulated) is True
    assert not (tmp_path / "etc/x").exists()  # never run, only journaled
    assert await executors.apply(it, emulated) is False


async def test_emulated_kubectl_uncordon_goes_through_the_api(emulated: ExecContext) -> None:
    nodes = FakeNodes(unschedulable=True)
    emulated.nodes = nodes
    it = item("command", "uncordon", "uncordon", command=["kubectl", "uncordon", "$(NODE_NAME)"])
    assert [a.text for a in await executors.check(it, emulated)] == [
        f"patch Node {NODE} spec.unschedulable=false (kubectl uncordon)"]
    assert await executors.apply(it, emulated) is True
    assert nodes.patches == [False]
    assert await executors.apply(it, emulated) is False
    cordon = item("command", command="kubectl cordon $(NODE_NAME)")
    assert await executors.apply(cordon, emulated) is True
    assert nodes.unschedulable is True


async def test_emulated_kubectl_honours_creates(emulated: ExecContext, tmp_path: Path) -> None:
    """Uncordon once per host life: a node cordoned later (maintenance) stays cordoned."""
    nodes = FakeNodes(unschedulable=True)
    emulated.nodes = nodes
    guard = "/var/lib/racksmith/uncordoned"
    it = item("command", "uncordon", "uncordon", command=["kubectl", "uncordon", "$(NODE_NAME)"],
              creates=guard)
    assert [a.text for a in await executors.check(it, emulated)] == [
        f"patch Node {NODE} spec.unschedulable=false (kubectl uncordon)", f"create {guard}"]
    assert await executors.apply(it, emulated) is True
    assert nodes.patches == [False]
    assert (tmp_path / guard.lstrip("/")).exists()
    nodes.unschedulable = True  # LCM cordons the node for maintenance
    assert await executors.apply(it, emulated) is False
    assert nodes.patches == [False] and nodes.unschedulable is True


async def test_real_host_kubectl_uncordon_goes_through_the_api_once(tmp_path: Path) -> None:
    """A real host needs no kubeconfig: the built-in patches the Node through
    the agent's API access, runs no process, and touches its guard."""
    runner = Recorder()
    nodes = FakeNodes(unschedulable=True)
    ctx = real_ctx(tmp_path, runner, nodes=nodes)
    it = item("command", "uncordon", "uncordon", command=["kubectl", "uncordon", "$(NODE_NAME)"],
              creates="/var/lib/racksmith/uncordoned")
    assert await executors.apply(it, ctx) is True
    assert nodes.patches == [False] and runner.calls == []
    assert (tmp_path / "var/lib/racksmith/uncordoned").exists()
    nodes.unschedulable = True
    assert await executors.apply(it, ctx) is False
    assert nodes.unschedulable is True


async def test_emulated_kubectl_creates_on_an_uncordoned_node(emulated: ExecContext,
                                                             tmp_path: Path) -> None:
    nodes = FakeNodes(unschedulable=False)
    emulated.nodes = nodes
    it = item("command", command="kubectl uncordon $(NODE_NAME)", creates="/run/done")
    assert await executors.apply(it, emulated) is True  # only the guard file
    assert nodes.patches == [] and (tmp_path / "run/done").exists()
    assert await executors.apply(it, emulated) is False


async def test_emulated_kubectl_failure_does_not_create(emulated: ExecContext,
                                                        tmp_path: Path) -> None:
    emulated.nodes = FakeNodes(unschedulable=None)
    it = item("command", command=["kubectl", "uncordon", NODE], creates="/run/done")
    with pytest.raises(HostError, match="not registered"):
        await executors.apply(it, emulated)
    assert not (tmp_path / "run/done").exists()


async def test_emulated_kubectl_without_node_fails(emulated: ExecContext) -> None:
    emulated.nodes = FakeNodes(unschedulable=None)
    with pytest.raises(HostError, match="not registered"):
        await executors.apply(item("command", command=["kubectl", "uncordon", NODE]), emulated)


async def test_real_command_runs_for_real(tmp_path: Path) -> None:
    ctx = real_ctx(tmp_path)
    marker = tmp_path / "made"
    it = item("command", command=["sh", "-c", f"echo $0 > {marker}", "$(NODE_NAME)"],
              creates="/made")
    assert await executors.apply(it, ctx) is True
    assert marker.read_text() == f"{NODE}\n"
    assert await executors.apply(it, ctx) is False  # creates guard


async def test_real_command_unless_guard(tmp_path: Path) -> None:
    ctx = real_ctx(tmp_path)
    marker = tmp_path / "ran"
    skip = item("command", command=["touch", str(marker)], unless=["true"])
    assert await executors.apply(skip, ctx) is False
    assert not marker.exists()
    run = item("command", command=["touch", str(marker)], unless="false")
    assert await executors.apply(run, ctx) is True
    assert marker.exists()


async def test_real_command_nonzero_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="exit code 3: boom"):
        await executors.apply(item("command", command="echo boom >&2; exit 3"),
                              real_ctx(tmp_path))


async def test_real_command_missing_program_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="cannot run"):
        await executors.apply(item("command", command=["/nonexistent/prog"]),
                              real_ctx(tmp_path))


# --- kubeadm ---------------------------------------------------------------------------

CLUSTER = {
    "name": "demo", "release": "1.0.0", "kubernetesVersion": "1.30.1",
    "apiServerVIP": "10.0.0.100", "keepalived": True, "podSubnet": "10.233.0.0/16",
    "serviceSubnet": "10.96.0.0/12", "controlPlaneCIDRs": ["10.0.0.0/24"],
    "workloadPlaneCIDRs": [], "roles": ["node"],
}


async def test_emulated_kubeadm_writes_config_and_kubelet_conf(emulated: ExecContext,
                                                               tmp_path: Path) -> None:
    started: list[bool] = []

    async def on_conf() -> None:
        started.append((tmp_path / "etc/kubernetes/kubelet.conf").exists())

    emulated.on_kubelet_conf = on_conf
    it = item("kubeadm", "kubeadm", "join", phase="join", cluster=CLUSTER)
    assert await executors.apply(it, emulated) is True
    assert started == [True]
    docs = list(yaml.safe_load_all((tmp_path / "etc/kubernetes/kubeadm-join.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ClusterConfiguration", "JoinConfiguration", "ClusterContext"]
    assert docs[0]["kubernetesVersion"] == "v1.30.1"
    assert docs[0]["controlPlaneEndpoint"] == "10.0.0.100:6443"
    assert docs[1]["nodeRegistration"]["name"] == NODE
    assert kubeadm.read_cluster_context(emulated.host)["controlPlaneCIDRs"] == ["10.0.0.0/24"]
    conf = yaml.safe_load((tmp_path / "etc/kubernetes/kubelet.conf").read_text())
    assert conf["clusters"][0]["cluster"]["server"] == "https://api:6443"
    assert await executors.apply(it, emulated) is False
    assert started == [True]


async def test_real_kubeadm_runs_unless_kubelet_conf(tmp_path: Path) -> None:
    runner = Recorder()
    ctx = real_ctx(tmp_path, runner)
    it = item("kubeadm", "kubeadm", "join", phase="init", cluster=CLUSTER)
    texts = [a.text for a in await executors.check(it, ctx)]
    config = tmp_path / "etc/kubernetes/kubeadm-init.yaml"
    assert texts[1] == f"run kubeadm init --config {config}"
    assert await executors.apply(it, ctx) is True
    assert runner.calls == [(["kubeadm", "init", "--config", str(config)], None)]
    (tmp_path / "etc/kubernetes/kubelet.conf").write_text("joined")
    assert await executors.apply(it, ctx) is False
    assert len(runner.calls) == 1


async def test_real_kubeadm_joins_with_the_user_datas_token(tmp_path: Path) -> None:
    """The join file the user data wrote goes into kubeadm's JoinConfiguration
    (discovery by bootstrap token, the CA pin), under the item's own
    configuration; the config file stays 0600, and no action text shows the
    token."""
    join = new_join(datetime(2026, 12, 6, tzinfo=UTC))
    pin = ca_cert_hash(new_ca("kubernetes").cert_pem)
    target = tmp_path / JOIN_FILE.lstrip("/")
    target.parent.mkdir(parents=True)
    target.write_bytes(join_file(join, pin, "10.0.0.100:6443", control_plane=False))
    runner = Recorder()
    ctx = real_ctx(tmp_path, runner)
    it = item("kubeadm", "kubeadm", "join", phase="join", cluster=CLUSTER,
              configuration={"nodeRegistration": {"criSocket": "unix:///run/x.sock"}})
    texts = [a.text for a in await executors.check(it, ctx)]
    assert not any(join.token in t for t in texts)
    assert await executors.apply(it, ctx) is True
    config = tmp_path / "etc/kubernetes/kubeadm-join.yaml"
    assert config.stat().st_mode & 0o777 == 0o600
    doc = list(yaml.safe_load_all(config.read_text()))[1]
    assert doc["kind"] == "JoinConfiguration"
    assert doc["discovery"]["bootstrapToken"] == {
        "token": join.token, "apiServerEndpoint": "10.0.0.100:6443", "caCertHashes": [pin]}
    assert doc["nodeRegistration"]["criSocket"] == "unix:///run/x.sock"
    assert "controlPlane" not in doc  # a worker: no certificate key
    target.write_text("{not: yaml")
    with pytest.raises(executors.ItemError) as failed:
        await executors.check(it, ctx)
    assert join.token not in str(failed.value)


async def test_kubeadm_params_checked(emulated: ExecContext) -> None:
    with pytest.raises(ItemError, match="phase"):
        await executors.apply(item("kubeadm", phase="upgrade", cluster={}), emulated)
    with pytest.raises(ItemError, match="cluster"):
        await executors.apply(item("kubeadm", phase="join"), emulated)


# --- every item, twice; dry runs -------------------------------------------------------


def release_items() -> list[StateItem]:
    return [
        item("file", "racksmith-netplan", path="/etc/netplan/60-racksmith.yaml",
             content="network: {version: 2}\n", mode="0600", owner="root"),
        item("package", "containerd", name="containerd", version="1.7.2"),
        item("package", "kubelet", name="kubelet", version="1.30.1"),
        item("service", "containerd-running", name="containerd"),
        item("command", "sysctl", command=["sysctl", "--system"], creates="/etc/sysctl.done"),
        item("kubeadm", "kubeadm-join", "join", phase="join", cluster=CLUSTER),
        item("command", "uncordon", "uncordon",
             command=["kubectl", "uncordon", "$(NODE_NAME)"]),
    ]


async def test_every_item_twice_on_emulated_host_changes_nothing_the_second_time(
        emulated: ExecContext) -> None:
    emulated.nodes = FakeNodes(unschedulable=True)
    first = [await executors.apply(i, emulated) for i in release_items()]
    assert first == [True] * len(first)
    second = [await executors.apply(i, emulated) for i in release_items()]
    assert second == [False] * len(second)


async def test_dry_run_lists_actions_and_changes_nothing(tmp_path: Path) -> None:
    ctx = ExecContext(host=EmulatedHost(tmp_path), node_name=NODE, server="https://api",
                      nodes=FakeNodes(unschedulable=None), dry_run=True)
    plans = {i.name: [a.text for a in await executors.check(i, ctx)] for i in release_items()}
    assert plans["racksmith-netplan"] == [
        "write /etc/netplan/60-racksmith.yaml (22 bytes, mode 0600)"]
    assert plans["containerd"] == [
        "record package containerd=1.7.2 in /var/lib/racksmith/emulated/packages.json"]
    assert plans["sysctl"] == [
        "journal sysctl --system to /var/log/racksmith-commands.log, then create "
        "/etc/sysctl.done"]
    assert plans["kubeadm-join"][1].startswith("write /etc/kubernetes/kubelet.conf")
    assert plans["uncordon"] == [f"patch Node {NODE} spec.unschedulable=false (kubectl uncordon)"]
    assert is_empty(tmp_path)


async def test_real_dry_run_starts_no_process(tmp_path: Path) -> None:
    runner = Recorder()
    ctx = real_ctx(tmp_path, runner, dry_run=True)
    it = item("command", command=["touch", "/x"], unless=["test", "-e", "/x"])
    assert [a.text for a in await executors.check(it, ctx)] == [
        "unless test -e /x exits 0: run touch /x"]
    assert runner.calls == []


async def test_emulated_symlink_out_of_root_refused(emulated: ExecContext,
                                                    tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "etc").symlink_to(outside)
    with pytest.raises(HostError, match="outside"):
        await executors.apply(item("file", path="/etc/x", content="x"), emulated)
    assert not (outside / "x").exists()


def test_kubeadm_control_plane_endpoint_is_the_vip_and_the_cluster_port() -> None:
    """``controlPlaneEndpoint`` = spec.apiServer.vip and spec.apiServer.port
    (the endpoint the Cluster controller writes into the admin kubeconfig)."""
    docs = list(yaml.safe_load_all(kubeadm.render_config(
        "init", {**CLUSTER, "apiServerPort": 7443}, NODE)))
    assert docs[0]["controlPlaneEndpoint"] == "10.0.0.100:7443"
    assert (docs[0]["certificatesDir"], docs[0]["encryptionAlgorithm"]) == (
        "/etc/kubernetes/pki", "ECDSA-P256")


def test_kubeadm_documents_carry_only_fields_v1beta4_publishes() -> None:
    """Every field of every document we write for kubeadm is one kubeadm
    v1beta4 publishes (kubeadm_fields, read off its types)."""
    from racksmith.agent.kubeadm_fields import unknown_fields

    full = {**CLUSTER, "apiServerPort": 6443, "roles": ["master", "etcd"]}
    join = {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef",
                                             "apiServerEndpoint": "10.0.0.100:6443",
                                             "caCertHashes": ["sha256:00"]}},
            "controlPlane": {"localAPIEndpoint": {"advertiseAddress": "10.0.0.11",
                                                  "bindPort": 6443},
                             "certificateKey": "00" * 32}}
    for phase, extra in (("init", {"certificateKey": "00" * 32}), ("join", join)):
        docs = list(yaml.safe_load_all(kubeadm.render_config(phase, full, NODE, extra)))
        for doc in docs[:2]:
            assert doc["apiVersion"] == "kubeadm.k8s.io/v1beta4"
            assert unknown_fields(doc) == [], doc


async def test_a_kubeadm_field_v1beta4_does_not_publish_fails_the_item(
        emulated: ExecContext) -> None:
    it = item("kubeadm", "kubeadm", "join", phase="init", cluster=CLUSTER,
              configuration={"nodeRegistration": {"nmae": "typo"}, "bogus": 1})
    with pytest.raises(executors.ItemError) as raised:
        await executors.apply(it, emulated)
    assert "InitConfiguration.nodeRegistration.nmae" in str(raised.value)
    assert "InitConfiguration.bogus" in str(raised.value)


# --- file reload and the API VIP's kubeadm endpoint -------------------------------------


async def test_real_file_reload_runs_once_per_content_and_after_a_crash(tmp_path: Path
                                                                       ) -> None:
    """``reload``: the service is reloaded when the file changed; an agent
    killed between the write and the reload reloads on its next pass; an
    unchanged, reloaded file reloads nothing."""
    runner = Recorder()
    ctx = real_ctx(tmp_path, runner)
    reloads = [["systemctl", "reload-or-restart", "haproxy"]]
    cfg = item("file", path="/etc/haproxy/haproxy.cfg", content="one\n", reload="haproxy")
    assert await executors.apply(cfg, ctx) is True
    assert [c[0] for c in runner.calls] == reloads
    assert await executors.apply(cfg, ctx) is False
    # the write happened, then the agent died before reloading
    new = item("file", path="/etc/haproxy/haproxy.cfg", content="two\n", reload="haproxy")
    (tmp_path / "etc/haproxy/haproxy.cfg").write_text("two\n")
    texts = [a.text for a in await executors.check(new, ctx)]
    assert texts == ["systemctl reload-or-restart haproxy"]
    assert await executors.apply(new, ctx) is True
    assert [c[0] for c in runner.calls] == reloads * 2
    assert await executors.apply(new, ctx) is False
    markers = list((tmp_path / executors.RELOADED_DIR.lstrip("/")).iterdir())
    assert len(markers) == 1 and markers[0].stat().st_mode & 0o777 == 0o600


async def test_real_file_reload_failure_fails_the_item_and_is_retried(tmp_path: Path) -> None:
    runner = Recorder({("systemctl", "reload-or-restart"): CommandResult(1, "", "bad config")})
    ctx = real_ctx(tmp_path, runner)
    cfg = item("file", path="/etc/keepalived/keepalived.conf", content="x\n",
               reload="keepalived")
    with pytest.raises(HostError, match="bad config"):
        await executors.apply(cfg, ctx)
    runner.answers.clear()
    assert await executors.apply(cfg, ctx) is True  # the file is in place; the reload is due


async def test_emulated_file_reload_records_the_service_running(emulated: ExecContext,
                                                                tmp_path: Path) -> None:
    cfg = item("file", path="/etc/keepalived/keepalived.conf", content="x\n",
               reload="keepalived")
    assert await executors.apply(cfg, emulated) is True
    services = json.loads((tmp_path / "var/lib/racksmith/emulated/services.json").read_text())
    assert services["keepalived"]["running"] is True
    assert await executors.apply(cfg, emulated) is False


async def test_a_control_plane_machine_behind_the_vip_gets_its_local_api_endpoint(
        tmp_path: Path) -> None:
    cluster = {**CLUSTER, "roles": ["master", "node"], "advertiseAddress": "10.0.0.11",
               "apiServerBindPort": 6444, "initNode": "other"}
    ctx = real_ctx(tmp_path, Recorder())
    await executors.apply(item("kubeadm", "kubeadm", "join", phase="join", cluster=cluster),
                          ctx)
    doc = list(yaml.safe_load_all((tmp_path / "etc/kubernetes/kubeadm-join.yaml")
                                  .read_text()))[1]
    assert doc["controlPlane"] == {"localAPIEndpoint": {"advertiseAddress": "10.0.0.11",
                                                        "bindPort": 6444}}
    (tmp_path / "etc/kubernetes/kubelet.conf").unlink(missing_ok=True)
    init = {**cluster, "initNode": NODE}
    await executors.apply(item("kubeadm", "kubeadm", "join", phase="join", cluster=init), ctx)
    doc = list(yaml.safe_load_all((tmp_path / "etc/kubernetes/kubeadm-init.yaml")
                                  .read_text()))[1]
    assert doc["kind"] == "InitConfiguration"
    assert doc["localAPIEndpoint"] == {"advertiseAddress": "10.0.0.11", "bindPort": 6444}
