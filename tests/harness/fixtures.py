"""The pytest fixtures of the harness (registered by ``tests/conftest.py``).

Owns which API server a test gets, its namespace and its client:

- ``api_server``: the in-process API server (TLS, token, Racksmith's CRDs);
- ``ns``: the test's own namespace on it (a fresh, unique name, created
  before the test);
- ``client``: a ``kubernetes_asyncio`` client for it;
- ``server_process``: ``racksmith apiserver`` as a separate process, one per
  module, for tests of sync clients and kubectl; ``server_process_clean``
  fails the module when that process logged an error, ``official_api`` is
  the official ``kubernetes`` client for it;
- ``etcd``: a one-member etcd cluster for the module;
- ``no_server_errors``: fails a test during which the in-process server
  logged an error (a 500 logs ``internal error serving …`` with its
  traceback); a module opts in with ``pytest.mark.usefixtures`` and may
  name messages it expects in ``SERVER_ERRORS_EXPECTED``.

**One server per module, or one per test.** A test that runs on its
module's event loop -- the module says so with ``pytestmark =
pytest.mark.asyncio(loop_scope="module")``, or a module with sync tests
marks its async tests so one by one -- shares the module's server with the
other tests of the module: it gets its own namespace, and when it ends every
object it made (in its namespace, in other namespaces such as ``default``
where the controllers put Events, and cluster-scoped: Nodes, Volumes,
locks...) is deleted, finalizers and all, before the next test starts (see
:class:`tests.harness.api.Snapshot`). So the tests of a module never see
each other's objects, even those running controllers that watch every
namespace. A test on its own loop (the default) gets a fresh server on a
fresh data dir: that is what tests of server restarts, crashes, data dirs or
store internals need. Both kinds can live in one module. Controllers a test
starts must be stopped when it ends (``tests.harness.controllers`` does it),
before the server is given back.

**The loop-scope rule.** An async fixture runs on the event loop of its
``loop_scope`` (default: the test function's own loop); a test that uses a
fixture of another loop gets objects (servers, sessions, tasks) bound to a
loop that is not running while it runs -- it hangs or fails in odd ways. So:

- an async fixture used by tests on the module's loop must be declared
  ``@pytest_asyncio.fixture(loop_scope="module")`` (with any ``scope``);
- an async fixture used by tests on their own loop keeps the default loop
  scope (``asyncio_default_fixture_loop_scope = "function"``);
- a sync fixture works for both.

``api_server``, ``ns`` and ``client`` follow the module by themselves (they
are plain fixtures that pick the shared or the fresh variant from the test's
loop scope), and :func:`check_loop_scopes` fails the collection, naming the
test and the fixture, if an async test uses an async fixture of another
loop. A test that must stop its server itself, or needs one with another
configuration, makes its own with :func:`tests.harness.api.serving`.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from racksmith.apiserver.server import ApiServer
from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.api import Snapshot, connect, serving, session
from tests.harness.etcd import etcd_cluster
from tests.harness.process import ServerProc, start_server

SHARED_LOOP = "module"
_numbers = itertools.count(1)


def shares_server(node: pytest.Item) -> bool:
    """Whether ``node`` runs on its module's event loop (and so on its server)."""
    marker = node.get_closest_marker("asyncio")
    if marker is None:
        return False
    return (marker.kwargs.get("loop_scope") or marker.kwargs.get("scope")) == SHARED_LOOP


def namespace_name(node: pytest.Item) -> str:
    """A namespace name unique in the session, recognisable as the test's.

    Short: controllers build names and label values from it (a plan's owner
    label ``plan.<namespace>.<plan>`` must stay within 63 characters).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", node.name.lower().removeprefix("test_")).strip("-")
    return f"t{next(_numbers)}-{slug[:12]}".rstrip("-")


async def _create_namespace(http: aiohttp.ClientSession, server: ApiServer, name: str) -> None:
    async with http.post(f"{server.url}/api/v1/namespaces", json={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}) as resp:
        assert resp.status == 201, await resp.text()


# --- one server per module ------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope=SHARED_LOOP)
async def module_api_server(tmp_path_factory: pytest.TempPathFactory,
                            request: pytest.FixtureRequest) -> AsyncIterator[ApiServer]:
    """The module's server (use ``api_server``: it also gives the server back
    clean after each test)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    async with serving(tmp_path_factory.mktemp(f"{name}-server") / "data") as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope=SHARED_LOOP)
