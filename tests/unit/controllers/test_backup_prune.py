"""Retention of scheduled backups (racksmith.controllers.backup.to_prune): the
newest ``keep`` scheduled ones stay, the newest completed backup of all is
never deleted, backups by hand or before an update are not touched."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from racksmith.controllers.backup import BackupSchedule, to_prune
from racksmith.kinds.lcm import ControlPlaneBackup


def backup(name: str, minute: int, reason: str = "Scheduled", phase: str = "Completed",
           deleting: bool = False) -> ControlPlaneBackup:
    meta: dict[str, Any] = {"name": name,
                            "creationTimestamp": f"2026-12-04T10:{minute:02d}:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T11:00:00Z"
    return ControlPlaneBackup.model_validate({
        "apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "ControlPlaneBackup",
        "metadata": meta, "spec": {"reason": reason},
        "status": {"phase": phase, "completedAt": f"2026-12-04T10:{minute:02d}:30Z"}})


def test_the_oldest_scheduled_backups_go() -> None:
    items = [backup(f"s{i}", i) for i in range(5)]
    assert sorted(to_prune(items, 2)) == ["s0", "s1", "s2"]
    assert to_prune(items, 5) == []


def test_only_scheduled_and_finished_backups_are_pruned() -> None:
    items = [backup("hand", 0, reason="Manual"), backup("pre", 1, reason="PreUpdate"),
             backup("running", 2, phase="Running"), backup("s3", 3), backup("s4", 4),
             backup("gone", 0, deleting=True)]
    assert to_prune(items, 1) == ["s3"]


def test_the_newest_completed_backup_is_never_deleted() -> None:
    items = [backup("good", 0), backup("bad1", 1, phase="Failed"),
             backup("bad2", 2, phase="Failed")]
    assert sorted(to_prune(items, 1)) == ["bad1"]


@given(st.lists(st.tuples(st.sampled_from(["Completed", "Failed"]),
                          st.sampled_from(["Scheduled", "Manual", "PreUpdate"])),
                max_size=12), st.integers(1, 4))
def test_pruning_keeps_what_it_promises(spec: list[tuple[str, str]], keep: int) -> None:
    items = [backup(f"b{i}", i, reason=reason, phase=phase)
             for i, (phase, reason) in enumerate(spec)]
    pruned = set(to_prune(items, keep))
    by_name = {b.metadata.name: b for b in items}
    assert all(by_name[n].spec.reason.value == "Scheduled" for n in pruned)
    completed = [b for b in items if b.status and b.status.phase
                 and b.status.phase.value == "Completed"]
    if completed:
        assert completed[-1].metadata.name not in pruned
    scheduled = [b for b in items if b.spec.reason.value == "Scheduled"]
    assert len(scheduled) - len(pruned) >= min(keep, len(scheduled))
    BackupSchedule(every=60, keep=keep)  # a valid schedule
