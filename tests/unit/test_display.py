"""The live display of racksmith up (racksmith.app.display): counts from
objects, and what a render shows — pure, no terminal."""

from __future__ import annotations

import io
import logging
from typing import Any

from rich.console import Console

from racksmith.app.display import LiveDisplay, site_counts


def machine(name: str, phase: str | None, cluster: str = "demo") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterName": cluster}, "status": {"phase": phase} if phase else {}}


def text_of(display: LiveDisplay) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(display.render())
    return console.export_text()


def test_site_counts() -> None:
    hosts = [{"status": {"provisioning": {"state": "provisioned"}}}, {"status": {}},
             {"status": {"provisioning": {"state": "provisioned"}}}]
    machines = [machine("a", "Ready"), machine("b", "Provisioning"), machine("c", None),
                machine("x", "Ready", cluster="other")]
    clusters = [{"metadata": {"namespace": "default", "name": "demo"}, "status": {}}]
    counts = site_counts(hosts, machines, clusters, [{"status": {"phase": "Available"}}], [])
    assert counts.hosts == {"provisioned": 2, "registering": 1}
    assert counts.machines == {"Ready": 2, "Provisioning": 1, "Pending": 1}
    assert counts.volumes == {"Available": 1} and not counts.plans
    (demo,) = counts.clusters
    assert (demo.name, demo.ready, demo.total, demo.phase) == ("default/demo", 1, 3, "Pending")


def test_render_shows_steps_counts_bars_and_the_last_problem() -> None:
    now = [100.0]
    display = LiveDisplay("/data/logs/racksmith.log", clock=lambda: now[0])
    display.step("starting the API server")
    display.step("cluster default/demo: 0/1 machines Ready")  # the bars show these
    now[0] = 165.0
    text = text_of(display)
    assert "racksmith up  1:05  starting" in text
    assert "… starting the API server" in text and "cluster default/demo:" not in text
    display.step("ready")
    display.counts = site_counts([], [machine("a", "Ready")], [
        {"metadata": {"namespace": "default", "name": "demo"}, "status": {"phase": "Ready"}}],
        [], [])
    display.problems.setFormatter(logging.Formatter("%(message)s"))
    display.problems.handle(logging.LogRecord("x", logging.WARNING, "f", 1, "disk slow", (),
                                              None))
    text = text_of(display)
    assert "racksmith up  1:05  ready" in text
    assert "✓ starting the API server" in text
    assert "machines  1: Ready 1" in text
    assert "cluster default/demo" in text and "1/1 machines Ready" in text
    assert "1 warning(s); last: disk slow" in text
    assert "logs: /data/logs/racksmith.log" in text
