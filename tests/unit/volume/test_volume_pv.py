"""The PersistentVolume of a Volume, the job names and results, the status rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from racksmith.controllers.volume.names import FINALIZER
from racksmith.controllers.volume.observed import PVView, StorageClassView
from racksmith.controllers.volume.plan import StartJob, Step, Wait, available, failed, pending
from racksmith.controllers.volume.pv import pv_manifest, size_quantity
from racksmith.controllers.volume.status import apply_step, same_status, status_events
from racksmith.kinds.storage import VolumePhase, VolumeReason
from racksmith.kinds.volumejobs import JOB_RESULT_ANNOTATION, Job, JobOp, JobResult, new_job
from racksmith.runtime.conditions import EventSpec
from tests.unit.volume import builders as b

NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("size", "quantity"), [
    (2**30, "1Gi"), (3 * 2**20, "3Mi"), (1536 * 2**20, "1536Mi"), (1000, "1000"),
    (2**40, "1Ti"), (1024, "1Ki"),
])
def test_size_quantity(size: int, quantity: str) -> None:
    assert size_quantity(size) == quantity


def test_pv_manifest_template_is_the_base_and_ours_win() -> None:
    template = {"metadata": {"name": "ignored", "labels": {"team": "a",
                                                          "storage.racksmith.io/volume": "x"},
                             "finalizers": ["example.com/keep"]},
                "spec": {"capacity": {"storage": "1Ti"}, "mountOptions": ["noatime", "sync"],
                         "claimRef": {"name": "sneaky"}, "accessModes": ["ReadWriteOncePod"],
                         "persistentVolumeReclaimPolicy": "Delete"}}
    pv = pv_manifest(b.volume(template=template), b.SC, "loop3", "1Gi")
    meta, spec = pv["metadata"], pv["spec"]
    assert meta["name"] == "v1"
    assert meta["labels"] == {"team": "a", "storage.racksmith.io/volume": "v1"}
    assert meta["finalizers"] == ["example.com/keep", FINALIZER]
    assert meta["ownerReferences"][0]["uid"] == b.UID
    assert spec["capacity"] == {"storage": "1Gi"}
    assert spec["mountOptions"] == ["noatime", "sync"]
    assert "claimRef" not in spec
    assert spec["accessModes"] == ["ReadWriteOncePod"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["local"] == {"path": "/dev/loop3", "fsType": "xfs"}
    assert pv["status"] == {"phase": "Available"}


def test_pv_manifest_block_mode_has_no_file_system() -> None:
    pv = pv_manifest(b.volume(mode="Block"), b.SC, "sdb", "1Gi")
    assert pv["spec"]["local"] == {"path": "/dev/sdb"}
    assert pv["spec"]["volumeMode"] == "Block"
    assert "mountOptions" not in pv["spec"]


def test_pv_manifest_default_fs_type() -> None:
    pv = pv_manifest(b.volume(), StorageClassView("local"), "loop1", "1Gi")
    assert pv["spec"]["local"]["fsType"] == "ext4"
    assert "mountOptions" not in pv["spec"]


def test_job_names() -> None:
    job = new_job(JobOp.PREPARE)
    assert Job.parse(str(job)) == job
    assert new_job(JobOp.PREPARE).id != job.id
    for bad in (None, "", "prepare", "prepare:XYZ", "format:0123abcd", "prepare:0123abcd9"):
        assert Job.parse(bad) is None


def test_job_results_are_parsed_leniently() -> None:
    result = JobResult(job="prepare:0123abcd", ok=True, device_name="loop3", size_bytes=5)
    parsed = JobResult.from_annotations({JOB_RESULT_ANNOTATION: result.to_annotation()})
    assert parsed == result
    for junk in ("{", "[]", '{"ok": true}', '{"job": 3}'):
        assert JobResult.from_annotations({JOB_RESULT_ANNOTATION: junk}) is None
    odd = JobResult.from_annotations(
        {JOB_RESULT_ANNOTATION: '{"job": "j", "ok": "yes", "sizeBytes": true}'})
    assert odd is not None and not odd.ok and odd.size_bytes is None
    assert JobResult(job="j", ok=False).message.startswith("the agent reported a failure")


def test_pv_view_from_raw() -> None:
    view = PVView.from_raw({"metadata": {"name": "v1", "finalizers": [FINALIZER],
                                         "deletionTimestamp": "2024-01-01T00:00:00Z",
                                         "ownerReferences": [{
                                             "apiVersion": "storage.racksmith.io/v1alpha1",
                                             "kind": "Volume", "name": "v1", "uid": "u",
                                             "controller": True}]},
                            "spec": {"claimRef": {"namespace": "ns", "name": "c"}},
                            "status": {"phase": "Bound"}})
    assert (view.owner_uid, view.claim, view.is_bound, view.deleting, view.has_finalizer) == (
        "u", "ns/c", True, True, True)
    assert PVView.from_raw({"metadata": "junk"}).owner_uid is None


def test_status_follows_the_step() -> None:
    started = apply_step(None, Step(StartJob(JobOp.PREPARE), pending("started")),
                         job="prepare:0123abcd", now=NOW, generation=1)
    assert (started.phase, started.job) == (VolumePhase.PENDING, "prepare:0123abcd")
    done = apply_step(started, Step(Wait(None), available("ok"), clear_job=True,
                                    device_name="loop3", size="1Gi"),
                      job=None, now=NOW, generation=1)
    assert (done.phase, done.job, done.device_name, done.size) == (
        VolumePhase.AVAILABLE, None, "loop3", "1Gi")
    assert same_status(done, apply_step(done, Step(Wait(None), available("ok")), job=None,
                                        now=datetime(2025, 1, 1, tzinfo=UTC), generation=1))
    bad = Step(Wait(None), failed(VolumeReason.CREATION_ERROR, "StorageClass x not found"))
    events = status_events(started, bad)
    assert [(e.type, e.reason) for e in events] == [("Normal", "Failed"),
                                                    ("Warning", "CreationError")]
    failed_status = apply_step(started, bad, job=None, now=NOW, generation=1)
    assert failed_status.job == "prepare:0123abcd"  # a validation failure keeps the job
    assert status_events(failed_status, bad) == []


def test_a_step_telling_its_own_event_is_not_told_twice() -> None:
    started = apply_step(None, Step(Wait(None), pending("job started")),
                         job="prepare:0123abcd", now=NOW, generation=1)
    told = (EventSpec("Normal", "PersistentVolumeCreated", "PersistentVolume v (1Gi)"),)
    done = Step(Wait(None), available("ok"), clear_job=True, device_name="loop3", size="1Gi",
                events=told)
    assert status_events(started, done, told) == []  # the phase change is told by told
    assert [e.reason for e in status_events(started, done)] == ["Available"]
    bad = Step(Wait(None), failed(VolumeReason.CREATION_ERROR, "no"))
    assert [e.reason for e in status_events(started, bad, told)] == ["CreationError"]
