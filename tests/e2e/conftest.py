"""Session fixtures of the end-to-end tests: the demo cluster, started once
and shared by the cluster and volume tests (the volume tests need nodes with
running agents), stopped (every process reaped by its data dir) at the end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.demo import EXAMPLES, EXTRA, HOSTS, machines_ready, wait_for
from tests.e2e.rack import Rack, start_rack


@pytest.fixture(scope="session")
def demo_rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rack]:
    data_dir = tmp_path_factory.mktemp("cluster")
    r = start_rack(data_dir, HOSTS, ["--apply-emulated-hosts", "--apply", str(EXAMPLES),
                                       "--apply", str(EXTRA)])
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture(scope="session")
def demo_ready(demo_rack: Rack) -> dict[str, dict[str, Any]]:
    machines: dict[str, dict[str, Any]] = wait_for(demo_rack, "every machine Ready",
                                                   lambda: machines_ready(demo_rack), timeout=900)
    return machines
