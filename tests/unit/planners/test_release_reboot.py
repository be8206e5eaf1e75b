"""The release planner carries ``requiresReboot`` into the rendered items and their hash."""

from __future__ import annotations

from racksmith.kinds.cluster import StateItem
from racksmith.planners.release import item_hash, plan_state_items
from tests.unit.planners.test_release import ITEMS, cluster, item, ok, release

KERNEL = {**item("linux-image", "configuration", "package", name="linux-image",
                 version="6.8.0-50"), "requiresReboot": True}


def test_requires_reboot_is_rendered() -> None:
    planned = ok(plan_state_items(release([*ITEMS, KERNEL]), ["node"], cluster()))
    by_name = {i.name: i for i in planned.state_items()}
    assert by_name["linux-image"].requires_reboot is True
    assert by_name["kubelet"].requires_reboot is False
    dumped = by_name["linux-image"].model_dump(mode="json", by_alias=True)
    assert dumped["requiresReboot"] is True


def test_requires_reboot_is_part_of_the_hash() -> None:
    plain = StateItem.model_validate({**KERNEL, "requiresReboot": False})
    rebooting = StateItem.model_validate(KERNEL)
    assert item_hash(plain) != item_hash(rebooting)
    planned = ok(plan_state_items(release([*ITEMS, KERNEL]), ["node"], cluster()))
    assert planned.hashes()["linux-image"] == item_hash(rebooting)
