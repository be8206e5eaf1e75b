"""kubelet.conf with and without the kubelet's credentials: what the emulated
kubeadm renders, when the kubeadm item (re)writes it, and how ``AgentKube``
moves its node side (Node, Lease, pods, Volumes) to the cluster's API —
reached at the endpoint's loopback image — once the file carries them, and
back when they go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration

from racksmith.agent import executors, kubeadm
from racksmith.agent.executors import ExecContext
from racksmith.agent.host import EmulatedHost
from racksmith.agent.kube import AgentKube, ClusterUnavailable
from racksmith.controlplane.pki import issue_client, new_ca
from racksmith.kinds.cluster import StateItem
from racksmith.loopback import LoopbackMap

NODE = "node-a"
CLUSTER: dict[str, Any] = {
    "name": "demo", "kubernetesVersion": "1.30.1", "apiServerVIP": "10.0.0.100",
    "apiServerPort": 6443, "controlPlaneCIDRs": ["10.0.0.0/24"], "roles": ["node"],
}
MANAGEMENT = "https://management:6443"
CA = new_ca("kubernetes")


def give_credentials(root: Path, node: str = NODE) -> None:
    """What the Machine controller's user data writes (contracts)."""
    pair = issue_client(CA, f"system:node:{node}", ["system:nodes"])
    ca = root / kubeadm.CLUSTER_CA.lstrip("/")
    ca.parent.mkdir(parents=True, exist_ok=True)
    ca.write_bytes(CA.cert_pem)
    pem = root / kubeadm.KUBELET_CLIENT.lstrip("/")
    pem.parent.mkdir(parents=True, exist_ok=True)
    pem.write_bytes(pair.cert_pem + pair.key_pem)


def kubeadm_item() -> StateItem:
    return StateItem.model_validate({"name": "kubeadm", "phase": "join", "type": "kubeadm",
                                     "params": {"phase": "join", "cluster": CLUSTER}})


# --- rendering and reading ------------------------------------------------------------


def test_without_credentials_kubelet_conf_names_the_node_and_no_credentials() -> None:
    for credentials in (False, True):
        cluster = CLUSTER if not credentials else {**CLUSTER, "apiServerVIP": ""}
        conf = yaml.safe_load(kubeadm.render_kubelet_conf(cluster, NODE, MANAGEMENT,
                                                          credentials=credentials))
        assert conf["clusters"] == [{"name": "demo", "cluster": {"server": MANAGEMENT}}]
        assert conf["users"] == [{"name": f"system:node:{NODE}", "user": {}}]
        assert conf["current-context"] == f"system:node:{NODE}@demo"
        parsed = kubeadm.parse_kubelet_conf(yaml.safe_dump(conf))
        assert parsed is not None and parsed.server == MANAGEMENT
        assert not parsed.has_credentials


def test_with_credentials_kubelet_conf_is_for_the_clusters_endpoint() -> None:
    text = kubeadm.render_kubelet_conf(CLUSTER, NODE, MANAGEMENT, credentials=True)
    conf = yaml.safe_load(text)
    assert conf["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.100:6443",
        "certificate-authority": "/etc/kubernetes/pki/ca.crt"}
    assert conf["users"][0]["user"] == {
        "client-certificate": "/var/lib/kubelet/pki/kubelet-client-current.pem",
        "client-key": "/var/lib/kubelet/pki/kubelet-client-current.pem"}
    parsed = kubeadm.parse_kubelet_conf(text.encode())
    assert parsed == kubeadm.KubeletConf(
        server="https://10.0.0.100:6443", certificate_authority=kubeadm.CLUSTER_CA,
        client_certificate=kubeadm.KUBELET_CLIENT, client_key=kubeadm.KUBELET_CLIENT)
    assert parsed.has_credentials


