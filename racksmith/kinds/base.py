"""The building blocks every kind is made of.

Owns the model configuration shared by all kinds (camelCase JSON names),
:class:`DocEnum` (string enums with a docstring per member), the printer
column and kind metadata records, and :class:`Resource`, the base of every
top-level kind. The per-group modules (``metal``, ``ipam``, ``cluster``,
``storage``, ``lcm``) build on it; ``crdgen`` and ``docgen`` read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

#: Schema key under which :class:`DocEnum` hands its member docs to ``crdgen``;
#: ``crdgen`` folds them into the description and removes the key.
ENUM_DOCS_KEY = "x-racksmith-enum-docs"

DEFAULT_VERSION = "v1alpha1"


class RacksmithModel(BaseModel):
    """Base of every spec, status and nested object.

    Python names are snake_case; JSON names are camelCase (or an explicit
    alias where the anchors spell a field differently, e.g. ``ID``). Unknown
    fields are ignored, not rejected, so an older controller can read objects
    written against a newer schema.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
    )


class DocEnum(enum.StrEnum):
    """A string enum whose members each carry a docstring.

    Declare members as ``NAME = "value", "What this value means."``; the text
    becomes ``member.__doc__`` and is listed in the CRD description.
    """

    _value_: str

    def __new__(cls, value: str, doc: str = "") -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema = handler.resolve_ref_schema(schema)
        # A list, not a dict: pydantic sorts dict keys and member order matters.
        schema[ENUM_DOCS_KEY] = [[m.value, m.__doc__ or ""] for m in cls]
        return schema


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry (what ``kubectl get`` shows).

    ``priority`` 0 columns always show; priority 1 only with ``-o wide``.
    ``type`` is one of integer, number, string, boolean, date.
    """

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str | None = None


def age_column() -> PrinterColumn:
    """The conventional trailing AGE column."""
    return PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation.")


def condition_column(name: str, condition_type: str, priority: int = 0) -> PrinterColumn:
    """A column showing the status (True/False/Unknown) of one condition."""
    return PrinterColumn(
        name,
        f'.status.conditions[?(@.type=="{condition_type}")].status',
        "string",
        f"Status of the {condition_type} condition.",
        priority,
    )


@dataclass(frozen=True)
class KindInfo:
    """Everything about a kind that is not a field: names, scope, table view."""

    group: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("racksmith",)
    printer_columns: tuple[PrinterColumn, ...] = ()
    selectable_fields: tuple[str, ...] = ()
    built_in_roles: tuple[str, ...] = ("view", "edit")
    """Which of Kubernetes' built-in roles see the kind (``view``: read;
    ``edit``: write, and ``admin`` through ``edit``): explicit per kind, so a
    kind added later (one holding credentials, say) is readable by no viewer
    until it says so (``racksmith.kinds.crdgen.kind_roles``)."""
    version: str = DEFAULT_VERSION
    singular: str = ""
    list_kind: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        if not self.list_kind:
            object.__setattr__(self, "list_kind", self.kind + "List")

    @property
    def api_version(self) -> str:
        """``group/version`` as written in ``apiVersion``."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """The CustomResourceDefinition's ``metadata.name``."""
        return f"{self.plural}.{self.group}"


class OwnerReference(RacksmithModel):
    """An entry of ``metadata.ownerReferences``."""

    api_version: str = Field(description="API version of the owner.")
    kind: str = Field(description="Kind of the owner.")
    name: str = Field(description="Name of the owner.")
    uid: str = Field(description="UID of the owner.")
    controller: bool | None = Field(
        default=None, description="True if the owner is the managing controller."
    )
    block_owner_deletion: bool | None = Field(
        default=None, description="True if the owner cannot be deleted before this object."
    )


class ObjectMeta(RacksmithModel):
    """The subset of Kubernetes ``ObjectMeta`` the controllers use.

    Not part of the CRD schema (the API server owns metadata); other metadata
    fields are kept as extras so that a read-modify-write does not drop them.
    """

    model_config = ConfigDict(extra="allow")

    name: str | None = Field(default=None, description="Object name.")
    generate_name: str | None = Field(
        default=None, description="Prefix for a server-generated name."
    )
    namespace: str | None = Field(
        default=None, description="Namespace; empty for cluster-scoped kinds."
    )
    uid: str | None = Field(default=None, description="Server-assigned unique id.")
    resource_version: str | None = Field(
        default=None, description="Opaque version for concurrency."
    )
    generation: int | None = Field(default=None, description="Sequence number of spec changes.")
    creation_timestamp: datetime | None = Field(
        default=None, description="When the object was created."
    )
    deletion_timestamp: datetime | None = Field(
        default=None, description="When deletion was requested."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    finalizers: list[str] = Field(default_factory=list, description="Finalizers.")
    owner_references: list[OwnerReference] = Field(
        default_factory=list, description="Objects this one depends on."
    )


class Resource(RacksmithModel):
    """Base of every top-level kind.

    A subclass sets ``info`` and declares a ``spec`` field and, when the kind
    has one, a ``status`` field (``status: XStatus | None = None``); the class
    docstring becomes the kind's description. ``apiVersion`` and ``kind``
    default from ``info`` and must match it when given.
    """

    info: ClassVar[KindInfo]

    api_version: str = Field(default="", description="Versioned schema of this object.")
    kind: str = Field(default="", description="Kind of this object.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard metadata.")

    @model_validator(mode="before")
    @classmethod
    def _fill_type_meta(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            data.setdefault("apiVersion", cls.info.api_version)
            data.setdefault("kind", cls.info.kind)
            if data.get("apiVersion") != cls.info.api_version or data.get("kind") != cls.info.kind:
                raise ValueError(
                    f"expected {cls.info.api_version} {cls.info.kind}, "
                    f"got {data.get('apiVersion')} {data.get('kind')}"
                )
        return data

    @classmethod
    def spec_model(cls) -> type[RacksmithModel]:
        """The pydantic model of ``spec``."""
        return _field_model(cls, "spec")

    @classmethod
    def status_model(cls) -> type[RacksmithModel] | None:
        """The pydantic model of ``status``, or None if the kind has no status."""
        if "status" not in cls.model_fields:
            return None
        return _field_model(cls, "status")

    @classmethod
    def has_status(cls) -> bool:
        """True if the kind has a status (and therefore a status subresource)."""
        return "status" in cls.model_fields


def _field_model(cls: type[Resource], name: str) -> type[RacksmithModel]:
    annotation = cls.model_fields[name].annotation
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, RacksmithModel):
            return candidate
    raise TypeError(f"{cls.__name__}.{name} is not a RacksmithModel")
