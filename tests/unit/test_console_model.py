"""The console's pure rules (``static/js/model.js``) under node's test runner,
and the volume deletion rule checked against the planner it mirrors.

Node is part of the machine (``/usr/bin/node``), so nothing is skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from racksmith.planners.volumes import deletion_blocker

ROOT = Path(__file__).resolve().parents[2]
NODE_TESTS = ROOT / "tests" / "unit" / "console"
MODEL_JS = ROOT / "racksmith" / "console" / "static" / "js" / "model.js"


def node() -> str:
    path = shutil.which("node") or "/usr/bin/node"
    assert Path(path).exists(), "node is not installed (it is part of the machine: /usr/bin/node)"
    return path


def test_model_js_under_node_test() -> None:
    proc = subprocess.run([node(), "--test", f"{NODE_TESTS.relative_to(ROOT)}/"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout}\n{proc.stderr}"
    assert "# fail 0" in proc.stdout, proc.stdout


def pv(phase: str, claim: dict[str, str] | None, name: str | None = "vol-a") -> dict[str, Any]:
    return {"metadata": {"name": name} if name else {},
            "spec": {"claimRef": claim} if claim is not None else {},
            "status": {"phase": phase}}


CASES: list[tuple[str, dict[str, Any] | None]] = [
    ("vol-a", pv("Bound", {"namespace": "apps", "name": "data-db-0"})),
    ("vol-a", pv("Bound", None)),
    ("vol-a", pv("Bound", {"name": "only-name"})),
    ("vol-a", pv("Bound", {"namespace": "only-ns"})),
    ("data-1", pv("Bound", {"namespace": "db", "name": "pg-0"}, name="pv-of-data-1")),
    ("vol-a", pv("Bound", {"namespace": "apps", "name": "x"}, name=None)),
    ("vol-a", pv("Available", None)),
    ("vol-a", pv("Released", {"namespace": "apps", "name": "data-db-0"})),
    ("vol-a", None),
]


def test_volume_deletion_blocker_matches_the_planner() -> None:
    """Same text for the same Volume and PV (a Volume not being deleted)."""
    script = (
        f"import {{ volumeDeletionBlocker }} from {json.dumps(MODEL_JS.as_uri())};\n"
        "let data = '';\n"
        "process.stdin.on('data', (c) => { data += c; });\n"
        "process.stdin.on('end', () => {\n"
        "  const out = JSON.parse(data).map(([name, pv]) =>\n"
        "    volumeDeletionBlocker({ metadata: { name } }, pv));\n"
        "  process.stdout.write(JSON.stringify(out));\n"
        "});\n")
    proc = subprocess.run([node(), "--input-type=module", "-e", script], cwd=ROOT,
                          input=json.dumps(CASES), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from_js = json.loads(proc.stdout)
    from_py = [deletion_blocker(name, pv_obj) for name, pv_obj in CASES]
    assert from_js == from_py
    assert sum(1 for r in from_py if r is not None) == 6
