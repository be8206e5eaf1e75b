"""The provisioner as a source of BareMetalHost keys (``backend``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from racksmith.controllers.baremetalhost.backend import BackendSource
from racksmith.provisioner.base import HostChanges
from racksmith.runtime.keys import ObjectKey
from tests.harness.fixture_provisioner import FixtureProvisioner


class Feed:
    def __init__(self, changes: list[tuple[str, str]]) -> None:
        self.changes = changes

    async def host_changes(self) -> AsyncIterator[tuple[str, str]]:
        for change in self.changes:
            yield change


async def test_changed_hosts_become_keys_of_the_watched_namespace() -> None:
    feed = Feed([("metal", "a"), ("other", "b"), ("metal", "c")])
    assert isinstance(feed, HostChanges)
    scoped = BackendSource(feed, "metal")
    assert scoped.has_synced  # a hint source: nothing to list first
    assert [k async for k in scoped.keys()] == [ObjectKey("metal", "a"), ObjectKey("metal", "c")]
    everywhere = BackendSource(feed)
    assert len([k async for k in everywhere.keys()]) == 3


def test_the_fixture_provisioner_reports_no_changes() -> None:
    assert not isinstance(FixtureProvisioner(), HostChanges)
