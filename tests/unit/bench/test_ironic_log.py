"""bench/ironic_log.py: Ironic's API request lines grouped by kind within windows."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ironic_log", ROOT / "bench" / "ironic_log.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


LINES = [
    "2026-12-04 21:42:27.252 30888 INFO ironic.api [None req-1 - - - - - -] 127.0.0.1 - "
    "GET /v1/drivers - 200 (21.28ms)",
    "2026-12-04 21:42:28.364 30888 INFO ironic.api [None req-2 - - - - - -] 127.0.0.1 - "
    "GET /v1/nodes?fields=uuid,name&limit=1000 - 200 (10.00ms)",
    "2026-12-04 21:42:29.000 30888 INFO ironic.api [None req-3 - - - - - -] 127.0.0.1 - "
    "GET /v1/nodes/h-7?fields=uuid - 200 (2.50ms)",
    "2026-12-04 21:42:29.500 30888 INFO ironic.api [None req-4 - - - - - -] 127.0.0.1 - "
    "PUT /v1/nodes/h-8/states/provision - 202 (30.00ms)",
    "2026-12-04 21:42:30.000 30888 INFO ironic.api [None req-5 - - - - - -] 127.0.0.1 - "
    "POST /v1/heartbeat/0c49b9c2-93b6-4906-abb0-74d60c78b0b0 - 409 (1.00ms)",
    "2026-12-04 21:42:31.000 30888 INFO ironic.conductor.manager [-] not an API line (9.0ms)",
    "2026-12-04 21:42:40.000 30888 INFO ironic.api [None req-6 - - - - - -] 127.0.0.1 - "
    "GET /v1/nodes/h-9?fields=uuid - 200 (7.50ms)",
]


def test_requests_are_grouped_by_kind_within_each_window() -> None:
    mod = _module()
    first = ("first", datetime(2026, 12, 4, 21, 42, 28), datetime(2026, 12, 4, 21, 42, 35))
    later = ("later", datetime(2026, 12, 4, 21, 42, 35), datetime(2026, 12, 4, 21, 43))
    out = mod.summarize(LINES, [first, later])
    assert out["first"] == {
        "GET /v1/nodes?fields,limit": (1, 10.0),
        "GET /v1/nodes/{node}?fields": (1, 2.5),
        "PUT /v1/nodes/{node}/states/provision": (1, 30.0),
        "POST /v1/heartbeat/{uuid} [409]": (1, 1.0),
    }
    assert out["later"] == {"GET /v1/nodes/{node}?fields": (1, 7.5)}
    lines = mod.table({"a": out["first"], "b": out["later"]}, hosts=2)
    assert lines[1].startswith("PUT /v1/nodes/{node}/states/provision")
    assert lines[-1].split()[1:] == ["2.00/host", "0.0", "0.50/host", "0.0"]
