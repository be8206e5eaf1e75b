"""Kubernetes protobuf request bodies, decoded into the API's JSON form.

Owns: recognising and decoding the ``application/vnd.kubernetes.protobuf``
bodies that typed ``kubectl create …`` commands POST (kubectl 1.32 and later;
older builds send JSON). Such a body is the 4-byte magic ``k8s\\x00`` followed
by a ``runtime.Unknown`` envelope ``{typeMeta{apiVersion, kind}, raw,
contentEncoding, contentType}`` whose ``raw`` is the object's own protobuf
encoding.

Only a handful of kinds are understood (core/v1, RBAC and the review APIs;
see :data:`SUPPORTED_KINDS`):
the decoder is a small table over the protobuf wire format, with the field
numbers taken from the public ``generated.proto`` files of kubernetes/api and
kubernetes/apimachinery. Output matches what the same object looks like as
JSON: empty strings, zero numbers, false booleans, empty maps and lists are
omitted (as ``omitempty`` does) except for pointer fields whose presence means
something (``immutable``, ``automountServiceAccountToken`` …); byte maps come
out base64-encoded and timestamps as RFC 3339 strings.

Nothing here echoes body content in error messages: a Secret's payload never
reaches a log through this module.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "CONTENT_TYPE",
    "MAGIC",
    "SUPPORTED_KINDS",
    "ProtobufError",
    "decode_k8s_protobuf",
    "is_k8s_protobuf",
]

log = logging.getLogger(__name__)

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

_WORKAROUND = (
    "send the object as YAML/JSON instead: `kubectl create -f <file>` or `kubectl apply -f <file>`"
)


class ProtobufError(ValueError):
    """A protobuf body that cannot be decoded, or of a kind we do not support."""


# --------------------------------------------------------------------------- wire format

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_WireValue = int | bytes


def _read_varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError(f"{where}: truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError(f"{where}: varint longer than 10 bytes")


def _iter_fields(buf: bytes, where: str) -> Iterator[tuple[int, int, _WireValue]]:
    """Yield ``(field number, wire type, value)`` for each field of one message."""
    pos = 0
    end = len(buf)
    while pos < end:
        tag, pos = _read_varint(buf, pos, where)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError(f"{where}: invalid field number 0")
        value: _WireValue
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos, where)
        elif wire == _LEN:
            length, pos = _read_varint(buf, pos, where)
            if length > end - pos:
                raise ProtobufError(f"{where}: field {number} is truncated")
            value = buf[pos : pos + length]
            pos += length
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if size > end - pos:
                raise ProtobufError(f"{where}: field {number} is truncated")
            value = int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        else:
            raise ProtobufError(f"{where}: field {number} has unsupported wire type {wire}")
        yield number, wire, value


# --------------------------------------------------------------------------- schema tables

_Kind = Literal["string", "bytes", "bool", "int", "message", "map_str", "map_bytes", "time", "json"]

# The wire type each kind of field must arrive with.
_WIRE_OF: dict[str, int] = {
    "string": _LEN,
    "bytes": _LEN,
    "bool": _VARINT,
    "int": _VARINT,
    "message": _LEN,
    "map_str": _LEN,
    "map_bytes": _LEN,
    "time": _LEN,
    "json": _LEN,
}


@dataclass(frozen=True)
class _Field:
    """One field of a message: its JSON name, how to decode it, and its presence rule."""

    name: str
    kind: _Kind
    repeated: bool = False
    message: _Message | None = None
    # Go pointer field: when it is on the wire its value is kept even if zero.
    keep_zero: bool = False


@dataclass(frozen=True)
class _Message:
    """A message type: its name (for error messages) and fields by number, in JSON order."""

    name: str
    fields: Mapping[int, _Field]


def _msg(name: str, *fields: tuple[int, _Field]) -> _Message:
    return _Message(name, dict(fields))


def _s(name: str, repeated: bool = False) -> _Field:
    return _Field(name, "string", repeated=repeated)


# meta/v1 and runtime ----------------------------------------------------------------------

_TYPE_META = _msg("TypeMeta", (1, _s("apiVersion")), (2, _s("kind")))

_UNKNOWN = _msg(
    "Unknown",
    (1, _Field("typeMeta", "message", message=_TYPE_META)),
    (2, _Field("raw", "bytes")),
    (3, _s("contentEncoding")),
    (4, _s("contentType")),
)

_OWNER_REFERENCE = _msg(
    "OwnerReference",
    (5, _s("apiVersion")),
    (1, _s("kind")),
    (3, _s("name")),
    (4, _s("uid")),
    (6, _Field("controller", "bool", keep_zero=True)),
    (7, _Field("blockOwnerDeletion", "bool", keep_zero=True)),
)

_MANAGED_FIELDS_ENTRY = _msg(
    "ManagedFieldsEntry",
    (1, _s("manager")),
    (2, _s("operation")),
    (3, _s("apiVersion")),
    (4, _Field("time", "time")),
    (6, _s("fieldsType")),
    (7, _Field("fieldsV1", "json")),
    (8, _s("subresource")),
)

_OBJECT_META = _msg(
    "ObjectMeta",
    (1, _s("name")),
    (2, _s("generateName")),
    (3, _s("namespace")),
    (4, _s("selfLink")),
    (5, _s("uid")),
    (6, _s("resourceVersion")),
    (7, _Field("generation", "int")),
    (8, _Field("creationTimestamp", "time")),
    (9, _Field("deletionTimestamp", "time")),
    (10, _Field("deletionGracePeriodSeconds", "int", keep_zero=True)),
    (11, _Field("labels", "map_str")),
    (12, _Field("annotations", "map_str")),
    (13, _Field("ownerReferences", "message", repeated=True, message=_OWNER_REFERENCE)),
    (14, _s("finalizers", repeated=True)),
    (17, _Field("managedFields", "message", repeated=True, message=_MANAGED_FIELDS_ENTRY)),
)

_METADATA = _Field("metadata", "message", message=_OBJECT_META)

# core/v1 ----------------------------------------------------------------------------------

_OBJECT_REFERENCE = _msg(
    "ObjectReference",
    (1, _s("kind")),
    (2, _s("namespace")),
    (3, _s("name")),
    (4, _s("uid")),
    (5, _s("apiVersion")),
    (6, _s("resourceVersion")),
    (7, _s("fieldPath")),
)

_LOCAL_OBJECT_REFERENCE = _msg("LocalObjectReference", (1, _s("name")))

_NAMESPACE_CONDITION = _msg(
    "NamespaceCondition",
    (1, _s("type")),
    (2, _s("status")),
    (4, _Field("lastTransitionTime", "time")),
    (5, _s("reason")),
    (6, _s("message")),
)

_NAMESPACE = _msg(
    "Namespace",
    (1, _METADATA),
    (2, _Field("spec", "message", message=_msg("NamespaceSpec", (1, _s("finalizers", True))))),
    (
        3,
        _Field(
            "status",
            "message",
            message=_msg(
                "NamespaceStatus",
                (1, _s("phase")),
                (2, _Field("conditions", "message", repeated=True, message=_NAMESPACE_CONDITION)),
            ),
        ),
    ),
)

_SECRET = _msg(
    "Secret",
    (1, _METADATA),
    (5, _Field("immutable", "bool", keep_zero=True)),
    (2, _Field("data", "map_bytes")),
    (4, _Field("stringData", "map_str")),
    (3, _s("type")),
)

_CONFIG_MAP = _msg(
    "ConfigMap",
    (1, _METADATA),
    (4, _Field("immutable", "bool", keep_zero=True)),
    (2, _Field("data", "map_str")),
    (3, _Field("binaryData", "map_bytes")),
)

_SERVICE_ACCOUNT = _msg(
    "ServiceAccount",
    (1, _METADATA),
    (2, _Field("secrets", "message", repeated=True, message=_OBJECT_REFERENCE)),
    (3, _Field("imagePullSecrets", "message", repeated=True, message=_LOCAL_OBJECT_REFERENCE)),
    (4, _Field("automountServiceAccountToken", "bool", keep_zero=True)),
)

# meta/v1 LabelSelector -------------------------------------------------------------------

_LABEL_SELECTOR = _msg(
    "LabelSelector",
    (1, _Field("matchLabels", "map_str")),
    (2, _Field("matchExpressions", "message", repeated=True, message=_msg(
        "LabelSelectorRequirement", (1, _s("key")), (2, _s("operator")),
        (3, _s("values", True))))),
)

# rbac.authorization.k8s.io/v1 -------------------------------------------------------------

_POLICY_RULE = _msg(
    "PolicyRule",
    (1, _s("verbs", True)),
    (2, _s("apiGroups", True)),
    (3, _s("resources", True)),
    (4, _s("resourceNames", True)),
    (5, _s("nonResourceURLs", True)),
)
_RULES = _Field("rules", "message", repeated=True, message=_POLICY_RULE)
_SUBJECTS = _Field("subjects", "message", repeated=True, message=_msg(
    "Subject", (1, _s("kind")), (2, _s("apiGroup")), (3, _s("name")), (4, _s("namespace"))))
_ROLE_REF = _Field("roleRef", "message", message=_msg(
    "RoleRef", (1, _s("apiGroup")), (2, _s("kind")), (3, _s("name"))))

_ROLE = _msg("Role", (1, _METADATA), (2, _RULES))
_CLUSTER_ROLE = _msg(
    "ClusterRole", (1, _METADATA), (2, _RULES),
    (3, _Field("aggregationRule", "message", message=_msg(
        "AggregationRule", (1, _Field("clusterRoleSelectors", "message", repeated=True,
                                      message=_LABEL_SELECTOR))))),
)
_ROLE_BINDING = _msg("RoleBinding", (1, _METADATA), (2, _SUBJECTS), (3, _ROLE_REF))
_CLUSTER_ROLE_BINDING = _msg("ClusterRoleBinding", (1, _METADATA), (2, _SUBJECTS),
                             (3, _ROLE_REF))

# authorization.k8s.io/v1 and authentication.k8s.io/v1 (the review APIs) --------------------

_RESOURCE_ATTRIBUTES = _msg(
    "ResourceAttributes",
    (1, _s("namespace")), (2, _s("verb")), (3, _s("group")), (4, _s("version")),
    (5, _s("resource")), (6, _s("subresource")), (7, _s("name")),
)
_NON_RESOURCE_ATTRIBUTES = _msg("NonResourceAttributes", (1, _s("path")), (2, _s("verb")))
_ACCESS_FIELDS = (
    (1, _Field("resourceAttributes", "message", message=_RESOURCE_ATTRIBUTES)),
    (2, _Field("nonResourceAttributes", "message", message=_NON_RESOURCE_ATTRIBUTES)),
)
_SELF_SUBJECT_ACCESS_REVIEW = _msg(
    "SelfSubjectAccessReview", (1, _METADATA),
    (2, _Field("spec", "message", message=_msg("SelfSubjectAccessReviewSpec",
                                               *_ACCESS_FIELDS))),
)
_SUBJECT_ACCESS_REVIEW_SPEC = _msg(
    "SubjectAccessReviewSpec", *_ACCESS_FIELDS, (3, _s("user")), (4, _s("groups", True)),
    (6, _s("uid")),
)
_SUBJECT_ACCESS_REVIEW = _msg(
    "SubjectAccessReview", (1, _METADATA),
    (2, _Field("spec", "message", message=_SUBJECT_ACCESS_REVIEW_SPEC)))
_LOCAL_SUBJECT_ACCESS_REVIEW = _msg(
    "LocalSubjectAccessReview", (1, _METADATA),
    (2, _Field("spec", "message", message=_SUBJECT_ACCESS_REVIEW_SPEC)))
_SELF_SUBJECT_RULES_REVIEW = _msg(
    "SelfSubjectRulesReview", (1, _METADATA),
    (2, _Field("spec", "message", message=_msg("SelfSubjectRulesReviewSpec",
                                               (1, _s("namespace"))))),
)
_SELF_SUBJECT_REVIEW = _msg("SelfSubjectReview", (1, _METADATA))
_TOKEN_REQUEST = _msg(
    "TokenRequest", (1, _METADATA),
    (2, _Field("spec", "message", message=_msg(
        "TokenRequestSpec", (1, _s("audiences", True)),
        (3, _Field("boundObjectRef", "message", message=_msg(
            "BoundObjectReference", (1, _s("kind")), (2, _s("apiVersion")), (3, _s("name")),
            (4, _s("uid"))))),
        (4, _Field("expirationSeconds", "int", keep_zero=True))))),
)

_RBAC = "rbac.authorization.k8s.io/v1"
_AUTHZ = "authorization.k8s.io/v1"

_KINDS: dict[tuple[str, str], _Message] = {
    ("v1", "Namespace"): _NAMESPACE,
    ("v1", "Secret"): _SECRET,
    ("v1", "ConfigMap"): _CONFIG_MAP,
    ("v1", "ServiceAccount"): _SERVICE_ACCOUNT,
    (_RBAC, "Role"): _ROLE,
    (_RBAC, "ClusterRole"): _CLUSTER_ROLE,
    (_RBAC, "RoleBinding"): _ROLE_BINDING,
    (_RBAC, "ClusterRoleBinding"): _CLUSTER_ROLE_BINDING,
    (_AUTHZ, "SelfSubjectAccessReview"): _SELF_SUBJECT_ACCESS_REVIEW,
    (_AUTHZ, "SubjectAccessReview"): _SUBJECT_ACCESS_REVIEW,
    (_AUTHZ, "LocalSubjectAccessReview"): _LOCAL_SUBJECT_ACCESS_REVIEW,
    (_AUTHZ, "SelfSubjectRulesReview"): _SELF_SUBJECT_RULES_REVIEW,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): _SELF_SUBJECT_REVIEW,
    ("authentication.k8s.io/v1", "TokenRequest"): _TOKEN_REQUEST,
    ("authentication.k8s.io/v1beta1", "SelfSubjectReview"): _SELF_SUBJECT_REVIEW,
}

#: ``(apiVersion, kind)`` pairs whose protobuf encoding this module decodes.
SUPPORTED_KINDS: frozenset[tuple[str, str]] = frozenset(_KINDS)


# --------------------------------------------------------------------------- decoding


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError(f"{where}: string is not valid UTF-8") from None


def _time(raw: bytes, where: str) -> str | None:
    """A ``meta/v1.Time`` (``{seconds=1, nanos=2}``); empty means unset (JSON null)."""
    if not raw:
        return None
    seconds = 0
    for number, wire, value in _iter_fields(raw, where):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            seconds = _signed64(value)
    try:
        stamp = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"{where}: timestamp out of range") from None
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _map_entry(raw: bytes, binary: bool, where: str) -> tuple[str, str]:
    key, value = b"", b""
    for number, wire, item in _iter_fields(raw, where):
        if wire != _LEN:
            raise ProtobufError(f"{where}: map entry field {number} has wire type {wire}")
        assert isinstance(item, bytes)
        if number == 1:
            key = item
        elif number == 2:
            value = item
    text_value = base64.b64encode(value).decode("ascii") if binary else _text(value, where)
    return _text(key, where), text_value


def _is_zero(value: Any) -> bool:
    return value is None or value in ("", 0, b"") or value == {} or value == []


def _decode(buf: bytes, message: _Message, where: str) -> dict[str, Any]:
    """Decode one message into a JSON-shaped dict, in the schema's field order."""
    seen: dict[str, Any] = {}
    for number, wire, value in _iter_fields(buf, where):
        spec = message.fields.get(number)
        if spec is None:
            # A field newer than our table: skip it (the number is safe to log, the value not).
            log.debug("protobuf: skipping unknown field %s.%d", message.name, number)
            continue
        here = f"{where}.{spec.name}"
        if wire != _WIRE_OF[spec.kind]:
            raise ProtobufError(f"{here}: unexpected wire type {wire}")
        decoded: Any
        if spec.kind in ("map_str", "map_bytes"):
            assert isinstance(value, bytes)
            key, item = _map_entry(value, spec.kind == "map_bytes", here)
            seen.setdefault(spec.name, {})[key] = item
            continue
        if isinstance(value, int):
            decoded = value != 0 if spec.kind == "bool" else _signed64(value)
        elif spec.kind == "string":
            decoded = _text(value, here)
        elif spec.kind == "bytes":
            decoded = value
        elif spec.kind == "time":
            decoded = _time(value, here)
        elif spec.kind == "json":
            decoded = _fields_v1(value, here)
        else:
            assert spec.message is not None
            decoded = _decode(value, spec.message, here)
        if spec.repeated:
            seen.setdefault(spec.name, []).append(decoded)
        else:
            seen[spec.name] = decoded
    out: dict[str, Any] = {}
    for spec in message.fields.values():
        if spec.name not in seen:
            continue
        value = seen[spec.name]
        if spec.keep_zero or spec.repeated or not _is_zero(value):
            out[spec.name] = value
    return out


