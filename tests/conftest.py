"""Shared fixtures: a real API server, in-process (async tests) or as its own
process (sync clients, kubectl). They live in :mod:`tests.harness.fixtures`,
which says which server a test gets and the loop-scope rule."""

from __future__ import annotations

import pytest

from tests.harness.fixtures import (  # noqa: F401 (fixtures)
    api_server,
    check_loop_scopes,
    client,
    fresh_api_server,
    fresh_client,
    fresh_ns,
    module_api_server,
    module_http,
    ns,
    server_process,
    shared_client,
    shared_ns,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_loop_scopes(config, items)
