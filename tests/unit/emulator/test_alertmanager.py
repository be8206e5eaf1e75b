"""The built-in alert source over real HTTP on 127.0.0.1 (the update
controller's Alertmanager v2 subset)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from racksmith.emulator.alertmanager import AlertStore, BuiltinAlertmanager


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def stamp(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def am(clock: Clock) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    server = BuiltinAlertmanager(AlertStore(clock))
    url = await server.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            yield url, session
    finally:
        await server.stop()
        await server.stop()  # idempotent


async def get(am: tuple[str, aiohttp.ClientSession], query: str = "") -> Any:
    url, session = am
    async with session.get(f"{url}/api/v2/alerts{query}") as resp:
        assert resp.status == 200
        return await resp.json()


async def post(am: tuple[str, aiohttp.ClientSession], body: Any) -> int:
    url, session = am
    async with session.post(f"{url}/api/v2/alerts", json=body) as resp:
        return resp.status


async def test_healthy_and_empty(am: tuple[str, aiohttp.ClientSession]) -> None:
    url, session = am
    assert url.startswith("http://127.0.0.1:")
    async with session.get(f"{url}/-/healthy") as resp:
        assert resp.status == 200
    assert await get(am) == []


async def test_post_then_list_with_the_update_controllers_query(
        am: tuple[str, aiohttp.ClientSession], clock: Clock) -> None:
    body = [{"labels": {"alertname": "KubeNodeNotReady", "node": "worker-1"},
             "annotations": {"summary": "node down"}}]
    assert await post(am, body) == 200
    alerts = await get(am, "?active=true&silenced=false&inhibited=false")
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["labels"] == {"alertname": "KubeNodeNotReady", "node": "worker-1"}
    assert alert["annotations"] == {"summary": "node down"}
    assert alert["status"]["state"] == "active"
    assert alert["startsAt"].startswith("2030-01-01T00:00:00")
    assert alert["endsAt"].startswith("2030-01-01T00:05:00")  # default resolve timeout
    assert await get(am, "?active=false") == []


async def test_same_labels_is_the_same_alert(am: tuple[str, aiohttp.ClientSession],
                                             clock: Clock) -> None:
    labels = {"alertname": "CephHealthWarning"}
    await post(am, [{"labels": labels}])
    clock.now += timedelta(minutes=1)
    await post(am, [{"labels": labels, "annotations": {"n": "2"}},
                    {"labels": {"alertname": "Other"}}])
    alerts = await get(am)
    assert sorted(a["labels"]["alertname"] for a in alerts) == ["CephHealthWarning", "Other"]
    ceph = next(a for a in alerts if a["labels"] == labels)
    assert ceph["annotations"] == {"n": "2"}
    assert ceph["startsAt"].startswith("2030-01-01T00:00:00")  # the first start is kept


async def test_ends_at_in_the_past_resolves(am: tuple[str, aiohttp.ClientSession],
                                            clock: Clock) -> None:
    labels = {"alertname": "KubeNodeNotReady"}
    await post(am, [{"labels": labels, "endsAt": stamp(clock.now + timedelta(hours=1))}])
    assert len(await get(am)) == 1
    await post(am, [{"labels": labels, "endsAt": stamp(clock.now - timedelta(seconds=1))}])
    assert await get(am) == []


async def test_alerts_expire_at_ends_at(am: tuple[str, aiohttp.ClientSession],
                                        clock: Clock) -> None:
    await post(am, [{"labels": {"alertname": "A"},
                     "endsAt": stamp(clock.now + timedelta(seconds=30))}])
    assert len(await get(am)) == 1
    clock.now += timedelta(seconds=31)
    assert await get(am) == []


async def test_future_starts_at_is_not_active_yet(am: tuple[str, aiohttp.ClientSession],
                                                  clock: Clock) -> None:
    await post(am, [{"labels": {"alertname": "Later"},
                     "startsAt": stamp(clock.now + timedelta(minutes=1))}])
    assert await get(am) == []
    clock.now += timedelta(minutes=2)
    assert [a["labels"]["alertname"] for a in await get(am)] == ["Later"]


@pytest.mark.parametrize("body", [
    {"labels": {"alertname": "x"}},           # not a list
    [{"annotations": {}}],                    # no labels
    [{"labels": {}}],                         # empty labels
    [{"labels": {"alertname": 1}}],           # not strings
    [{"labels": {"a": "b"}, "endsAt": "yesterday"}],
])
async def test_bad_bodies_are_400(am: tuple[str, aiohttp.ClientSession], body: Any) -> None:
    assert await post(am, body) == 400
    assert await get(am) == []


async def test_bad_json_and_bad_flag(am: tuple[str, aiohttp.ClientSession]) -> None:
    url, session = am
    async with session.post(f"{url}/api/v2/alerts", data=b"{nope",
                            headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400
    async with session.get(f"{url}/api/v2/alerts?active=maybe") as resp:
        assert resp.status == 400


async def test_fixed_port_and_double_start() -> None:
    first = BuiltinAlertmanager()
    url = await first.start()
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(RuntimeError):
        await first.start()
    await first.stop()
    again = BuiltinAlertmanager()
    assert await again.start(port=port) == url  # the same port after a restart
    await again.stop()
