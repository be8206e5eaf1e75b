"""Clients built by racksmith.runtime.kubeclient read the proxy environment
once, when built, instead of on every request."""

from __future__ import annotations

import pytest

from racksmith.runtime.kubeclient import api_client_with_token

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


async def test_no_per_request_environment_lookups() -> None:
    client = api_client_with_token("https://127.0.0.1:6443", "t0ken", None)
    try:
        assert client.rest_client.pool_manager.trust_env is False
        assert not client.configuration.proxy
    finally:
        await client.close()


async def test_the_environment_proxy_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    client = api_client_with_token("https://api.example:6443", "t0ken", None)
    try:
        assert client.configuration.proxy == "http://proxy.example:3128"
        assert client.rest_client.proxy == "http://proxy.example:3128"
    finally:
        await client.close()


async def test_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "api.example,127.0.0.1")
    client = api_client_with_token("https://api.example:6443", "t0ken", None)
    try:
        assert not client.configuration.proxy
    finally:
        await client.close()
