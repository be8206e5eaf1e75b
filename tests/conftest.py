"""Shared fixtures: a real API server, in-process (async tests) or as its own
process (sync clients, kubectl). They live in :mod:`tests.harness.fixtures`,
which says which server a test gets and the loop-scope rule. Every test runs
under :func:`tests.harness.statetables.state_tables_hold`: a transition a
state table refuses fails it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.fixtures import (  # noqa: F401 (fixtures)
    api_server,
    check_loop_scopes,
    client,
    etcd,
    fresh_api_server,
    fresh_client,
    fresh_ns,
    module_api_server,
    module_http,
    no_server_errors,
    ns,
    official_api,
    procs,
    server_process,
    server_process_clean,
    shared_client,
    shared_ns,
)
from tests.harness.statetables import (  # noqa: F401 (fixtures)
    illegal_transitions,
    state_tables_hold,
)

DEMO_MODULES = ("tests/e2e/test_cluster.py", "tests/e2e/test_cluster_volumes.py",
                "tests/e2e/test_update.py", "tests/e2e/test_webconsole.py")
"""The modules of the e2e demo session (the ``demo_rack`` fixture: one
``racksmith up`` shared by the cluster, volume, update and console tests),
in the order they run in."""


LONGEST_FIRST = ("tests/e2e/test_baremetal.py", "demo", "tests/e2e/test_backup.py",
                 "tests/e2e/test_external_controllers.py",
                 "tests/e2e/test_virtual_datacenter.py", "tests/e2e/test_detach_down.py",
                 "tests/e2e/test_etcd_up.py", "tests/e2e/test_make_up_display.py")
"""The work units that take longest, longest first (as measured by ``make
test``'s ``--durations``; docs/testing.md): the longest must start first, or
it ends the run alone. Every other unit follows in file order."""


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    """The scheduler's work unit of a test: its module, or "demo"."""
    module = _module(nodeid)
    return "demo" if module in DEMO_MODULES else module


def _weight(nodeid: str) -> tuple[int, int]:
    """Longest first: the units of :data:`LONGEST_FIRST`, the other e2e modules,
    integration, unit."""
    unit = _unit(nodeid)
    if unit in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(unit)
    for rank, prefix in enumerate(("tests/e2e/", "tests/integration/"), start=1):
        if unit.startswith(prefix):
            return rank, 0
    return 3, 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the suite for the two xdist workers (``make test``): what takes
    longest is handed out first, so the unit and integration tests fill the
    time the end-to-end tests spend waiting; within a module, and within the
    demo session, file order is kept (a stable sort). A test that uses the
    demo session must live in one of :data:`DEMO_MODULES`, which the
    scheduler keeps on one worker. Also: async tests and fixtures share a
    loop scope (:func:`tests.harness.fixtures.check_loop_scopes`)."""
    check_loop_scopes(config, items)
    for item in items:
        if "demo_rack" in getattr(item, "fixturenames", ()) \
                and _module(item.nodeid) not in DEMO_MODULES:
            raise pytest.UsageError(f"{item.nodeid} uses the demo session: add its module "
                                    "to DEMO_MODULES in tests/conftest.py")
    items.sort(key=lambda item: _weight(item.nodeid))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One work unit per test module (its module-scoped fixtures — a shared
    API server, a rack — are built once), and one for the whole demo
    session; units go out in collection order. (xdist's own ``loadgroup``
    does not group under pytest 9, whose node ids ignore its suffix.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return SuiteScheduling(config, log)

