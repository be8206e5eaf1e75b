"""What a reconcile returns or raises, and what the runtime does about it.

- ``Done()``: the object is as it should be; forget its backoff.
- ``RequeueAfter(seconds)``: look again after ``seconds`` (polling an external
  system, waiting for a timeout); forget its backoff.
- ``TemporaryError(msg, delay=None)``: failed, retry; after ``delay`` if given,
  else with the key's exponential backoff. Counted as an error.
- ``PermanentError(msg)``: failed in a way retrying cannot fix; logged,
  counted, not retried until the object changes (a new watch event).
- any other exception: an error, retried with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Done:
    """Reconciled; nothing to do until the object (or a mapped one) changes."""


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """Reconcile the same key again after ``seconds`` (0 = as soon as possible)."""

    seconds: float

    def __post_init__(self) -> None:
        if self.seconds < 0:
            raise ValueError("RequeueAfter.seconds must be >= 0")


Result = Done | RequeueAfter


class ReconcileError(Exception):
    """Base of the errors a reconciler raises to steer retries."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TemporaryError(ReconcileError):
    """Retry later: after ``delay`` seconds if given, else with backoff."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        if delay is not None and delay < 0:
            raise ValueError("TemporaryError.delay must be >= 0")
        self.delay = delay


class PermanentError(ReconcileError):
    """Do not retry; wait for the object to change."""
