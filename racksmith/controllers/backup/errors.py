"""What a backup produced, or why it failed: shared by the controller, the
cluster store lookup and the composition root's snapshotters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Snapshot:
    """A backup file written and verified."""

    file: str
    size: int
    sha256: str
    resource_version: int
    objects: int
    encrypted: bool
    verified_at: datetime


class SnapshotFailed(Exception):
    """The backup could not be taken (the message says why; never a secret)."""
