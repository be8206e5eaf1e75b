"""The Volume task protocol, both sides of it (docs/design/volume-contracts.md). Pure.

Owns the words the Volume controller and the node agent exchange through
the Volume object: the job in ``status.job`` (``"<op>:<id>"``, ``id`` 8
random hex chars new per attempt: ``Job``, ``JobOp``, ``new_job``), the
result annotation ``storage.racksmith.io/job-result`` (``JobResult``, JSON,
parsed leniently: a missing or malformed annotation is no result; what a
prepare reports is ``Prepared``), the force annotation (``is_forced``) and
the failure reasons (``FailureReason``). The controller writes jobs and
reads results; the agent reads jobs and writes results.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from racksmith.kinds.storage import GROUP

__all__ = [
    "FORCE_ANNOTATION",
    "JOB_RESULT_ANNOTATION",
    "FailureReason",
    "Job",
    "JobOp",
    "JobResult",
    "Prepared",
    "is_forced",
    "new_job",
]

JOB_RESULT_ANNOTATION = f"{GROUP}/job-result"
"""On the Volume, written by the agent: the JSON ``JobResult`` of the last job it ran."""
FORCE_ANNOTATION = f"{GROUP}/force"
"""On the Volume, written by the user: ``"true"`` formats a raw device that holds data."""

_ID = re.compile(r"^[0-9a-f]{8}$")


class JobOp(StrEnum):
    """What a job asks of the agent."""

    PREPARE = "prepare"
    """Create (sparse, LVM) or check (raw) the device and format it in Filesystem mode."""
    UNPREPARE = "unprepare"
    """Release the device: detach and remove the sparse file, wipe a raw device."""


class FailureReason(StrEnum):
    """``reason`` of a failed job result (the controller shows it in its message)."""

    DEVICE_NOT_FOUND = "DeviceNotFound"
    """The raw device path does not exist on the host."""
    DEVICE_IN_USE = "DeviceInUse"
    """The raw device holds a signature and the Volume is not forced."""
    UNSUPPORTED = "Unsupported"
    """The backend cannot run here (LVM on an emulated host, an unknown fsType)."""
    INVALID_JOB = "InvalidJob"
    """``status.job`` is not ``prepare:<id>`` or ``unprepare:<id>``."""
    INVALID_VOLUME = "InvalidVolume"
    """The Volume's spec cannot be read (no backend, bad size, bad path)."""
    INVALID_STORAGE_CLASS = "InvalidStorageClass"
    """The StorageClass is missing or its parameters cannot be read."""
    COMMAND_FAILED = "CommandFailed"
    """A tool (mkfs, losetup, wipefs, lvcreate...) exited nonzero."""
    HOST_ERROR = "HostError"
    """A file operation on the host failed."""


@dataclass(frozen=True)
class Job:
    """One attempt at a storage task, named ``"<op>:<id>"``."""

    op: JobOp
    id: str

    def __str__(self) -> str:
        return f"{self.op.value}:{self.id}"

    @classmethod
    def parse(cls, text: str | None) -> Job | None:
        """The job named by ``text`` (``status.job``); None when empty or not a job name."""
        if not text:
            return None
        op, _, job_id = text.partition(":")
        try:
            return cls(JobOp(op), job_id) if _ID.match(job_id) else None
        except ValueError:
            return None


def new_job(op: JobOp) -> Job:
    """A job of ``op`` with a fresh random id (8 hex chars)."""
    return Job(op, secrets.token_hex(4))


@dataclass(frozen=True)
class Prepared:
    """What a successful prepare reports."""

    device_name: str
    size_bytes: int
    uuid: str | None = None


@dataclass(frozen=True)
class JobResult:
    """What the agent reported for job ``job`` (``error``/``reason`` on failure)."""

    job: str
    ok: bool
    device_name: str | None = None
    size_bytes: int | None = None
    uuid: str | None = None
    error: str | None = None
    reason: str | None = None

    @classmethod
    def success(cls, job: str, prepared: Prepared | None = None) -> JobResult:
        if prepared is None:
            return cls(job, True)
        return cls(job, True, prepared.device_name, prepared.size_bytes, prepared.uuid)

    @classmethod
    def failure(cls, job: str, reason: FailureReason, error: str) -> JobResult:
        return cls(job, False, error=error, reason=reason.value)

    @property
    def message(self) -> str:
        """The failure as a user reads it: ``"<reason>: <error>"``."""
        error = self.error or "the agent reported a failure without a message"
        return f"{self.reason}: {error}" if self.reason else error

    def to_json(self) -> str:
        """The annotation text (fields that are None are left out)."""
        body: dict[str, Any] = {
            "job": self.job, "ok": self.ok, "deviceName": self.device_name,
            "sizeBytes": self.size_bytes, "uuid": self.uuid, "error": self.error,
            "reason": self.reason,
        }
        return json.dumps({k: v for k, v in body.items() if v is not None}, sort_keys=True)

    to_annotation = to_json

    @classmethod
    def from_json(cls, text: str | None) -> JobResult | None:
        """The result in annotation ``text``; None when absent or unreadable."""
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("job"), str):
            return None
        size = data.get("sizeBytes")
        return cls(
            job=data["job"],
            ok=data.get("ok") is True,
            device_name=_text(data.get("deviceName")),
            size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
            uuid=_text(data.get("uuid")),
            error=_text(data.get("error")),
            reason=_text(data.get("reason")),
        )

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> JobResult | None:
        """The result in a Volume's ``annotations``; None when absent or malformed."""
        return cls.from_json((annotations or {}).get(JOB_RESULT_ANNOTATION))


def is_forced(annotations: Mapping[str, Any] | None) -> bool:
    """Whether the Volume carries ``storage.racksmith.io/force: "true"``."""
    return str((annotations or {}).get(FORCE_ANNOTATION, "")).lower() == "true"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
