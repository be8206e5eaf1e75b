"""``ControlPlaneReachable`` from the runtime's per-cluster tracker: the
Cluster controller, with a :class:`ClusterClients` that probes, against the
real API server; each cluster's API is a real ``racksmith apiserver``
process serving with the CA the controller made for that cluster, on
loopback. A cluster whose API dies turns Unreachable while another stays
Reachable; a deleted cluster is forgotten (its key files go)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.cluster import cluster_controller
from racksmith.controlplane.pki import KeyPair, issue_serving
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.keys import ObjectKey
from tests.harness import api
from tests.harness.controllers import running
from tests.harness.process import ServerProc, start_server
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLUSTER = "cluster.racksmith.io"


class World(api.World):
    async def says(self, name: str, type_: str, status: str, reason: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            obj = await self.get(CLUSTER, "clusters", name) or {}
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond["type"] == type_ and (cond["status"], cond["reason"]) == (status, reason):
                    return dict(cond)
            return None
        return await eventually(check, f"{name}: {type_}={status} ({reason})")

    async def ca(self, name: str) -> KeyPair:
        async def read() -> Any:
            return await api.optional(self.core.read_namespaced_secret(f"{name}-ca", self.ns))
        secret = await eventually(read, f"Secret {name}-ca")
        return KeyPair(base64.b64decode(secret.data["tls.crt"]),
                       base64.b64decode(secret.data["tls.key"]))


def serve(root: Path, ca: KeyPair) -> ServerProc:
    """The cluster's API: ``racksmith apiserver`` on the cluster CA."""
    root.mkdir(parents=True, exist_ok=True)
    serving = issue_serving(ca, "kube-apiserver", ["127.0.0.1"])
    for name, data in (("ca.crt", ca.cert_pem), ("apiserver.crt", serving.cert_pem),
                       ("apiserver.key", serving.key_pem)):
        (root / name).write_bytes(data)
    return start_server(root / "data", command="apiserver", extra=[
        "--tls-cert-file", str(root / "apiserver.crt"),
        "--tls-private-key-file", str(root / "apiserver.key"),
        "--client-ca-file", str(root / "ca.crt")])


def port_of(proc: ServerProc) -> int:
    port = urlsplit(proc.url).port
    assert port is not None
    return port


async def test_reachability_per_cluster(client: ApiClient, ns: str, tmp_path: Path,
                                        procs: list[ServerProc]) -> None:
    world = World(client, ns)
    tracker = ClusterClients(tmp_path / "clusters", probe_interval=0.3, probe_timeout=2.0)
    try:
        async with running(cluster_controller(client, namespace=ns, clusters=tracker)):
            for name in ("alpha", "beta"):
                await world.create(CLUSTER, "clusters", {
                    "apiVersion": f"{CLUSTER}/v1alpha1", "kind": "Cluster",
                    "metadata": {"name": name}, "spec": {"release": "rel-1"}})
            for name in ("alpha", "beta"):
                procs.append(serve(tmp_path / name, await world.ca(name)))
                await world.patch(CLUSTER, "clusters", name, {"spec": {
                    "controlPlaneEndpoint": {"host": "127.0.0.1",
                                             "port": port_of(procs[-1])}}})
            for name in ("alpha", "beta"):
                cond = await world.says(name, "ControlPlaneReachable", "True", "Reachable")
                assert "/readyz answers ok" in cond["message"]
            # alpha's API dies: alpha is Unreachable, beta stays Reachable.
            procs[0].kill(9)
            cond = await world.says("alpha", "ControlPlaneReachable", "False", "Unreachable")
            assert f"127.0.0.1:{port_of(procs[0])}" in cond["message"]
            await world.says("beta", "ControlPlaneReachable", "True", "Reachable")
            # It comes back on the same port: Reachable again.
            procs[0] = serve(tmp_path / "alpha-again", await world.ca("alpha"))
            await world.patch(CLUSTER, "clusters", "alpha", {"spec": {
                "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port_of(procs[0])}}})
            await world.says("alpha", "ControlPlaneReachable", "True", "Reachable")
            # A deleted cluster is forgotten: no probe, no key files.
            await world.delete(CLUSTER, "clusters", "beta")
            await eventually(lambda: ObjectKey(ns, "beta") not in tracker.known(),
                             "beta forgotten")
            assert not (tmp_path / "clusters" / f"{ns}_beta").exists()
            assert (tmp_path / "clusters" / f"{ns}_alpha" / "ca.crt").stat().st_mode & 0o777 \
                == 0o600
    finally:
        await tracker.close()
