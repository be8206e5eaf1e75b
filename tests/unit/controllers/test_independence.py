"""The import-linter independence contract covers every controller package,
so a new controller cannot import another unnoticed (``lint-imports``
checks the contract; this test checks the contract's list)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_independence_contract_lists_every_controller_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (independence,) = [c for c in contracts if c["type"] == "independence"]
    packages = sorted(f"racksmith.controllers.{p.name}"
                      for p in (ROOT / "racksmith" / "controllers").iterdir()
                      if (p / "__init__.py").is_file())
    assert sorted(independence["modules"]) == packages
