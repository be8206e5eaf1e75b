"""The copy-paste examples of the user guides run as written.

Every fenced ```bash block of the guides listed here is run, in order, with
``bash -euo pipefail`` and plain ``kubectl`` (the dispatcher picks the build
matching the server), against a real server process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.process import ROOT, ServerProc, start_server

GUIDES = ["docs/getting-started.md", "docs/security.md", "docs/access.md"]
_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def bash_blocks(path: Path) -> list[str]:
    return _BLOCK.findall(path.read_text())


def run_guide(guide: str, server: ServerProc, tmp_path: Path, path: str = "/usr/bin:/bin"
              ) -> None:
    """Every bash block of ``guide``, in order, against ``server``."""
    blocks = bash_blocks(ROOT / guide)
    assert blocks, f"{guide} has no bash examples"
    env = {"KUBECONFIG": str(server.kubeconfig), "HOME": str(tmp_path), "PATH": path}
    for i, block in enumerate(blocks):
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], capture_output=True,
                             text=True, env=env, timeout=120, cwd=tmp_path)
        assert res.returncode == 0, (
            f"{guide} block {i + 1} failed:\n{block}\n--- stdout ---\n{res.stdout}\n"
            f"--- stderr ---\n{res.stderr}\n--- server ---\n{server.log()[-2000:]}")


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_examples_run(guide: str, server_process: ServerProc, tmp_path: Path) -> None:
    run_guide(guide, server_process, tmp_path)


@pytest.fixture(scope="module")
def site_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """``racksmith up`` with its controllers (no Ironic, no hosts), stopped by PID."""
    proc = start_server(tmp_path_factory.mktemp("site"), command="up", extra=[
        "--no-ironic", "--no-console", "--no-reference-workloads"])
    try:
        yield proc
    finally:
        proc.kill()


def test_control_plane_guide_examples_run(site_process: ServerProc, tmp_path: Path) -> None:
    """docs/control-plane.md's examples need the Cluster controller and the
    ``racksmith`` command: they run against ``racksmith up``."""
    run_guide("docs/control-plane.md", site_process, tmp_path,
              path=f"{Path(sys.executable).parent}:/usr/bin:/bin")
