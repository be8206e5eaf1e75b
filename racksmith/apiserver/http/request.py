"""Request parsing for the resource API.

Owns: turning a URL path into (resource, namespace, name, subresource);
query parameters into typed options (Go ``ParseBool`` semantics, as the
Python clients send ``True``); bodies into dicts (JSON, YAML, the protobuf
envelope typed kubectl commands send) with the size limit; and reading the
``Accept`` header (Table, PartialObjectMetadata, aggregated discovery).
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from racksmith.apiserver import errors
from racksmith.apiserver import protobuf as pb
from racksmith.apiserver.http import yamldecode
from racksmith.apiserver.objects import MAX_DEPTH, check_depth
from racksmith.apiserver.registry import Registry, ResourceInfo

MAX_BODY_BYTES = 3 * 1024 * 1024
OFF_LOOP_BYTES = 128 * 1024
"""Bodies larger than this are decoded in a worker thread, so that a big
request does not hold up every other client (``/readyz`` included)."""
INT64_MAX = 2**63 - 1
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_bool(value: str | None, name: str) -> bool:
    if value is None or value == "":
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for parameter {name}')


def parse_int(value: str | None, name: str) -> int:
    """A 64-bit signed integer parameter (Go's ``strconv.ParseInt(v, 10, 64)``)."""
    if value is None or value == "":
        return 0
    text = value.strip()
    if not text or len(text) > 20 or not (text.lstrip("+-").isdigit() and text.isascii()):
        raise errors.bad_request(f'invalid integer value "{_shown(value)}" for parameter '
                                 f"{name}")
    number = int(text)
    if not -INT64_MAX - 1 <= number <= INT64_MAX:
        raise errors.bad_request(f'invalid integer value "{_shown(value)}" for parameter '
                                 f"{name}: value out of range")
    return number


def parse_resource_version(value: str | None, name: str = "resourceVersion") -> str:
    """A resourceVersion parameter: empty or a non-negative integer (kube: 400
    otherwise, for lists, gets and watches alike)."""
    if value is None or value == "":
        return ""
    if not (value.isascii() and value.isdigit()) or len(value) > 20 or \
            int(value) > INT64_MAX:
        raise errors.bad_request(f'invalid resource version "{_shown(value)}" for parameter '
                                 f"{name}: must be a non-negative integer")
    return value


def _shown(value: str, limit: int = 64) -> str:
    """A query value as it may be quoted in an error: bounded and printable."""
    text = value if len(value) <= limit else value[:limit] + "..."
    return text.encode("unicode_escape").decode("ascii").replace('"', '\\"')


@dataclass(frozen=True)
class Target:
    """What a resource URL addresses."""

    info: ResourceInfo
    namespace: str | None
    """None = across all namespaces (or a cluster-scoped resource)."""
    name: str | None
    subresource: str = ""


def resolve(registry: Registry, segments: list[str]) -> Target:
    """Map path segments after ``/api`` or ``/apis`` to a Target."""
    if not segments:
        raise errors.no_such_path()
    if segments[0] == "api":
        group, rest = "", segments[1:]
    elif segments[0] == "apis":
        if len(segments) < 2:
            raise errors.no_such_path()
        group, rest = segments[1], segments[2:]
    else:
        raise errors.no_such_path()
    if not rest:
        raise errors.no_such_path()
    version, rest = rest[0], rest[1:]
    if not rest:
        raise errors.no_such_path()
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (
            group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    info = registry.get(group, version, plural)
    if info is None:
        raise errors.no_such_path()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        raise errors.no_such_path()
    if namespace is not None and not info.namespaced:
        raise errors.no_such_path()
    if sub and sub not in info.subresources:
        raise errors.no_such_path()
    return Target(info, namespace, name, sub)


async def read_body(request: web.Request) -> bytes:
    """The request body after its Content-Encoding (identity, gzip, deflate),
    at most MAX_BODY_BYTES before and after decoding (a small gzip bomb is a
    413 like a large body)."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise errors.too_large()
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    decoder = _decoder(encoding)
    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in request.content.iter_chunked(65536):
            if decoder is not None:
                chunk = decoder.decompress(chunk, MAX_BODY_BYTES + 1 - total)
                if decoder.unconsumed_tail:
                    raise errors.too_large()
            total += len(chunk)
            if total > MAX_BODY_BYTES:
                raise errors.too_large()
            chunks.append(chunk)
        if decoder is not None:
            tail = decoder.flush()
            if not decoder.eof:
                raise zlib.error("the compressed stream is truncated")
            total += len(tail)
            if total > MAX_BODY_BYTES:
                raise errors.too_large()
            chunks.append(tail)
    except (RequestPayloadError, HttpProcessingError, zlib.error, EOFError,
            ValueError) as exc:
        # A body that does not match its Content-Encoding (gzip that is not
        # gzip, a truncated stream): the client's fault.
        raise errors.bad_request(
            f"the request body could not be read: {type(exc).__name__} (check "
            "Content-Encoding)") from None
    return b"".join(chunks)


def _decoder(encoding: str) -> Any:
    """A zlib decompressor for the Content-Encoding (None: identity)."""
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise errors.ApiError(415, "UnsupportedMediaType",
                          f"unsupported Content-Encoding {_shown(encoding)}: supported "
                          "encodings are identity, gzip and deflate")


def media_type(request: web.Request) -> str:
    return (request.headers.get("Content-Type") or "application/json").split(";")[0].strip(
    ).lower()


async def decode_body(body: bytes, content_type: str) -> Any:
    """:func:`decode`, in a worker thread for a large body."""
    if len(body) > OFF_LOOP_BYTES:
        return await asyncio.to_thread(decode, body, content_type)
    return decode(body, content_type)


def decode(body: bytes, content_type: str) -> Any:
    """Decode a request body by content type (JSON, YAML, k8s protobuf)."""
    try:
        value = _decode(body, content_type)
    except RecursionError:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels "
                                 "deep") from None
    check_depth(value)
    return value


def _decode(body: bytes, content_type: str) -> Any:
    if not body.strip():
        raise errors.bad_request("the request body is empty")
    if content_type == "application/vnd.kubernetes.protobuf" or pb.is_k8s_protobuf(body):
        try:
            return pb.decode_k8s_protobuf(body)
        except pb.ProtobufError as exc:
            raise errors.ApiError(415, "UnsupportedMediaType", str(exc)) from None
    if content_type.endswith("yaml"):
        try:
            return yamldecode.load(body)
        except yamldecode.YamlBodyError as exc:
            raise errors.bad_request(str(exc)) from None
    if content_type in ("application/json", "application/merge-patch+json",
                        "application/json-patch+json",
                        "application/strategic-merge-patch+json", "*/*", ""):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding JSON: {exc}") from None
    raise errors.unsupported_media_type(content_type)


@dataclass(frozen=True)
class AcceptInfo:
    table: bool = False
    partial: bool = False
    discovery: str = ""
    """"v2" / "v2beta1" when aggregated discovery is asked for."""
    discovery_media: str = ""


def parse_accept(header: str | None) -> AcceptInfo:
    if not header:
        return AcceptInfo()
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        params = {}
        for f in fields[1:]:
            if "=" in f:
                k, v = f.split("=", 1)
                params[k.strip()] = v.strip()
        if fields[0] not in ("application/json", "*/*"):
            continue
        as_ = params.get("as", "")
        if as_ == "Table" and params.get("g") == "meta.k8s.io":
            return AcceptInfo(table=True)
        if as_.startswith("PartialObjectMetadata") and params.get("g") == "meta.k8s.io":
            return AcceptInfo(partial=True)
        if as_ == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io":
            version = params.get("v", "")
            if version in ("v2", "v2beta1"):
                media = (f"application/json;g=apidiscovery.k8s.io;v={version};"
                         "as=APIGroupDiscoveryList")
                return AcceptInfo(discovery=version, discovery_media=media)
        if not as_:
            return AcceptInfo()
    return AcceptInfo()
