"""The agent's side of the Volume task protocol (docs/design/volume-contracts.md).

Owns the words the Volume controller and the agent exchange through the
Volume object: the job id in ``status.job`` (``<op>:<id>``, :class:`Job`),
the result annotation ``storage.racksmith.io/job-result``
(:class:`JobResult`, JSON), the force annotation, the failure reasons
(:class:`FailureReason`) and :class:`TaskFailed`, which the storage tasks
raise to end a job with ``ok: false``. Pure data; called by ``tasks`` and
``loop``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "FORCE_ANNOTATION",
    "JOB_RESULT_ANNOTATION",
    "FailureReason",
    "Job",
    "JobOp",
    "JobResult",
    "Prepared",
    "TaskFailed",
    "is_forced",
]

JOB_RESULT_ANNOTATION = "storage.racksmith.io/job-result"
FORCE_ANNOTATION = "storage.racksmith.io/force"

_JOB_RE = re.compile(r"^(prepare|unprepare):([0-9a-zA-Z-]{1,64})$")


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


class TaskFailed(Exception):
    """A storage task ended in a terminal failure: ``reason`` and a message for users."""

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Job:
    """A parsed ``status.job``."""

    op: JobOp
    id: str

    @classmethod
    def parse(cls, text: str) -> Job | None:
        """The job named by ``text``; None when it is not ``<op>:<id>``."""
        match = _JOB_RE.match(text)
        if match is None:
            return None
        return cls(JobOp(match.group(1)), match.group(2))

    def __str__(self) -> str:
        return f"{self.op.value}:{self.id}"


@dataclass(frozen=True)
class Prepared:
    """What a successful prepare reports."""

    device_name: str
    size_bytes: int
    uuid: str | None = None


@dataclass(frozen=True)
class JobResult:
    """The value of the ``job-result`` annotation."""

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

    def to_json(self) -> str:
        """The annotation text (fields that are None are left out)."""
        body: dict[str, Any] = {
            "job": self.job, "ok": self.ok, "deviceName": self.device_name,
            "sizeBytes": self.size_bytes, "uuid": self.uuid, "error": self.error,
            "reason": self.reason,
        }
        return json.dumps({k: v for k, v in body.items() if v is not None}, sort_keys=True)

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
            job=data["job"], ok=data.get("ok") is True,
            device_name=_str_or_none(data.get("deviceName")),
            size_bytes=size if isinstance(size, int) else None,
            uuid=_str_or_none(data.get("uuid")), error=_str_or_none(data.get("error")),
            reason=_str_or_none(data.get("reason")),
        )


def is_forced(annotations: dict[str, Any] | None) -> bool:
    """Whether the Volume carries ``storage.racksmith.io/force: "true"``."""
    return str((annotations or {}).get(FORCE_ANNOTATION, "")).lower() == "true"


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
