"""Derive CustomResourceDefinition manifests from the kind models.

Owns the translation of pydantic's JSON schema into a Kubernetes
*structural* OpenAPI v3 schema: references inlined, ``Optional[X]`` turned
into a non-required ``X``, titles dropped, free-form dicts marked
``x-kubernetes-preserve-unknown-fields``, enum member docs folded into the
description. Called by the CLI/app to install CRDs (embedded server or a
real cluster), by ``docgen``, and by the tests. Pure: no I/O.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from racksmith.kinds.base import ENUM_DOCS_KEY, KindInfo, PrinterColumn, Resource
from racksmith.kinds.registry import ALL_KINDS

#: Keys a node of a generated schema may carry, in the order they are written;
#: anything else is a bug here.
_KEY_ORDER = (
    "type",
    "description",
    "format",
    "enum",
    "default",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "oneOf",
    "required",
    "properties",
    "items",
    "additionalProperties",
)
_ALLOWED_KEYS = frozenset(_KEY_ORDER)

_NULL = {"type": "null"}


class SchemaError(ValueError):
    """A model produces a schema construct that cannot be made structural."""


def _enum_doc_text(docs: list[list[str]]) -> str:
    lines = [f"- `{value}`: {doc}" if doc else f"- `{value}`" for value, doc in docs]
    return "Possible values:\n" + "\n".join(lines)


def _resolve(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    """Inline ``$ref`` and collapse ``anyOf [X, null]``; siblings override the target."""
    while True:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**defs[name], **siblings}
            continue
        branches = node.get("anyOf")
        if branches is not None and _NULL in branches:
            rest = [b for b in branches if b != _NULL]
            if len(rest) != 1:
                raise SchemaError(f"{path}: unions other than Optional[X] are not structural")
            siblings = {k: v for k, v in node.items() if k != "anyOf"}
            if siblings.get("default", 0) is None:
                del siblings["default"]
            node = {**rest[0], **siblings}
            continue
        return node


def structural(node: dict[str, Any], defs: dict[str, Any], path: str = "") -> dict[str, Any]:
    """Turn one pydantic JSON-schema node into a structural CRD schema node."""
    node = _resolve(node, defs, path)
    out: dict[str, Any] = {}
    enum_docs: list[list[str]] | None = node.get(ENUM_DOCS_KEY)
    for key, value in node.items():
        if key in ("title", ENUM_DOCS_KEY):
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out["properties"] = {
                name: structural(child, defs, f"{path}.{name}") for name, child in value.items()
            }
        elif key == "items":
            out["items"] = structural(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out["additionalProperties"] = structural(value, defs, f"{path}{{}}")
        elif key in _ALLOWED_KEYS:
            out[key] = copy.deepcopy(value)
        else:
            raise SchemaError(f"{path}: schema key {key!r} is not allowed in a CRD")
    if enum_docs:
        text = _enum_doc_text(enum_docs)
        out["description"] = f"{out['description']}\n\n{text}" if out.get("description") else text
    if "anyOf" in out and not out.get("x-kubernetes-int-or-string"):
        raise SchemaError(f"{path}: anyOf is only allowed for int-or-string")
    if out.get("type") == "object" and "properties" in out and "additionalProperties" in out:
        raise SchemaError(f"{path}: properties and additionalProperties are exclusive")
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return {key: out[key] for key in _KEY_ORDER if key in out}


def model_schema(model: type[Any]) -> dict[str, Any]:
    """The structural schema of one pydantic model (e.g. a spec)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return structural(raw, defs, model.__name__)


