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

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo import EXAMPLES, EXTRA, HARDWARE, HOSTS, machines_ready, wait_for
from tests.e2e.rack import Rack, start_rack

COMPONENTS = "system:serviceaccount:racksmith-system:"


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


def component_refusals(data_dir: Path) -> list[str]:
    """The audited 403s of the controllers' and host agents' identities."""
    out: list[str] = []
    for log in sorted((data_dir / "audit").glob("audit.log*")):
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            user = ev.get("user") or {}
            component = str(user.get("username", "")).startswith(COMPONENTS) or \
                "racksmith:agents" in (user.get("groups") or [])
            if component and (ev.get("responseStatus") or {}).get("code") == 403:
                ref = ev.get("objectRef") or {}
                out.append(f"{user.get('username')} {ev.get('verb')} {ref.get('resource')}"
                           f"/{ref.get('subresource', '')} {ref.get('namespace', '')}/"
                           f"{ref.get('name', '')}")
    return out


@pytest.fixture(scope="session")
def demo_ready(demo_rack: Rack) -> dict[str, dict[str, Any]]:
    machines: dict[str, dict[str, Any]] = wait_for(demo_rack, "every machine Ready",
                                                   lambda: machines_ready(demo_rack), timeout=900)
    return machines
