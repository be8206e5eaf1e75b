"""The task protocol's data: job ids and the agent's job results, pure.

Owns ``JobOp`` (prepare, unprepare), ``Job`` (``"<op>:<id>"`` as written to
``status.job``), ``new_job`` (a fresh id per attempt) and ``JobResult``
(the agent's ``storage.racksmith.io/job-result`` annotation, parsed
leniently: a missing or malformed annotation is no result). The protocol
itself is in ``docs/design/volume-contracts.md``, "The task protocol".
"""

from __future__ import annotations

import enum
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from racksmith.controllers.volume.names import JOB_RESULT_ANNOTATION

_ID = re.compile(r"^[0-9a-f]{8}$")


class JobOp(enum.Enum):
    """What a storage task does on the node."""

    PREPARE = "prepare"
    """Create/format the device so that a PV can expose it."""
    UNPREPARE = "unprepare"
    """Release the device (detach and remove a sparse file, wipe a raw device)."""


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
class JobResult:
    """What the agent reported for job ``job`` (``error``/``reason`` on failure)."""

    job: str
    ok: bool
    device_name: str | None = None
    size_bytes: int | None = None
    uuid: str | None = None
    error: str | None = None
    reason: str | None = None

    @property
    def message(self) -> str:
        """The failure as a user reads it: ``"<reason>: <error>"``."""
        error = self.error or "the agent reported a failure without a message"
        return f"{self.reason}: {error}" if self.reason else error

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> JobResult | None:
        """The result in ``annotations``; None when absent or malformed."""
        text = annotations.get(JOB_RESULT_ANNOTATION)
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

    def to_annotation(self) -> str:
        """The annotation value for this result (what the agent writes)."""
        data = {"job": self.job, "ok": self.ok, "deviceName": self.device_name,
                "sizeBytes": self.size_bytes, "uuid": self.uuid, "error": self.error,
                "reason": self.reason}
        return json.dumps({k: v for k, v in data.items() if v is not None})


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