async def module_http(module_api_server: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    """The harness's own HTTP session to the module's server."""
    async with session(module_api_server) as http:
        yield http


@pytest_asyncio.fixture(loop_scope=SHARED_LOOP)
async def shared_ns(module_api_server: ApiServer, module_http: aiohttp.ClientSession,
                    request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The test's namespace on the module's server; afterwards the server gets
    back what it held before the test (see the module docstring)."""
    snapshot = await Snapshot.take(module_api_server)
    name = namespace_name(request.node)
    try:
        await _create_namespace(module_http, module_api_server, name)
        yield name
    finally:
        await snapshot.restore(module_http)


@pytest_asyncio.fixture(loop_scope=SHARED_LOOP)
async def shared_client(module_api_server: ApiServer, shared_ns: str
                        ) -> AsyncIterator[ApiClient]:
    async with connect(module_api_server) as api_client:
        yield api_client


# --- one server per test --------------------------------------------------------------


@pytest_asyncio.fixture
async def fresh_api_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with serving(tmp_path / "data") as server:
        yield server


@pytest_asyncio.fixture
async def fresh_ns(fresh_api_server: ApiServer, request: pytest.FixtureRequest) -> str:
    name = namespace_name(request.node)
    async with session(fresh_api_server) as http:
        await _create_namespace(http, fresh_api_server, name)
    return name


@pytest_asyncio.fixture
async def fresh_client(fresh_api_server: ApiServer) -> AsyncIterator[ApiClient]:
    async with connect(fresh_api_server) as api_client:
        yield api_client


# --- what tests ask for ---------------------------------------------------------------


@pytest.fixture
def api_server(request: pytest.FixtureRequest) -> ApiServer:
    """An in-process API server (TLS, token) with Racksmith's CRDs applied:
    the module's (given back clean after the test) or the test's own."""
    if shares_server(request.node):
        request.getfixturevalue("shared_ns")
        server: ApiServer = request.getfixturevalue("module_api_server")
    else:
        server = request.getfixturevalue("fresh_api_server")
    return server


@pytest.fixture
def ns(request: pytest.FixtureRequest, api_server: ApiServer) -> str:
    """The test's own namespace on ``api_server`` (created, empty)."""
    name: str = request.getfixturevalue(
        "shared_ns" if shares_server(request.node) else "fresh_ns")
    return name


@pytest.fixture
def client(request: pytest.FixtureRequest, api_server: ApiServer) -> ApiClient:
    """A ``kubernetes_asyncio`` client for ``api_server``, closed after the test."""
    api_client: ApiClient = request.getfixturevalue(
        "shared_client" if shares_server(request.node) else "fresh_client")
    return api_client


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """``racksmith apiserver`` as a separate process, stopped by PID."""
    proc = start_server(tmp_path_factory.mktemp("server"), command="apiserver")
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def server_process_clean(server_process: ServerProc) -> Iterator[None]:
    """The module's ``server_process`` logged no error and no traceback (a
    500) while the module ran: use it with ``autouse`` or ``usefixtures``."""
    yield
    log = server_process.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]


@pytest.fixture(scope="module")
def official_api(server_process: ServerProc) -> Iterator[Any]:
    """The official (sync) ``kubernetes`` client for the module's ``server_process``."""
    import kubernetes

    api_client = kubernetes.config.new_client_from_config(
        config_file=str(server_process.kubeconfig), persist_config=False)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEtcdCluster]:
    """A one-member etcd cluster for the module (``tests.harness.etcd``)."""
    with etcd_cluster(tmp_path_factory.mktemp("etcd"), members=1) as cluster:
        yield cluster


# --- the loop-scope rule --------------------------------------------------------------


def _is_async(func: Any) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)


def check_loop_scopes(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail the collection if an async test uses an async fixture that runs on
    another event loop (see the module docstring)."""
    default_fixture = config.getini("asyncio_default_fixture_loop_scope") or "function"
    default_test = config.getini("asyncio_default_test_loop_scope") or "function"
    problems: list[str] = []
    for item in items:
        if not isinstance(item, pytest.Function) or not _is_async(item.obj):
            continue
        marker = item.get_closest_marker("asyncio")
        test_scope = (marker.kwargs.get("loop_scope") if marker else None) or default_test
        for name, defs in item._fixtureinfo.name2fixturedefs.items():
            func = defs[-1].func
            if not _is_async(func):
                continue
            scope = getattr(func, "_loop_scope", None) or default_fixture
            if scope != test_scope:
                problems.append(f"{item.nodeid}: runs on the {test_scope} loop, its async "
                                f"fixture {name!r} on the {scope} loop")
    if problems:
        raise pytest.UsageError(
            "async fixtures must run on the loop of their tests "
            "(see tests/harness/fixtures.py):\n  " + "\n  ".join(problems))


@pytest.fixture
def procs() -> Iterator[list[ServerProc]]:
    """Processes a test starts (``start_server``): each killed by PID after it."""
    started: list[ServerProc] = []
    yield started
    for proc in started:
        proc.kill()


@pytest.fixture
def no_server_errors(request: pytest.FixtureRequest,
                     caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test if the in-process API server logged an error during it
    (messages holding one of the module's ``SERVER_ERRORS_EXPECTED`` aside)."""
    caplog.set_level(logging.INFO, logger="racksmith.apiserver")
    yield
    expected = tuple(getattr(request.module, "SERVER_ERRORS_EXPECTED", ()))
    bad = [r for r in caplog.get_records("call")
           if r.name.startswith("racksmith.apiserver") and r.levelno >= logging.ERROR
           and not any(text in r.getMessage() for text in expected)]
    assert not bad, "server logged errors:\n" + "\n".join(
        f"{r.getMessage()}\n{r.exc_text or ''}" for r in bad)

