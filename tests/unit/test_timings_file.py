"""``racksmith up --timings FILE``: overrides by path, defaults elsewhere,
errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from racksmith.app.settings import Timings
from racksmith.app.timings_file import TimingsError, load_timings

E2E = Path(__file__).resolve().parents[1] / "e2e" / "timings.yaml"


def test_overrides_by_path_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("controllers:\n  machine: {retry_missing: 1}\n"
                    "  update: {node_flow: {lock_retry: 0.5}}\nironic: {power_poll: 1}\n")
    t = load_timings(path)
    d = Timings()
    assert t.controllers.machine.retry_missing == 1.0
    assert t.controllers.machine.resync == d.controllers.machine.resync
    assert t.controllers.update.node_flow.lock_retry == 0.5
    flow, default_flow = t.controllers.update.node_flow, d.controllers.update.node_flow
    assert flow.reboot_retry == default_flow.reboot_retry
    assert t.ironic.power_poll == 1.0 and t.ironic.action_poll == d.ironic.action_poll
    assert t.controllers.baremetalhost == d.controllers.baremetalhost
    assert load_timings(_write(tmp_path, "")) == d


def _write(tmp: Path, text: str) -> Path:
    path = tmp / "x.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "needle"), [
    ("controllers: {machine: {nope: 1}}", "timings.controllers.machine.nope: unknown"),
    ("controllers: {machine: {resync: fast}}", "timings.controllers.machine.resync: expected"),
    ("controllers: {machine: {resync: true}}", "timings.controllers.machine.resync: expected"),
    ("controllers: {machine: 3}", "timings.controllers.machine: expected a mapping"),
    ("controllers: {machine: {resync: -1}}", "timings.controllers.machine"),
    ("- 1", "timings: expected a mapping"),
    ("a: [", "x.yaml"),
])
def test_bad_files_name_the_field(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(TimingsError, match=needle.replace(".", r"\.")):
        load_timings(_write(tmp_path, text))


def test_the_e2e_timings_load_and_keep_the_reboot_retry() -> None:
    t = load_timings(E2E)
    d = Timings()
    flow, default_flow = t.controllers.update.node_flow, d.controllers.update.node_flow
    assert flow.reboot_retry == default_flow.reboot_retry
    assert t.controllers.baremetalhost.poll_default < d.controllers.baremetalhost.poll_default