def _fields_v1(raw: bytes, where: str) -> Any:
    """``FieldsV1{raw=1}``: the managed-fields set, itself JSON."""
    for number, wire, value in _iter_fields(raw, where):
        if number == 1 and wire == _LEN:
            assert isinstance(value, bytes)
            try:
                return json.loads(value) if value else {}
            except ValueError:
                raise ProtobufError(f"{where}: FieldsV1 is not valid JSON") from None
    return {}


def is_k8s_protobuf(body: bytes) -> bool:
    """Whether ``body`` starts with the Kubernetes protobuf magic ``k8s\\x00``."""
    return body[: len(MAGIC)] == MAGIC


def decode_k8s_protobuf(body: bytes) -> dict[str, Any]:
    """Decode a ``k8s\\x00`` + ``runtime.Unknown`` body into the object's JSON dict.

    Raises :class:`ProtobufError` (a :class:`ValueError`) when the body is not
    valid Kubernetes protobuf, or carries a kind this server cannot decode; the
    message names the problem and the workaround, never the body's content.
    """
    if not is_k8s_protobuf(body):
        raise ProtobufError(
            "request body is not Kubernetes protobuf (missing the k8s\\x00 prefix); " + _WORKAROUND
        )
    envelope = _decode(body[len(MAGIC) :], _UNKNOWN, "Unknown")
    type_meta = envelope.get("typeMeta", {})
    api_version = type_meta.get("apiVersion", "")
    kind = type_meta.get("kind", "")
    if envelope.get("contentEncoding"):
        raise ProtobufError(
            "protobuf body uses a content encoding this server does not support; " + _WORKAROUND
        )
    content_type = envelope.get("contentType", "")
    if content_type and content_type != CONTENT_TYPE:
        raise ProtobufError(
            f"protobuf envelope carries an unsupported content type {content_type!r}; "
            + _WORKAROUND
        )
    message = _KINDS.get((api_version, kind))
    if message is None:
        what = f"{kind} ({api_version})" if kind else "an object without apiVersion/kind"
        supported = ", ".join(sorted(k for _, k in SUPPORTED_KINDS))
        raise ProtobufError(
            f"this server cannot decode {what} sent as protobuf (it decodes {supported}); "
            + _WORKAROUND
        )
    obj = _decode(envelope.get("raw", b""), message, kind)
    return {"apiVersion": api_version, "kind": kind, **obj}
