"""Shared fixtures: a real API server, in-process (async tests) or as its own
process (sync clients, kubectl), each on a fresh data dir and a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from racksmith.apiserver.server import ApiServer, ApiServerConfig
from tests.serverproc import ServerProc, start_server


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-xdist groups (``--dist loadgroup``, see the Makefile): the tests
    of the e2e demo session (the ``demo_rack`` fixture: one ``racksmith up``
    shared by the cluster, volume, update and console tests) run on one
    worker, in file order; every other module is one group, so its
    module-scoped fixtures (a shared API server, a rack) are built once."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = "demo" if "demo_rack" in getattr(item, "fixturenames", ()) \
            else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
async def api_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """An in-process API server (TLS, token) with Racksmith's CRDs applied."""
    from racksmith.kinds.crdgen import all_crds

    server = ApiServer(ApiServerConfig(data_dir=tmp_path / "data", port=0))
    await server.start(bootstrap=all_crds())
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """``racksmith apiserver`` as a separate process, stopped by PID."""
    proc = start_server(tmp_path_factory.mktemp("server"), command="apiserver")
    try:
        yield proc
    finally:
        proc.kill()
