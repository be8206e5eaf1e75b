"""The runtime's one error model for API answers.

Every non-2xx answer the :class:`~racksmith.runtime.client.Client` gets is
raised as one of these, built from the Status object the server sent (its
``reason``, ``message`` and ``details.causes``), so reconcilers branch on the
type, never on an HTTP code or on ``ApiException``:

- ``NotFound`` (404), ``AlreadyExists`` (409, reason AlreadyExists),
  ``Conflict`` (409, the object changed since it was read),
  ``Invalid`` (422, with the causes' field paths), ``Forbidden`` (403),
  ``TooManyRequests`` (429), ``Gone`` (410, resourceVersion too old),
  ``ServerError`` (5xx, or no answer at all: status 0).

``Conflict`` is a :class:`~racksmith.runtime.result.TemporaryError` with no
delay: the controller requeues the key with its backoff (and does not count
it as an error), so no reconciler catches it. The others are plain
``ApiError``: a reconcile that lets one escape is retried with backoff and
logged as a warning (no traceback: the message is the server's, already
free of secrets).

Messages are the server's Status message, cut to 500 characters; they never
hold a request body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from racksmith.runtime.result import TemporaryError


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``details.causes`` entry of a Status (422 field errors, 429 refusals)."""

    reason: str
    message: str
    field: str


class ApiError(Exception):
    """A non-2xx answer from the API server (``status`` 0: no answer)."""

    def __init__(self, status: int, reason: str, message: str,
                 causes: tuple[Cause, ...] = ()) -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes

    def describe(self) -> str:
        """The message followed by each cause's message (for a condition or an Event)."""
        extra = [c.message for c in self.causes if c.message]
        return f"{self.message} ({'; '.join(extra)})" if extra else self.message


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class AlreadyExists(ApiError):
    """409 on create: an object of that name exists."""


class Conflict(ApiError, TemporaryError):
    """409 on a write: the object changed since it was read; the runtime requeues.

    A :class:`~racksmith.runtime.result.TemporaryError`, so a reconcile that
    lets it escape is decided again from a fresh read."""

    def __init__(self, status: int, reason: str, message: str,
                 causes: tuple[Cause, ...] = ()) -> None:
        ApiError.__init__(self, status, reason, message, causes)
        self.delay = None


class Invalid(ApiError):
    """422: the object was refused; ``causes`` name the fields."""


class Forbidden(ApiError):
    """403: not allowed (an admission rule or access control)."""


class TooManyRequests(ApiError):
    """429: try later (an eviction a disruption budget refuses, a rate limit)."""


class Gone(ApiError):
    """410: the resourceVersion asked for is too old."""


class ServerError(ApiError):
    """5xx, or no answer (status 0)."""


_BY_STATUS: Mapping[int, type[ApiError]] = {
    403: Forbidden, 404: NotFound, 410: Gone, 422: Invalid, 429: TooManyRequests,
}


def error_from(status: int, body: bytes | str | None) -> ApiError:
    """The error for an answer with HTTP ``status`` and (Status) ``body``."""
    doc: Any = None
    if body:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
    reason, message = "", ""
    causes: tuple[Cause, ...] = ()
    if isinstance(doc, Mapping):
        reason = str(doc.get("reason") or "")
        message = str(doc.get("message") or "")
        details = doc.get("details")
        if isinstance(details, Mapping):
            causes = tuple(
                Cause(str(c.get("reason") or ""), str(c.get("message") or ""),
                      str(c.get("field") or ""))
                for c in details.get("causes") or [] if isinstance(c, Mapping))
    elif body:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        message = text.strip()
    message = (message or reason or f"HTTP {status}")[:500]
    if status == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status >= 500 or status == 0:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason, message, causes)


__all__ = [
    "AlreadyExists",
    "ApiError",
    "Cause",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "error_from",
]
