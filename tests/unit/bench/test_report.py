"""bench/record.py and bench/report.py: docs/benchmarks.md's figures come
from the recorded runs, never from a hand."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


report = _module("report")
record = _module("record")

DOC = """# Page

<!-- figures:summary -->
<!-- /figures:summary -->

## Backup

Prose stays.

<!-- figures:backup -->
stale hand-written figure
<!-- /figures:backup -->
"""

BACKUP = {"objects": 10, "load": 0.1, "rows": [
    {"what": "plain copy of the same parts (reference)", "seconds": 0.01, "bytes": 1},
    {"what": "backup create", "seconds": 0.05, "bytes": 1},
    {"what": "restore (encrypted) into a new data dir", "seconds": 0.04, "bytes": None}]}


def _record(results: Path, name: str, payload: object, exit_code: int = 0) -> None:
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps({
        "name": name, "command": f"python bench/{name}.py", "date": "2026-01-02",
        "machine": {"cpu": "Test CPU", "cores": 2, "python": "3.11", "loop_10m_s": 0.5},
        "load_before": 0.1, "load_after": 0.2, "seconds": 1.0, "exit": exit_code,
        "results": payload}))


def test_the_committed_page_matches_the_committed_results() -> None:
    """What `make bench` recorded is what docs/benchmarks.md shows: run
    bench/report.py after recording a run, never edit the figures by hand."""
    assert report.main(["--check"]) == 0


def test_every_benchmark_of_make_bench_has_a_block_and_an_extractor() -> None:
    makefile = (ROOT / "Makefile").read_text()
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    recorded = [line.split()[1] for line in makefile.splitlines()
                if line.startswith("\t-$(RECORD) ")]
    assert "scale" in recorded and "apiserver" in recorded
    for name in recorded:
        assert name in report.BENCHMARKS, name
        assert f"<!-- figures:{name} -->" in doc, name


def test_blocks_are_rewritten_and_prose_kept(tmp_path: Path) -> None:
    results, doc = tmp_path / "results", tmp_path / "page.md"
    _record(results, "backup", BACKUP)
    doc.write_text(DOC)
    assert report.main(["--results", str(results), "--doc", str(doc), "--check"]) == 1
    assert report.main(["--results", str(results), "--doc", str(doc)]) == 0
    page = doc.read_text()
    assert "stale hand-written figure" not in page and "Prose stays." in page
    assert "| Backup: backup create, 10 objects | 0.050 s (5.0x the copy) | — | — |" in page
    assert "Current figures (2026-01-02, `python bench/backup.py`, Test CPU" in page
    assert report.main(["--results", str(results), "--doc", str(doc), "--check"]) == 0
    assert report.main(["--results", str(results), "--doc", str(doc)]) == 0
    assert doc.read_text() == page  # a second pass changes nothing


def test_a_failed_run_is_shown_failed(tmp_path: Path) -> None:
    results, doc = tmp_path / "results", tmp_path / "page.md"
    _record(results, "backup", None, exit_code=3)
    doc.write_text(DOC)
    assert report.main(["--results", str(results), "--doc", str(doc)]) == 1
    assert "| Backup: the run | failed (exit 3) | ran | not met |" in doc.read_text()


def test_a_page_without_the_block_of_a_recorded_run_is_an_error(tmp_path: Path) -> None:
    results, doc = tmp_path / "results", tmp_path / "page.md"
    _record(results, "backup", BACKUP)
    doc.write_text("# Page\n\n<!-- figures:summary -->\n<!-- /figures:summary -->\n")
    assert report.main(["--results", str(results), "--doc", str(doc)]) == 1


@pytest.mark.parametrize("ok", [True, False])
def test_record_keeps_the_scripts_json_and_the_run(tmp_path: Path, ok: bool) -> None:
    """record.py adds --json PATH to the command and wraps what it wrote."""
    code = ("import json, sys; json.dump({'figure': 7}, open(sys.argv[2], 'w'))" if ok
            else "import sys; sys.exit(2)")
    rc = record.main(["--results", str(tmp_path), "demo", "--", sys.executable, "-c", code])
    got = json.loads((tmp_path / "demo.json").read_text())
    assert (rc, got["exit"]) == ((0, 0) if ok else (2, 2))
    assert got["results"] == ({"figure": 7} if ok else None)
    assert got["name"] == "demo" and got["machine"]["cores"] >= 1
    assert got["command"].startswith("python -c ")


def test_record_passes_the_command_line_on_as_given(tmp_path: Path) -> None:
    """Only the separator after NAME is record.py's: a later ``--`` is the script's."""
    code = "import json, sys; json.dump(sys.argv[1:-2], open(sys.argv[-1], 'w'))"
    assert record.main(["--results", str(tmp_path), "argv", "--", sys.executable, "-c", code,
                        "--", "x"]) == 0
    assert json.loads((tmp_path / "argv.json").read_text())["results"] == ["--", "x"]