def test_the_endpoint_comes_from_the_cluster_context() -> None:
    assert kubeadm.cluster_endpoint({"apiServerVIP": "10.0.0.5"}) == "https://10.0.0.5:6443"
    assert kubeadm.cluster_endpoint({"apiServerVIP": "fd00::5", "apiServerPort": 8443}) == \
        "https://[fd00::5]:8443"
    assert kubeadm.cluster_endpoint({"apiServerVIP": "api.example"}) == \
        "https://api.example:6443"
    assert kubeadm.cluster_endpoint({}) is None


@pytest.mark.parametrize("raw", [None, b"", b"joined", b"- a list", b"{unclosed",
                                 b"clusters: []\nusers: []\ncontexts: []\n"])
def test_what_is_not_a_kubeconfig_names_no_api(raw: bytes | None) -> None:
    assert kubeadm.parse_kubelet_conf(raw) is None


def test_an_embedded_ca_counts_as_the_real_kubeadm_writes_it() -> None:
    parsed = kubeadm.parse_kubelet_conf(yaml.safe_dump({
        "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443",
                                               "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "u", "user": {"client-certificate": kubeadm.KUBELET_CLIENT}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "current-context": "c"}))
    assert parsed is not None and parsed.has_credentials
    assert parsed.client_key == kubeadm.KUBELET_CLIENT  # the same file holds the key


# --- the kubeadm item -----------------------------------------------------------------


@pytest.fixture
def ctx(tmp_path: Path) -> ExecContext:
    return ExecContext(host=EmulatedHost(tmp_path), node_name=NODE, server=MANAGEMENT)


async def test_the_kubeadm_item_writes_credentials_when_the_host_has_them(
        ctx: ExecContext, tmp_path: Path) -> None:
    give_credentials(tmp_path)
    assert await executors.apply(kubeadm_item(), ctx) is True
    conf = kubeadm.parse_kubelet_conf(ctx.host.read_file(kubeadm.KUBELET_CONF))
    assert conf is not None and conf.has_credentials
    assert conf.server == "https://10.0.0.100:6443"
    assert ctx.host.file_mode(kubeadm.KUBELET_CONF) == 0o600
    assert await executors.apply(kubeadm_item(), ctx) is False  # equal: nothing to do


async def test_kubelet_conf_without_credentials_is_rewritten_once_they_exist(
        ctx: ExecContext, tmp_path: Path) -> None:
    synced: list[bytes | None] = []

    async def on_conf() -> None:
        synced.append(ctx.host.read_file(kubeadm.KUBELET_CONF))

    ctx.on_kubelet_conf = on_conf
    assert await executors.apply(kubeadm_item(), ctx) is True
    before = ctx.host.read_file(kubeadm.KUBELET_CONF)
    assert synced == [before]
    assert await executors.apply(kubeadm_item(), ctx) is False  # no credentials: left alone

    give_credentials(tmp_path)
    actions = await executors.check(kubeadm_item(), ctx)
    assert [a.text.split(" (")[0] for a in actions] == [
        "rewrite /etc/kubernetes/kubelet.conf with the node's client certificate"]
    assert await executors.apply(kubeadm_item(), ctx) is True
    after = ctx.host.read_file(kubeadm.KUBELET_CONF)
    assert after != before and synced == [before, after]
    parsed = kubeadm.parse_kubelet_conf(after)
    assert parsed is not None and parsed.has_credentials
    assert await executors.apply(kubeadm_item(), ctx) is False


async def test_a_kubelet_conf_is_kept_when_the_credentials_are_missing(
        ctx: ExecContext, tmp_path: Path) -> None:
    ctx.host.write_file(kubeadm.KUBELET_CONF, b"written by someone else", 0o600)
    (tmp_path / kubeadm.CLUSTER_CA.lstrip("/")).parent.mkdir(parents=True)
    (tmp_path / kubeadm.CLUSTER_CA.lstrip("/")).write_bytes(CA.cert_pem)  # the CA alone
    actions = await executors.check(kubeadm_item(), ctx)
    assert [a.text for a in actions if "kubelet.conf" in a.text] == []
    await executors.apply(kubeadm_item(), ctx)
    assert ctx.host.read_file(kubeadm.KUBELET_CONF) == b"written by someone else"


# --- AgentKube's node side ------------------------------------------------------------


@pytest.fixture
async def management() -> AsyncIterator[ApiClient]:
    client = ApiClient(configuration=Configuration(host="https://127.0.0.1:9"))
    try:
        yield client
    finally:
        await client.close()


async def test_the_node_side_moves_to_the_cluster_once_kubelet_conf_has_credentials(
        management: ApiClient, tmp_path: Path) -> None:
    root = tmp_path / "host"
    host = EmulatedHost(root)
    network = LoopbackMap(tmp_path / "network.json")
    kube = AgentKube(management, host=host, network=network)
    try:
        assert await kube.node_client() is kube.client  # no kubelet.conf: management
        host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
            CLUSTER, NODE, MANAGEMENT).encode(), 0o600)
        assert await kube.node_client() is kube.client  # no credentials: management
        assert kube.generation == 0

        give_credentials(root)  # the user data's files, before kubeadm rewrote kubelet.conf
        with pytest.raises(ClusterUnavailable):  # no node side until it does
            await kube.node_client()
        assert kube.generation == 1
        host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
            CLUSTER, NODE, MANAGEMENT, credentials=True).encode(), 0o600)
        cluster = await kube.node_client()
        assert cluster is not kube.client and kube.uses_cluster
        assert kube.generation == 2
        image = network.lookup("10.0.0.100")
        assert image is not None and image.startswith("127.")
        assert cluster.api_client.configuration.host == f"https://{image}:6443"
        assert cluster.api_client.configuration.cert_file == str(
            root / "var/lib/kubelet/pki/kubelet-client-current.pem")
        assert await kube.node_client() is cluster  # unchanged: the same client
        assert kube.generation == 2

        give_credentials(root)  # a renewed certificate: a new client
        renewed = await kube.node_client()
        assert renewed is not cluster and kube.generation == 3

        host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
            CLUSTER, NODE, MANAGEMENT).encode(), 0o600)
        with pytest.raises(ClusterUnavailable):  # credentials, but not in kubelet.conf
            await kube.node_client()
        for rel in (kubeadm.CLUSTER_CA, kubeadm.KUBELET_CLIENT):
            (root / rel.lstrip("/")).unlink()
        assert await kube.node_client() is kube.client  # none at all: management
        assert kube.generation == 5 and not kube.uses_cluster
    finally:
        await kube.close()


