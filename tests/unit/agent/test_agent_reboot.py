"""``requiresReboot``: the agent touches /var/run/reboot-required when such an
item changes the host, and every status report carries ``rebootRequired``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from racksmith.agent.host import REBOOT_REQUIRED
from racksmith.agent.loop import Outcome
from racksmith.clock import FakeClock
from tests.unit.agent.test_agent_loop import FakeLCM, file_item, make_loop


def kernel(version: str = "6.8.0-50", *, reboot: bool = True) -> dict[str, Any]:
    return {"name": "linux-image", "phase": "configuration", "type": "package",
            "requiresReboot": reboot, "params": {"name": "linux-image", "version": version}}


def flag(root: Path) -> Path:
    return root / REBOOT_REQUIRED.lstrip("/")


async def test_a_changed_rebooting_item_touches_the_flag_and_reports_it(tmp_path: Path) -> None:
    api = FakeLCM([file_item("a", "/etc/a"), kernel()])
    loop = make_loop(tmp_path, api)
    result = await loop.run_pass()
    assert result.outcome == Outcome.READY and result.changed["linux-image"] is True
    assert flag(tmp_path).exists()
    assert api.status["rebootRequired"] is True
    # The report right after item "a" (before the kernel) said no reboot yet.
    assert [p["rebootRequired"] for p in api.patches] == [False, False, True]


async def test_an_unchanged_rebooting_item_does_not_touch_the_flag(tmp_path: Path) -> None:
    api = FakeLCM([kernel()])
    loop = make_loop(tmp_path, api)
    await loop.run_pass()
    flag(tmp_path).unlink()  # the boot that followed
    result = await loop.run_pass()
    assert result.changed == {"linux-image": False}
    assert not flag(tmp_path).exists()
    assert api.status["rebootRequired"] is False


async def test_a_changed_item_without_requires_reboot_does_not(tmp_path: Path) -> None:
    api = FakeLCM([kernel(reboot=False), file_item("a", "/etc/a")])
    await make_loop(tmp_path, api).run_pass()
    assert not flag(tmp_path).exists()
    assert all(p["rebootRequired"] is False for p in api.patches)


async def test_the_idle_heartbeat_reports_the_flag_as_it_is(tmp_path: Path) -> None:
    api = FakeLCM([])
    loop = make_loop(tmp_path, api, FakeClock())
    await loop.heartbeat()
    assert api.patches[-1]["rebootRequired"] is False
    # Someone else (a package hook) asked for a reboot: reported too.
    flag(tmp_path).parent.mkdir(parents=True)
    flag(tmp_path).touch()
    await loop.heartbeat()
    assert api.patches[-1]["rebootRequired"] is True
    assert set(api.patches[-1]) == {"heartbeat", "agentVersion", "rebootRequired"}


async def test_a_failed_rebooting_item_does_not_touch_the_flag(tmp_path: Path) -> None:
    bad = {**kernel(), "params": {"version": "1"}}  # no name: the item fails
    api = FakeLCM([bad])
    result = await make_loop(tmp_path, api).run_pass()
    assert result.outcome == Outcome.FAILED
    assert not flag(tmp_path).exists()
    assert api.status["rebootRequired"] is False
