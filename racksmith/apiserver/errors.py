"""API errors as Kubernetes ``Status`` objects.

Owns: the one exception type the API server raises for client-visible
failures (:class:`ApiError`) and the constructors for each standard reason.
Every handler raises these; the HTTP layer turns them into a ``Status`` body
exactly as kube-apiserver does (``kind: Status``, ``status: Failure``,
``reason``, ``code``, ``details.causes[].field``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One field-level cause of an Invalid error (``details.causes[]``)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def to_dict(self) -> dict[str, str]:
        # kube's StatusCause omits an empty field (``json:"field,omitempty"``).
        cause = {"reason": self.reason, "message": self.message}
        if self.field:
            cause["field"] = self.field
        return cause

    def text(self) -> str:
        """``field: message`` as kube-apiserver joins causes into a Status message."""
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class ApiError(Exception):
    """A failure the client should see, rendered as a ``Status`` object."""

    code: int
    reason: str
    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after: int = 0
    """``details.retryAfterSeconds`` and the ``Retry-After`` header, sent only
    when positive, as kube-apiserver does (``responsewriters.ErrorNegotiated``).
    client-go retries a 429 or 5xx carrying the header silently, up to ten
    times, so it goes only where kube sends one: a refusal a user must see
    (a disruption budget's) carries none."""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after > 0:
            details["retryAfterSeconds"] = self.retry_after
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            status["details"] = details
        return status


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized(message: str = "Unauthorized") -> ApiError:
    return ApiError(401, "Unauthorized", message)


def forbidden(message: str, *, kind: str = "", name: str = "", group: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, kind=kind, name=name, group=group)


def not_found(resource: str, name: str, *, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    msg = f'{gr} "{name}" not found' if name else "the server could not find the requested resource"
    return ApiError(404, "NotFound", msg, kind=resource, name=name, group=group)


def no_such_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def already_exists(resource: str, name: str, *, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    return ApiError(409, "AlreadyExists", f'{gr} "{name}" already exists',
                    kind=resource, name=name, group=group)


def conflict(resource: str, name: str, detail: str, *, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {gr} "{name}": {detail}',
                    kind=resource, name=name, group=group)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large(message: str = "the request body is too large") -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json-patch+json, application/merge-patch+json, "
                    f"application/apply-patch+yaml (got {content_type!r})")


def invalid(kind: str, name: str, causes: list[Cause], *, group: str = "") -> ApiError:
    joined = ", ".join(c.text() for c in causes)
    gk = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{gk} "{name}" is invalid: [{joined}]'
                    if len(causes) > 1 else f'{gk} "{name}" is invalid: {joined}',
                    kind=kind, name=name, group=group, causes=causes)


def too_many_requests(message: str, retry_after: int = 0) -> ApiError:
    """429, as ``NewTooManyRequests``: ``retry_after`` 0 (kube's answer to a
    disruption budget's refusal) sends no ``Retry-After``."""
    return ApiError(429, "TooManyRequests", message, retry_after=retry_after)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", message)


def unavailable(message: str) -> ApiError:
    """503: the store cannot answer now, as ``NewServiceUnavailable``: no
    ``Retry-After`` (kube sends none for a store error: etcd without quorum
    reaches a client as an error at once, and a client-go user sees it instead
    of ten silent retries). Clients and controllers retry at their own pace."""
    return ApiError(503, "ServiceUnavailable", message)