async def test_unusable_credentials_make_node_calls_wait_and_never_show_the_key(
        management: ApiClient, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    host = EmulatedHost(tmp_path)
    kube = AgentKube(management, host=host)
    try:
        give_credentials(tmp_path)
        pem = tmp_path / kubeadm.KUBELET_CLIENT.lstrip("/")
        key_pem = pem.read_bytes().split(b"-----END CERTIFICATE-----\n", 1)[1]
        pem.write_bytes(key_pem)  # the key without its certificate
        host.write_file(kubeadm.KUBELET_CONF, kubeadm.render_kubelet_conf(
            CLUSTER, NODE, MANAGEMENT, credentials=True).encode(), 0o600)
        with pytest.raises(ClusterUnavailable) as raised:
            await kube.get_node(NODE)
        assert b"PRIVATE KEY" not in str(raised.value).encode()
        key_body = key_pem.decode().splitlines()[1]
        assert key_body not in str(raised.value)
        assert key_body not in capsys.readouterr().out
        with pytest.raises(ClusterUnavailable):
            await kube.node_client()  # still, until the files change

        give_credentials(tmp_path)  # fixed: the cluster's client
        assert (await kube.node_client()) is not kube.client
    finally:
        await kube.close()


async def test_without_a_host_the_node_side_is_the_management_api(
        management: ApiClient) -> None:
    kube = AgentKube(management)
    assert await kube.node_client() is kube.client
    await kube.refresh()
    assert kube.generation == 0 and not kube.uses_cluster
    await kube.close()