def open_api_schema(kind_cls: type[Resource]) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a kind: apiVersion, kind, metadata, spec, status."""
    info = kind_cls.info
    spec_field = kind_cls.model_fields["spec"]
    properties: dict[str, Any] = {
        "apiVersion": {
            "type": "string",
            "description": f"Versioned schema of this object; {info.api_version} for this kind.",
        },
        "kind": {"type": "string", "description": f"Kind of this object: {info.kind}."},
        "metadata": {"type": "object"},
        "spec": model_schema(kind_cls.spec_model()),
    }
    status_model = kind_cls.status_model()
    if status_model is not None:
        properties["status"] = model_schema(status_model)
    for name in ("spec", "status"):
        if name not in properties:
            continue
        field = kind_cls.model_fields[name]
        if "description" not in properties[name] and field.description:
            properties[name]["description"] = field.description
        # A default declared on the field itself (e.g. spec: {} so that the
        # defaults inside an absent spec apply, as kube-apiserver does).
        extra = field.json_schema_extra
        if isinstance(extra, dict) and "default" in extra:
            properties[name]["default"] = extra["default"]
    root: dict[str, Any] = {"type": "object"}
    if kind_cls.__doc__:
        root["description"] = " ".join(kind_cls.__doc__.split("\n\n")[0].split())
    root["properties"] = properties
    if spec_field.is_required():
        root["required"] = ["spec"]
    return root


def _printer_column(column: PrinterColumn) -> dict[str, Any]:
    out: dict[str, Any] = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    if column.format:
        out["format"] = column.format
    if column.description:
        out["description"] = column.description
    if column.priority:
        out["priority"] = column.priority
    return out


def _names(info: KindInfo) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": info.list_kind,
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    return names


def crd_for(kind_cls: type[Resource]) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one kind."""
    info = kind_cls.info
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": open_api_schema(kind_cls)},
    }
    if kind_cls.has_status():
        version["subresources"] = {"status": {}}
    if info.printer_columns:
        version["additionalPrinterColumns"] = [_printer_column(c) for c in info.printer_columns]
    if info.selectable_fields:
        version["selectableFields"] = [{"jsonPath": p} for p in info.selectable_fields]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": info.crd_name,
            "labels": {"app.kubernetes.io/part-of": "racksmith"},
        },
        "spec": {
            "group": info.group,
            "names": _names(info),
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "versions": [version],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    """The CRDs of every kind in the catalogue, in catalogue order."""
    return [crd_for(kind_cls) for kind_cls in ALL_KINDS]


KIND_ROLE = "racksmith:kinds:{role}"
_AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def kind_roles() -> list[dict[str, Any]]:
    """Racksmith's kinds in Kubernetes' built-in roles, as Kubernetes does it:
    a ClusterRole per role (``racksmith:kinds:view``, ``racksmith:kinds:edit``)
    naming each kind's resources explicitly (its status subresource too, for
    ``view``), labelled ``rbac.authorization.k8s.io/aggregate-to-<role>`` so
    ``view``/``edit``/``admin`` aggregate them. A kind is in a role only when
    its ``KindInfo.built_in_roles`` says so: never a group wildcard."""
    out: list[dict[str, Any]] = []
    for role, verbs in (("view", _READ), ("edit", _WRITE)):
        by_group: dict[str, list[str]] = {}
        for kind_cls in ALL_KINDS:
            info = kind_cls.info
            if role not in info.built_in_roles:
                continue
            resources = by_group.setdefault(info.group, [])
            resources.append(info.plural)
            if role == "view" and kind_cls.has_status():
                resources.append(f"{info.plural}/status")
        out.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": KIND_ROLE.format(role=role),
                         "labels": {"app.kubernetes.io/part-of": "racksmith",
                                    f"{_AGGREGATE_TO}{role}": "true"}},
            "rules": [{"apiGroups": [group], "resources": sorted(resources), "verbs": verbs}
                      for group, resources in sorted(by_group.items())],
        })
    return out


def bootstrap_manifests() -> list[dict[str, Any]]:
    """What a Racksmith API server is started with: every CRD, then the
    kinds' built-in roles (``kind_roles``)."""
    return [*all_crds(), *kind_roles()]


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors/aliases, block style, long lines kept."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def render_yaml(crds: list[dict[str, Any]]) -> str:
    """A YAML stream of the given manifests, ``---``-separated, keys in stable order."""
    return yaml.dump_all(
        crds,
        Dumper=_Dumper,
        explicit_start=True,
        sort_keys=False,
        default_flow_style=False,
        width=100,
        allow_unicode=True,
    )
