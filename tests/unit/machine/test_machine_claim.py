"""The host claim against a double of the API: a lost race moves on, never overwrites."""

from __future__ import annotations

import copy
from typing import Any

from racksmith.clock import FakeClock
from racksmith.controllers.machine.commit import Committer
from racksmith.runtime.errors import Conflict
from tests.unit.machine import builders as b

OTHER = {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine", "name": "m2",
         "namespace": b.NS, "uid": "uid-m2"}


class RacingHosts:
    """Hosts by name with resourceVersions; ``race``: hosts another claimer
    takes between our read and our write."""

    def __init__(self, *names: str, race: set[str] | None = None) -> None:
        self.hosts = {}
        for name in names:
            raw = b.host(name).model_dump(mode="json", by_alias=True, exclude_none=True)
            raw["metadata"]["resourceVersion"] = "1"
            self.hosts[name] = raw
        self.race = race or set()

    async def get(self, res: Any, namespace: str, name: str, *, live: bool = False
                  ) -> dict[str, Any] | None:
        assert live, "a claim reads the host live"
        return copy.deepcopy(self.hosts.get(name))

    async def update(self, res: Any, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        current = self.hosts[name]
        if name in self.race:
            self.race.discard(name)
            current["spec"]["consumerRef"] = OTHER
            current["metadata"]["resourceVersion"] = "2"
        if obj["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "409")
        obj["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.hosts[name] = obj
        return obj


def consumer(api: RacingHosts, name: str) -> Any:
    return api.hosts[name]["spec"].get("consumerRef", {}).get("name")


async def test_a_lost_race_moves_to_the_next_host() -> None:
    api = RacingHosts("h1", "h2", race={"h1"})
    committer = Committer(api, FakeClock())  # type: ignore[arg-type]
    outcome = await committer._claim(b.machine(), ("h1", "h2"))
    assert (consumer(api, "h1"), consumer(api, "h2")) == ("m2", "m1")
    assert [e.reason for e in outcome.events] == ["HostClaimed"]
    ref = api.hosts["h2"]["spec"]["consumerRef"]
    assert ref == {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine",
                   "name": "m1", "namespace": b.NS, "uid": b.UID}


async def test_every_host_lost_claims_nothing() -> None:
    api = RacingHosts("h1", race={"h1"})
    outcome = await Committer(api, FakeClock())._claim(  # type: ignore[arg-type]
        b.machine(), ("h1",))
    assert consumer(api, "h1") == "m2" and outcome.events == []


async def test_a_write_that_only_raced_a_status_update_retries_the_same_host() -> None:
    api = RacingHosts("h1")
    real_update = api.update
    calls = {"n": 0}

    async def bumped(res: Any, obj: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:  # the BMH controller wrote the status meanwhile
            api.hosts["h1"]["metadata"]["resourceVersion"] = "5"
            raise Conflict(409, "Conflict", "409")
        return await real_update(res, obj)

    api.update = bumped  # type: ignore[method-assign]
    await Committer(api, FakeClock())._claim(b.machine(), ("h1",))  # type: ignore[arg-type]
    assert consumer(api, "h1") == "m1"
