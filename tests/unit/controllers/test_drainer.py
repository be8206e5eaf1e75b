"""The node flow's Drainer evicts each pod once (racksmith.controllers.maintenance.drain)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from racksmith.controllers.maintenance.drain import Drainer
from racksmith.planners.maintenance import MaintenanceTimings
from racksmith.runtime.errors import TooManyRequests


class FakeClient:
    """Only what ``Drainer.evict`` uses: every eviction succeeds."""

    def __init__(self) -> None:
        self.evicted: list[tuple[str, str]] = []

    async def evict(self, namespace: str, name: str) -> TooManyRequests | None:
        self.evicted.append((namespace, name))
        return None


def pod(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "apps", "name": name, "uid": uid},
            "spec": {"nodeName": "n1"}}


NOW = datetime(2026, 12, 6, tzinfo=UTC)


async def test_a_pod_still_listed_after_its_eviction_is_not_evicted_again() -> None:
    drainer, client = Drainer(MaintenanceTimings()), FakeClient()
    views = drainer.views("n1", [pod("web-1", "u1"), pod("web-2", "u2")])
    await drainer.evict(client, "n1", views, NOW)  # type: ignore[arg-type]
    assert client.evicted == [("apps", "web-1"), ("apps", "web-2")]
    # a cache that has not seen the deletions yet: nothing to evict again
    assert drainer.views("n1", iter([pod("web-1", "u1"), pod("web-2", "u2")])) == ()
    # web-1 came back as a new pod (same name, new uid): it is evicted; web-2 is gone
    again = drainer.views("n1", [pod("web-1", "u3")])
    assert [(p.namespace, p.name) for p in again] == [("apps", "web-1")]
    assert drainer.views("n1", [pod("web-2", "u2")])  # web-2 forgotten once gone
