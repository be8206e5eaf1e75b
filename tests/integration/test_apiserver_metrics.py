"""The API server's /metrics counts every request as kube-apiserver does
(apiserver_request_total by verb, group, resource, subresource and code)."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.api import serving

pytestmark = pytest.mark.asyncio


async def test_every_request_is_counted_by_verb_resource_and_code(tmp_path: Path) -> None:
    async with serving(tmp_path / "data", with_crds=False) as server:
        assert server.ca_pem is not None
        conn = aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=server.ca_pem.decode()))
        admin = {"Authorization": f"Bearer {server.token}"}
        async with aiohttp.ClientSession(connector=conn) as http:
            cms = f"{server.url}/api/v1/namespaces/default/configmaps"
            for _ in range(3):
                async with http.get(cms, headers=admin) as resp:
                    assert resp.status == 200
            async with http.post(cms, headers=admin, json={"metadata": {"name": "a"}}) as resp:
                assert resp.status == 201
            async with http.patch(f"{cms}/a/status", headers={
                    **admin, "Content-Type": "application/merge-patch+json"}, json={}) as resp:
                assert resp.status == 404  # ConfigMaps have no status subresource
            async with http.get(cms) as resp:
                assert resp.status == 401
            async with http.get(f"{server.url}/metrics", headers=admin) as resp:
                assert resp.status == 200
                text = await resp.text()
    counted = {(s.labels["verb"], s.labels["resource"], s.labels["subresource"],
                s.labels["code"]): s.value
               for family in text_string_to_metric_families(text)
               if family.name == "apiserver_request"
               for s in family.samples if s.name == "apiserver_request_total"}
    assert counted[("LIST", "configmaps", "", "200")] == 3
    assert counted[("CREATE", "configmaps", "", "201")] == 1
    assert counted[("PATCH", "configmaps", "status", "404")] == 1
    assert counted[("LIST", "configmaps", "", "401")] == 1
    assert "default" not in text and '"a"' not in text  # no namespace or name is a label
