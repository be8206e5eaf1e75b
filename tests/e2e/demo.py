"""The demo cluster of ``make up`` for end-to-end tests, shared by the test
modules of one session: ``racksmith up --emulate-hosts 10 --apply-emulated-hosts
--apply examples/cluster --apply tests/e2e/manifests/extra-workers.yaml`` as a
real process (``make up``'s cluster plus four workers), helpers to wait for
it and to run the guides' bash blocks against it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.rack import Rack
from tests.integration.test_docs import bash_blocks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "cluster"
MACHINES = ["demo-master-1", "demo-master-2", "demo-master-3",
            "demo-worker-1", "demo-worker-2", "demo-infra-1"]
EXTRA = Path(__file__).resolve().parent / "manifests" / "extra-workers.yaml"
EXTRA_MACHINES = ["demo-worker-3", "demo-worker-4", "demo-worker-5", "demo-worker-6"]
ALL_MACHINES = MACHINES + EXTRA_MACHINES
"""The session's demo cluster: the examples' six machines and four more
workers (tests/e2e/manifests) for the maintenance tests."""
HOSTS = len(ALL_MACHINES)
HARDWARE = "fake"
"""The demo's hosts have instant fake BMCs (see tests/e2e/conftest.py)."""
ROLE_PREFIX = "node-role.kubernetes.io/"


def wait_for(rack: Rack, what: str, check: Callable[[], Any], timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(2.0)
    machines = {m["metadata"]["name"]: (m.get("status") or {})
                for m in rack.get("machines")["items"]}
    raise AssertionError(f"{what} not reached in {timeout}s; machines: {machines}\n"
                         f"{rack.server.log()[-6000:]}")


def machines_ready(rack: Rack) -> dict[str, dict[str, Any]] | None:
    items = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
    if all((items.get(n, {}).get("status") or {}).get("phase") == "Ready" for n in ALL_MACHINES):
        return items
    return None


def host_root(rack: Rack, host: str) -> Path:
    return rack.data_dir / "emulator" / "hosts" / host / "root"


def guide_blocks(guide: str) -> list[str]:
    return bash_blocks(ROOT / "docs" / guide)


def run_block(rack: Rack, block: str, timeout: float = 120) -> str:
    env = {"KUBECONFIG": str(rack.server.kubeconfig), "HOME": str(rack.home),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], capture_output=True,
                         text=True, env=env, timeout=timeout, cwd=rack.home)
    assert res.returncode == 0, f"{block}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res.stdout


