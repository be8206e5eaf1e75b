"""OpenAPI v3 documents (and the v2 placeholder).

Owns: ``/openapi/v3`` (the index of ``serverRelativeURL``s with a content
hash so clients refetch after a CRD changes) and one document per
group/version with the real schemas (``components.schemas`` named like
kube-apiserver names them, each carrying ``x-kubernetes-group-version-kind``)
and per-resource paths whose write operations declare the ``fieldValidation``,
``dryRun``, ``fieldManager`` and ``force`` query parameters — kubectl reads
those to leave validation to the server — and ``kubectl explain`` reads the
schemas. ``/openapi/v2`` answers an empty protobuf document (see
KUBE-API-NOTES: kubectl 1.27/1.28 need a 200 there).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import orjson

from racksmith.apiserver.discovery import KUBE_MINOR
from racksmith.apiserver.registry import Registry, ResourceInfo

Obj = dict[str, Any]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"

_STR: Obj = {"type": "string"}

_OBJECT_META_SCHEMA: Obj = {
    "description": "ObjectMeta is metadata that all persisted resources must have, which "
                   "includes all objects users must create.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Name must be unique within a namespace."},
        "generateName": {"type": "string", "description": "An optional prefix used by the "
                         "server to generate a unique name when name is not provided."},
        "namespace": {"type": "string", "description": "Namespace defines the space within "
                      "which each name must be unique."},
        "uid": {"type": "string", "description": "UID is the unique in time and space value "
                "for this object."},
        "resourceVersion": {"type": "string", "description": "An opaque value that "
                            "represents the internal version of this object."},
        "generation": {"type": "integer", "format": "int64", "description": "A sequence "
                       "number representing a specific generation of the desired state."},
        "creationTimestamp": {"type": "string", "format": "date-time", "description":
                              "Time this object was created."},
        "deletionTimestamp": {"type": "string", "format": "date-time", "description":
                              "Time at which this resource will be deleted."},
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "labels": {"type": "object", "additionalProperties": _STR, "description":
                   "Map of string keys and values that can be used to organize and "
                   "categorize objects."},
        "annotations": {"type": "object", "additionalProperties": _STR, "description":
                        "Annotations is an unstructured key value map stored with a "
                        "resource."},
        "finalizers": {"type": "array", "items": _STR, "description": "Must be empty "
                       "before the object is deleted from the registry."},
        "ownerReferences": {"type": "array", "description": "List of objects depended by "
                            "this object.", "items": {
                                "type": "object",
                                "required": ["apiVersion", "kind", "name", "uid"],
                                "properties": {
                                    "apiVersion": _STR, "kind": _STR, "name": _STR,
                                    "uid": _STR, "controller": {"type": "boolean"},
                                    "blockOwnerDeletion": {"type": "boolean"}}}},
        "managedFields": {"type": "array", "description": "Maps workflow-id and version "
                          "to the set of fields that are managed by that workflow.",
                          "items": {"type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True}},
    },
}

_LIST_META_SCHEMA: Obj = {
    "type": "object",
    "description": "ListMeta describes metadata that synthetic resources must have.",
    "properties": {"resourceVersion": _STR, "continue": _STR,
                   "remainingItemCount": {"type": "integer", "format": "int64"}},
}


def schema_name(info: ResourceInfo, kind: str | None = None) -> str:
    kind = kind or info.kind
    if info.builtin:
        group = info.group.split(".")[0] if info.group else "core"
        if info.group == "apiextensions.k8s.io":
            return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{info.version}.{kind}"
        return f"io.k8s.api.{group}.{info.version}.{kind}"
    rev = ".".join(reversed(info.group.split(".")))
    return f"{rev}.{info.version}.{kind}"


def _gvk(info: ResourceInfo, kind: str | None = None) -> Obj:
    return {"group": info.group, "version": info.version, "kind": kind or info.kind}


def _object_schema(info: ResourceInfo) -> Obj:
    schema: Obj = copy.deepcopy(info.schema) if info.schema else {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props: Obj = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion defines the "
                           "versioned schema of this representation of an object."}
    props["kind"] = {"type": "string", "description": "Kind is a string value representing "
                     "the REST resource this object represents."}
    props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}],
                         "description": "Standard object's metadata."}
    schema["x-kubernetes-group-version-kind"] = [_gvk(info)]
    return schema


def _list_schema(info: ResourceInfo) -> Obj:
    return {
        "type": "object",
        "description": f"{info.list_kind_name} is a list of {info.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": _STR, "kind": _STR,
            "items": {"type": "array", "items": {
                "$ref": f"#/components/schemas/{schema_name(info)}"}},
            "metadata": {"allOf": [{"$ref": f"#/components/schemas/{LIST_META}"}]},
        },
        "x-kubernetes-group-version-kind": [_gvk(info, info.list_kind_name)],
    }


def _param(name: str, description: str, schema_type: str = "string") -> Obj:
    return {"name": name, "in": "query", "description": description,
            "schema": {"type": schema_type, "uniqueItems": True}}


_WRITE_PARAMS = [
    _param("dryRun", "When present, indicates that modifications should not be persisted."),
    _param("fieldManager", "fieldManager is a name associated with the actor or entity that "
           "is making these changes."),
    _param("fieldValidation", "fieldValidation instructs the server on how to handle objects "
           "in the request containing unknown or duplicate fields: Ignore, Warn or Strict."),
]
_PATCH_PARAMS = [*_WRITE_PARAMS, _param("force", "Force is going to force Apply requests.",
                                        "boolean")]
_LIST_PARAMS = [
    _param("labelSelector", "A selector to restrict the list of returned objects by their "
           "labels."),
    _param("fieldSelector", "A selector to restrict the list of returned objects by their "
           "fields."),
    _param("limit", "limit is a maximum number of responses to return.", "integer"),
    _param("continue", "The continue option should be set when retrieving more results "
           "from the server."),
    _param("resourceVersion", "resourceVersion sets a constraint on what resource versions "
           "a request may be served from."),
    _param("watch", "Watch for changes to the described resources.", "boolean"),
    _param("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
    _param("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type "
           "BOOKMARK.", "boolean"),
]


def _ref(name: str) -> Obj:
    return {"$ref": f"#/components/schemas/{name}"}


def _op(info: ResourceInfo, action: str, op_id: str, params: list[Obj], body: bool,
        response: str, kind: str | None = None) -> Obj:
    op: Obj = {
        "operationId": op_id,
        "tags": [f"{info.group or 'core'}_{info.version}"],
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {
            "application/json": {"schema": _ref(response)}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(info, kind),
    }
    if body:
        op["requestBody"] = {"content": {"*/*": {"schema": _ref(response)}}, "required": True}
    return op


def _paths(info: ResourceInfo) -> Obj:
    prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    base = f"{prefix}/namespaces/{{namespace}}/{info.plural}" if info.namespaced \
        else f"{prefix}/{info.plural}"
    obj_name = schema_name(info)
    list_name = schema_name(info, info.list_kind_name)
    k = info.kind
    paths: Obj = {
        base: {
            "get": _op(info, "list", f"list{k}", _LIST_PARAMS, False, list_name),
            "post": _op(info, "post", f"create{k}", _WRITE_PARAMS, True, obj_name),
            "delete": _op(info, "deletecollection", f"deleteCollection{k}", _LIST_PARAMS,
                          False, obj_name),
        },
        f"{base}/{{name}}": {
            "get": _op(info, "get", f"read{k}", [], False, obj_name),
            "put": _op(info, "put", f"replace{k}", _WRITE_PARAMS, True, obj_name),
            "patch": _op(info, "patch", f"patch{k}", _PATCH_PARAMS, True, obj_name),
            "delete": _op(info, "delete", f"delete{k}", _WRITE_PARAMS[:1], False, obj_name),
        },
    }
    if info.has_status:
        paths[f"{base}/{{name}}/status"] = {
            "get": _op(info, "get", f"read{k}Status", [], False, obj_name),
            "put": _op(info, "put", f"replace{k}Status", _WRITE_PARAMS, True, obj_name),
            "patch": _op(info, "patch", f"patch{k}Status", _PATCH_PARAMS, True, obj_name),
        }
    return paths


def group_version_document(registry: Registry, group: str, version: str) -> Obj | None:
    infos = registry.in_group_version(group, version)
    if not infos:
        return None
    schemas: Obj = {OBJECT_META: _OBJECT_META_SCHEMA, LIST_META: _LIST_META_SCHEMA}
    paths: Obj = {}
    for info in infos:
        schemas[schema_name(info)] = _object_schema(info)
        schemas[schema_name(info, info.list_kind_name)] = _list_schema(info)
        paths.update(_paths(info))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Racksmith", "version": f"v1.{KUBE_MINOR}.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class OpenAPICache:
    """Documents rendered once per registry generation."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._generation = -1
        self._docs: dict[str, bytes] = {}
        self._index: bytes = b""

    def _refresh(self) -> None:
        if self._generation == self.registry.generation:
            return
        docs: dict[str, bytes] = {}
        paths: Obj = {}
        for group, versions in self.registry.groups().items():
            for version in versions:
                key = f"apis/{group}/{version}" if group else f"api/{version}"
                doc = group_version_document(self.registry, group, version)
                if doc is None:
                    continue
                raw = orjson.dumps(doc)
                docs[key] = raw
                digest = hashlib.sha512(raw).hexdigest()[:64].upper()
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        self._docs = docs
        self._index = orjson.dumps({"paths": dict(sorted(paths.items()))})
        self._generation = self.registry.generation

    def index(self) -> bytes:
        self._refresh()
        return self._index

    def document(self, key: str) -> bytes | None:
        self._refresh()
        return self._docs.get(key)
