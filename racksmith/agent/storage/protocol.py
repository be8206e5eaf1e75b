"""The agent's end of a storage task: ``TaskFailed``.

The Volume task protocol itself (jobs, results, failure reasons, the force
annotation) is declared once, for both sides, in ``racksmith.kinds.volumejobs``;
this module owns only the exception the storage tasks raise to end a job
with ``ok: false``. Called by ``tasks`` and the backends.
"""

from __future__ import annotations

from racksmith.kinds.volumejobs import FailureReason

__all__ = ["TaskFailed"]


class TaskFailed(Exception):
    """A storage task ended in a terminal failure: ``reason`` and a message for users."""

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
