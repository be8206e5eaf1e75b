"""Session fixtures of the end-to-end tests: the demo cluster, started once
and shared by the cluster, volume, update and console tests (they need nodes
with running agents), stopped (every process reaped by its data dir) at the
end — and then its audit trail must hold no request of a Racksmith component
refused (403): every controller and host agent ran with its least-privilege
identity, so a rule missing from one fails the suite even where the refusal
was retried past. Its hosts have instant fake BMCs (``--hardware fake``): these tests are
about what runs above provisioning — the emulated OS boot from the config
drive, the host agents, kubelets, IPAM, maintenance — which runs exactly as
in ``make up``; the Redfish path has its own tests (test_baremetal*,
test_virtual_datacenter, test_emulated_os_boot)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.demo import EXAMPLES, EXTRA, HARDWARE, HOSTS, machines_ready, wait_for
from tests.e2e.rack import Rack, start_rack
from tests.harness.audit import component_refusals


@pytest.fixture(scope="session")
def demo_rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rack]:
    data_dir = tmp_path_factory.mktemp("cluster")
    r = start_rack(data_dir, HOSTS, ["--apply-emulated-hosts", "--apply", str(EXAMPLES),
                                       "--apply", str(EXTRA)], hardware=HARDWARE)
    try:
        yield r
    finally:
        r.stop()
    refused = component_refusals(data_dir)
    assert refused == [], f"Racksmith components were refused (403): {refused[:20]}"


@pytest.fixture(scope="session")
def demo_ready(demo_rack: Rack) -> dict[str, dict[str, Any]]:
    machines: dict[str, dict[str, Any]] = wait_for(demo_rack, "every machine Ready",
                                                   lambda: machines_ready(demo_rack), timeout=900)
    return machines
