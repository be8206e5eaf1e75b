"""The test harness itself (``tests/harness``): a shared server is given back
as it was after each test, a fresh one is the test's own, and the loop-scope
rule is enforced at collection.

The first two tests run in order on the module's server (they are marked
for the module's loop one by one, so that the last test, on its own loop,
gets a fresh server): the first leaves objects everywhere, with finalizers
no controller will remove; the second sees none of them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from racksmith.apiserver.server import ApiServer
from tests.harness.api import World, crds
from tests.harness.http import raw_client
from tests.harness.process import ROOT
from tests.harness.wait import eventually

SHARED = pytest.mark.asyncio(loop_scope="module")
GADGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.org"},
    "spec": {"group": "example.org", "scope": "Namespaced",
             "names": {"kind": "Gadget", "plural": "gadgets"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}]}}
HOLD = ["test.racksmith.io/hold"]
first: dict[str, Any] = {}


def cm(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": finalizers or []}}


@SHARED
async def test_a_test_leaves_objects_everywhere(api_server: ApiServer, ns: str,
                                                client: ApiClient) -> None:
    first.update(server=api_server, ns=ns)
    world = World(client, ns)
    async with raw_client(api_server, ns) as c:
        assert (await c.post("/api/v1/namespaces/{ns}/configmaps", cm("mine", HOLD)))[0] == 201
        assert (await c.post("/api/v1/namespaces/default/configmaps", cm("elsewhere")))[0] == 201
        assert (await c.post("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra"}}))[0] == 201
        assert (await c.post("/api/v1/namespaces/extra/configmaps", cm("x", HOLD)))[0] == 201
        assert (await c.post("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))[0] == 201
        crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        assert (await c.post(crd_path, GADGETS))[0] == 201

        async def served() -> bool:
            return (await c.get("/apis/example.org/v1/namespaces/{ns}/gadgets"))[0] == 200
        await eventually(served, "gadgets served")
        code, body = await c.post("/apis/example.org/v1/namespaces/{ns}/gadgets", {
            "apiVersion": "example.org/v1", "kind": "Gadget",
            "metadata": {"name": "g", "finalizers": HOLD}})
        assert code == 201, body
    await world.create("storage.racksmith.io", "volumes", {
        "apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
        "metadata": {"name": "v1", "finalizers": HOLD},
        "spec": {"nodeName": "n1", "storageClassName": "local",
                 "sparseLoopDevice": {"size": "1Gi"}}})
    # Deleted but held: terminating objects go too.
    await world.delete("storage.racksmith.io", "volumes", "v1")
    assert await world.get("storage.racksmith.io", "volumes", "v1") is not None


@SHARED
async def test_the_next_test_sees_none_of_them(api_server: ApiServer, ns: str,
                                               client: ApiClient) -> None:
    assert first, "runs after test_a_test_leaves_objects_everywhere"
    assert api_server is first["server"], "not the module's server"
    assert ns != first["ns"]
    world = World(client, ns)
    async with raw_client(api_server, ns) as c:
        names = {n["metadata"]["name"] for n in (await c.get("/api/v1/namespaces"))[1]["items"]}
        assert names == {"default", "kube-system", "kube-public", "kube-node-lease", ns}
        assert (await c.get("/api/v1/namespaces/default/configmaps"))[1]["items"] == []
        assert (await c.get("/api/v1/nodes"))[1]["items"] == []
        _, listed = await c.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == sorted(
            crd["metadata"]["name"] for crd in crds())
        assert (await c.get("/apis/example.org/v1/namespaces/{ns}/gadgets"))[0] == 404
    assert await world.items("storage.racksmith.io", "volumes") == []


async def test_a_test_on_its_own_loop_gets_a_fresh_server(api_server: ApiServer, ns: str,
                                                          tmp_path: Path) -> None:
    assert api_server.data_dir == tmp_path / "data"
    async with raw_client(api_server) as c:
        code, got = await c.get(f"/api/v1/namespaces/{ns}")
        assert code == 200 and got["status"]["phase"] == "Active"


def test_an_async_fixture_of_another_loop_fails_the_collection(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""\
        from tests.harness.fixtures import check_loop_scopes

        def pytest_collection_modifyitems(config, items):
            check_loop_scopes(config, items)
        """))
    (tmp_path / "test_mixed.py").write_text(textwrap.dedent("""\
        import pytest

        pytestmark = pytest.mark.asyncio(loop_scope="module")

        @pytest.fixture
        async def on_the_test_loop():
            return 1

        async def test_uses_it(on_the_test_loop):
            pass
        """))
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        asyncio_mode = auto
        asyncio_default_fixture_loop_scope = function
        """))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--collect-only", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert res.returncode == 4, res.stdout + res.stderr
    assert ("test_mixed.py::test_uses_it: runs on the module loop, its async fixture "
            "'on_the_test_loop' on the function loop") in res.stdout + res.stderr
