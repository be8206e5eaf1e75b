"""A cluster's control plane as data: the Cluster controller against the real
API server writes the cluster's PKI and admin kubeconfig as Cluster API's
Secrets, its ``status.controlPlaneEndpoint`` and its control-plane
conditions; refuses a VIP outside the control-plane network or held by
another cluster; reports a damaged kubeconfig; and ``racksmith kubeconfig
--cluster`` prints what it wrote. The Secrets' contents appear in no status
or Event."""

from __future__ import annotations

import asyncio
import base64
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from racksmith.apiserver.server import ApiServer
from racksmith.controllers.cluster import cluster_controller
from racksmith.controlplane.jointoken import (
    TOKEN_TTL,
    JoinCredentials,
    join_secret,
    new_join,
    parse_join,
)
from tests.harness import api
from tests.harness.controllers import running
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLUSTER = "cluster.racksmith.io"
PKI_SECRETS = ("ca", "proxy", "etcd", "sa")


def cluster(name: str, vip: str | None, cidrs: tuple[str, ...] = ("10.10.0.0/24",)
            ) -> dict[str, Any]:
    api_server: dict[str, Any] = {"vip": vip} if vip else {}
    return {"apiVersion": f"{CLUSTER}/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"release": "rel-1", "apiServer": api_server,
                     "networks": {"controlPlaneCIDRs": list(cidrs)}}}


