"""The composition root (``racksmith.app.runner.Racksmith``) in-process.

Started with ``Settings(data_dir=tmp, port=0)`` and ``--apply`` manifests:
becomes ready, serves /readyz and /metrics over TLS (CA and token from the
kubeconfig it wrote), holds the controllers' Lease, has applied the
manifests, and stops cleanly. Every wait is bounded; nothing asserts on
durations.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio.client import CoordinationV1Api, CoreV1Api

from racksmith.app.runner import Racksmith
from racksmith.app.settings import Settings
from racksmith.runtime.kubeclient import api_client_from_kubeconfig

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: runner-it
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: runner-it
data:
  answer: "42"
"""


TUNED = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: tuned
  namespace: runner-it
data:
  level: low
"""


def tls_from_kubeconfig(path: Path) -> tuple[str, ssl.SSLContext, str]:
    """(server URL, SSL context trusting the kubeconfig's CA, bearer token)."""
    config: dict[str, Any] = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode("ascii")
    context = ssl.create_default_context(cadata=ca_pem)
    return cluster["server"], context, config["users"][0]["user"]["token"]


async def test_racksmith_starts_applies_serves_and_stops(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "objects.yaml").write_text(MANIFEST)
    steps: list[str] = []
    app = Racksmith(
        Settings(data_dir=tmp_path / "data", port=0, apply=[manifests], controller_workers=1,
                 with_ironic=False),
        on_step=steps.append,
    )
    assert not app.ready()
    try:
        async with asyncio.timeout(60):
            await app.start()
        assert app.ready()
        assert steps[-1] == "ready"
        assert app.server is not None and app.manager is not None
        assert app.manager.is_leader

        url, ssl_context, token = tls_from_kubeconfig(app.server.kubeconfig_path)
        assert url == app.server.url and url.startswith("https://")
        headers = {"Authorization": f"Bearer {token}"}
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.get(f"{url}/readyz", ssl=ssl_context, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
            async with http.get(f"{url}/metrics", ssl=ssl_context, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
                text = await resp.text()
            assert 'racksmith_leader_is_leader{lease="racksmith-controllers"} 1.0' in text
            # Without the CA the server's certificate is not trusted.
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                async with http.get(f"{url}/readyz"):
                    pass

        client = await api_client_from_kubeconfig(app.server.kubeconfig_path)
        try:
            core = CoreV1Api(client)
            namespace = await core.read_namespace("runner-it")
            assert namespace.metadata.name == "runner-it"
            config_map = await core.read_namespaced_config_map("settings", "runner-it")
            assert config_map.data == {"answer": "42"}
            managers = {m.manager for m in config_map.metadata.managed_fields or []}
            assert "racksmith-apply" in managers
            lease = await CoordinationV1Api(client).read_namespaced_lease(
                "racksmith-controllers", "kube-system"
            )
            assert lease.spec.holder_identity == app.manager.identity
        finally:
            await client.close()
    finally:
        async with asyncio.timeout(60):
            await app.stop()

    # Stopped cleanly: the manager finished without error, the port is closed.
    assert app.manager is not None and not app.manager.is_running
    assert app._manager_task is not None and app._manager_task.done()
    assert not app._manager_task.cancelled() and app._manager_task.exception() is None
    assert not app.manager.is_leader
    host, port = "127.0.0.1", app.server.port if app.server else 0
    with pytest.raises(OSError):
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        writer.close()


async def test_racksmith_restart_on_the_same_data_dir_is_idempotent(tmp_path: Path) -> None:
    """A second start on the same data dir re-applies the manifests (no
    conflict), takes the Lease the first run released, and is ready again.
    Fields another manager set in between survive the re-apply (a server-side
    apply, not a replace: a controller's spec.consumerRef or spec.image on a
    BareMetalHost of `make up`'s manifests must not be wiped by a restart)."""
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(MANIFEST + TUNED)
    settings = Settings(data_dir=tmp_path / "data", port=0, apply=[manifest], with_ironic=False)
    identities = []
    for _ in range(2):
        app = Racksmith(settings)
        try:
            async with asyncio.timeout(60):
                await app.start()
            assert app.ready() and app.manager is not None
            identities.append(app.manager.identity)
            assert app.server is not None
            client = await api_client_from_kubeconfig(app.server.kubeconfig_path)
            try:
                lease = await CoordinationV1Api(client).read_namespaced_lease(
                    "racksmith-controllers", "kube-system"
                )
                assert lease.spec.holder_identity == app.manager.identity
                core = CoreV1Api(client)
                cm = await core.read_namespaced_config_map("settings", "runner-it")
                if not identities[:-1]:
                    assert cm.data == {"answer": "42"}
                    await core.patch_namespaced_config_map(
                        "settings", "runner-it", {"data": {"claimed-by": "a-controller"}},
                        field_manager="a-controller")
                    # an operator changes a field the manifest sets
                    await core.patch_namespaced_config_map(
                        "tuned", "runner-it", {"data": {"level": "high"}},
                        field_manager="an-operator")
                else:
                    # re-applied: the manifest's fields are there, the others kept
                    assert cm.data == {"answer": "42", "claimed-by": "a-controller"}
                    # a conflicting field is not overwritten
                    tuned = await core.read_namespaced_config_map("tuned", "runner-it")
                    assert tuned.data == {"level": "high"}
            finally:
                await client.close()
        finally:
            async with asyncio.timeout(60):
                await app.stop()
    assert identities[0] != identities[1]
