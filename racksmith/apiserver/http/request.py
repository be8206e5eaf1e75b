"""Request parsing for the resource API.

Owns: turning a URL path into (resource, namespace, name, subresource);
query parameters into typed options (Go ``ParseBool`` semantics, as the
Python clients send ``True``); bodies into dicts (JSON, YAML, the protobuf
envelope typed kubectl commands send) with the size limit; and reading the
``Accept`` header (Table, PartialObjectMetadata, aggregated discovery).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from racksmith.apiserver import errors
from racksmith.apiserver import protobuf as pb
from racksmith.apiserver.objects import MAX_DEPTH, check_depth
from racksmith.apiserver.registry import Registry, ResourceInfo

MAX_BODY_BYTES = 3 * 1024 * 1024
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
    if value is None or value == "":
        return 0
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid integer value "{value}" for parameter '
                                 f"{name}") from None


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
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise errors.too_large()
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.content.iter_chunked(65536):
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise errors.too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def media_type(request: web.Request) -> str:
    return (request.headers.get("Content-Type") or "application/json").split(";")[0].strip(
    ).lower()


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
            return yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {_first_line(str(exc))}") from None
    if content_type in ("application/json", "application/merge-patch+json",
                        "application/json-patch+json",
                        "application/strategic-merge-patch+json", "*/*", ""):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding JSON: {exc}") from None
    raise errors.unsupported_media_type(content_type)


def _first_line(text: str) -> str:
    return " ".join(text.split())


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