class World(api.World):
    async def secret(self, name: str) -> dict[str, Any] | None:
        got = await api.optional(self.core.read_namespaced_secret(name, self.ns))
        return self.plain(got) if got is not None else None

    async def condition(self, name: str, type_: str) -> dict[str, Any]:
        obj = await self.get(CLUSTER, "clusters", name) or {}
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond["type"] == type_:
                return dict(cond)
        return {}

    async def says(self, name: str, type_: str, status: str, reason: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            cond = await self.condition(name, type_)
            return cond if (cond.get("status"), cond.get("reason")) == (status, reason) else None
        return await eventually(check, f"{name}: {type_}={status} ({reason})")

    async def kubeconfig(self, name: str) -> dict[str, Any]:
        secret = await self.exists(f"Secret {name}-kubeconfig",
                                   lambda: self.secret(f"{name}-kubeconfig"))
        config: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"]["value"]))
        return config


def secret_values(*objects: Any) -> list[str]:
    return [v for obj in objects for v in (obj.get("data") or {}).values()]


async def test_a_cluster_gets_its_pki_kubeconfig_endpoint_and_conditions(
        client: ApiClient, ns: str, api_server: ApiServer) -> None:
    world = World(client, ns)
    async with running(cluster_controller(client, namespace=ns)):
        await world.create(CLUSTER, "clusters", cluster("demo", "10.10.0.5"))
        await world.says("demo", "ControlPlaneEndpointValid", "True", "Valid")
        await world.says("demo", "CertificatesAvailable", "True", "Available")
        await world.says("demo", "ControlPlaneReachable", "Unknown", "NotProbed")
        await world.says("demo", "ControlPlaneAvailable", "False", "NoControlPlaneMachines")
        got = await world.get(CLUSTER, "clusters", "demo") or {}
        assert got["status"]["controlPlaneEndpoint"] == {"host": "10.10.0.5", "port": 6443}
        secrets = {s: await world.secret(f"demo-{s}") for s in (*PKI_SECRETS, "kubeconfig")}
        for suffix, secret in secrets.items():
            assert secret is not None, suffix
            assert secret["type"] == "cluster.x-k8s.io/secret"
            assert secret["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "demo"}
            owner = secret["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["uid"]) == (
                "Cluster", "demo", got["metadata"]["uid"])
        config = await world.kubeconfig("demo")
        assert config["current-context"] == "demo-admin@demo"
        assert config["clusters"][0]["cluster"]["server"] == "https://10.10.0.5:6443"
        assert config["clusters"][0]["cluster"]["certificate-authority-data"] == \
            secrets["ca"]["data"]["tls.crt"]  # type: ignore[index]

        # racksmith kubeconfig --cluster prints the Secret's kubeconfig.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "racksmith.cli.main", "kubeconfig", "--cluster", f"{ns}/demo",
            "--kubeconfig", str(api_server.kubeconfig_path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert yaml.safe_load(out) == config
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "racksmith.cli.main", "kubeconfig", "--cluster", f"{ns}/nope",
            "--kubeconfig", str(api_server.kubeconfig_path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 1 and f"Cluster {ns}/nope not found" in err.decode()

        # A new VIP rewrites the kubeconfig; the CA stays.
        await world.patch(CLUSTER, "clusters", "demo", {"spec": {"apiServer": {
            "vip": "10.10.0.6"}}})

        async def moved() -> bool:
            return bool((await world.kubeconfig("demo"))["clusters"][0]["cluster"][
                "server"] == "https://10.10.0.6:6443")
        await eventually(moved, "kubeconfig for the new VIP")
        assert (await world.secret("demo-ca")) == secrets["ca"]

        # A damaged kubeconfig is reported, left alone, and rebuilt once deleted.
        damaged = await world.secret("demo-kubeconfig")
        assert damaged is not None
        damaged["data"]["value"] = base64.b64encode(b"apiVersion: v1\nkind: Config\n").decode()
        await world.core.replace_namespaced_secret("demo-kubeconfig", ns, damaged)
        cond = await world.says("demo", "ControlPlaneReachable", "False", "KubeconfigInvalid")
        assert "demo-kubeconfig" in cond["message"]
        await world.core.delete_namespaced_secret("demo-kubeconfig", ns)
        await world.says("demo", "ControlPlaneReachable", "Unknown", "NotProbed")
        assert (await world.kubeconfig("demo"))["clusters"][0]["cluster"]["server"] == \
            "https://10.10.0.6:6443"

        # Before any machine is deployed a lost authority is made again (a
        # crash between two creates converges the same way); the others stay.
        await world.core.delete_namespaced_secret("demo-etcd", ns)
        await world.exists("demo-etcd again", lambda: world.secret("demo-etcd"))
        assert (await world.secret("demo-ca")) == secrets["ca"]

        status = await world.get(CLUSTER, "clusters", "demo")
        events = world.plain(await world.core.list_namespaced_event(ns))
        leaks = secret_values(*[s for s in secrets.values() if s])
        for text in (str(status), str(events)):
            assert not any(v in text for v in leaks)
            assert "PRIVATE KEY" not in text


async def test_a_bad_vip_gets_a_condition_and_nothing_is_made(client: ApiClient,
                                                                 ns: str) -> None:
    world = World(client, ns)
    async with running(cluster_controller(client, namespace=ns)):
        await world.create(CLUSTER, "clusters", cluster("outside", "10.9.0.5"))
        cond = await world.says("outside", "ControlPlaneEndpointValid", "False",
                                "VIPOutsideControlPlaneNetwork")
        assert "10.10.0.0/24" in cond["message"]
        await world.create(CLUSTER, "clusters", cluster("first", "10.10.0.7"))
        await world.says("first", "CertificatesAvailable", "True", "Available")
        await world.create(CLUSTER, "clusters", cluster("second", "10.10.0.7"))
        cond = await world.says("second", "ControlPlaneEndpointValid", "False", "VIPConflict")
        assert f"{ns}/first" in cond["message"]
        for name in ("outside", "second"):
            got = await world.get(CLUSTER, "clusters", name) or {}
            assert "controlPlaneEndpoint" not in got["status"]
            for suffix in (*PKI_SECRETS, "kubeconfig"):
                assert await world.secret(f"{name}-{suffix}") is None, (name, suffix)
        events = world.plain(await world.core.list_namespaced_event(
            ns, field_selector="involvedObject.name=second"))
        assert [e["reason"] for e in events["items"]].count("VIPConflict") == 1

        # The VIP's holder goes: the other cluster takes it.
        await world.delete(CLUSTER, "clusters", "first")
        await world.says("second", "ControlPlaneEndpointValid", "True", "Valid")
        await world.exists("second-kubeconfig", lambda: world.secret("second-kubeconfig"))


async def test_kubeconfig_cli_refuses_a_bad_reference(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "racksmith.cli.main", "kubeconfig", "--cluster", "a/b/c",
        "--kubeconfig", str(tmp_path / "none"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 2 and "NAMESPACE/NAME" in err.decode()


async def test_router_ids_are_unique_per_segment_and_a_clash_is_refused(
        client: ApiClient, ns: str) -> None:
    world = World(client, ns)
    async with running(cluster_controller(client, namespace=ns)):
        await world.create(CLUSTER, "clusters", cluster("one", "10.10.0.8"))
        await world.says("one", "ControlPlaneEndpointValid", "True", "Valid")
        await world.create(CLUSTER, "clusters", cluster("two", "10.10.0.9"))
        await world.says("two", "ControlPlaneEndpointValid", "True", "Valid")
        ids = {name: ((await world.get(CLUSTER, "clusters", name) or {})["status"]
                      .get("virtualRouterID")) for name in ("one", "two")}
        assert ids == {"one": 1, "two": 2}
        vrrp = await world.secret("one-vrrp")
        assert vrrp is not None
        word = base64.b64decode(vrrp["data"]["authPass"]).decode()
        assert len(word) == 8 and word.isalnum()
        clash = cluster("three", "10.10.0.10")
        clash["spec"]["apiServer"]["virtualRouterID"] = 2
        await world.create(CLUSTER, "clusters", clash)
        cond = await world.says("three", "ControlPlaneEndpointValid", "False",
                                "VirtualRouterIDConflict")
        assert f"{ns}/two" in cond["message"]
        assert await world.secret("three-ca") is None
        # On another network the same id is free.
        far = cluster("four", "10.40.0.5", cidrs=("10.40.0.0/24",))
        far["spec"]["apiServer"]["virtualRouterID"] = 2
        await world.create(CLUSTER, "clusters", far)
        await world.says("four", "ControlPlaneEndpointValid", "True", "Valid")
        assert (await world.get(CLUSTER, "clusters", "four") or {})["status"][
            "virtualRouterID"] == 2
        # The API servers' port behind the VIP's HAProxy is not an endpoint port.
        reserved = cluster("five", "10.50.0.5", cidrs=("10.50.0.0/24",))
        reserved["spec"]["apiServer"]["port"] = 6444
        await world.create(CLUSTER, "clusters", reserved)
        cond = await world.says("five", "ControlPlaneEndpointValid", "False",
                                "EndpointPortReserved")
        assert "6444" in cond["message"]


async def test_each_cluster_controller_identity_is_issued_and_renewed(
        client: ApiClient, ns: str) -> None:
    """<cluster>-racksmith-NAME: a client certificate of user racksmith:NAME
    the cluster CA issued; an unusable one is issued again."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    world = World(client, ns)
    async with running(cluster_controller(client, namespace=ns, identities=("machine",))):
        await world.create(CLUSTER, "clusters", cluster("idc", "10.10.0.11"))
        secret = await world.exists("Secret idc-racksmith-machine",
                                    lambda: world.secret("idc-racksmith-machine"))
        assert secret["type"] == "kubernetes.io/tls"
        cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == \
            "racksmith:machine"
        ca = await world.secret("idc-ca")
        assert ca is not None and secret["data"]["ca.crt"] == ca["data"]["tls.crt"]
        secret["data"].pop("tls.key")
        await world.core.replace_namespaced_secret("idc-racksmith-machine", ns, secret)

        async def reissued() -> bool:
            again = await world.secret("idc-racksmith-machine")
            return again is not None and "tls.key" in again["data"]
        await eventually(reissued, "the identity issued again")


async def test_the_join_token_is_made_renewed_when_due_and_never_shown(
        client: ApiClient, ns: str) -> None:
    """``<cluster>-join`` (racksmith.controlplane.jointoken): made with the
    PKI; one whose token has a third of its life left, or a damaged one, is
    made anew; the token appears in no status, Event or condition."""
    world = World(client, ns)
    async with running(cluster_controller(client, namespace=ns)):
        await world.create(CLUSTER, "clusters", cluster("joiner", "10.10.0.7"))
        first = await world.exists("Secret joiner-join", lambda: world.secret("joiner-join"))
        join = parse_join(first)
        assert join is not None and join.expires - join.issued == TOKEN_TTL
        assert first["metadata"]["ownerReferences"][0]["name"] == "joiner"

        # one near its end (made 20 hours ago, ending in 4): renewed
        old = new_join(datetime.now(UTC) - timedelta(hours=20))
        first["data"] = join_secret(ns, "joiner", old)["data"]
        await world.core.replace_namespaced_secret("joiner-join", ns, first)

        async def renewed() -> JoinCredentials | None:
            now = parse_join(await world.secret("joiner-join"))
            return now if now is not None and now.token not in (old.token, join.token) \
                else None
        fresh = await eventually(renewed, "a new join token")
        assert fresh.certificate_key != old.certificate_key and not fresh.due(datetime.now(UTC))

        # a damaged one: made anew
        damaged = await world.secret("joiner-join")
        assert damaged is not None
        damaged["data"]["token"] = base64.b64encode(b"nope").decode()
        await world.core.replace_namespaced_secret("joiner-join", ns, damaged)

        async def replaced() -> JoinCredentials | None:
            now = parse_join(await world.secret("joiner-join"))
            return now if now is not None and now.token != fresh.token else None
        last = await eventually(replaced, "the damaged join Secret made anew")

        status = await world.get(CLUSTER, "clusters", "joiner")
        events = world.plain(await world.core.list_namespaced_event(ns))
        for text in (str(status), str(events)):
            for creds in (join, fresh, last):
                assert creds.token not in text and creds.certificate_key not in text
        reasons = {e["reason"] for e in events["items"]
                   if e["involvedObject"]["name"] == "joiner"}
        assert {"JoinTokenIssued", "JoinTokenRenewed"} <= reasons
