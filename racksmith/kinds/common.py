"""Types shared by several kinds: conditions, references, selectors, quantities.

Owns the Racksmith spelling of the Kubernetes helper types (``Condition``,
``ObjectReference``, ``LabelSelector``, ``Quantity``, ``IntOrString``) so
that every kind uses the same JSON shape and the same CRD schema for them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema

from racksmith.kinds.base import DocEnum, RacksmithModel

#: The pattern real CRDs carry for ``resource.Quantity`` (e.g. "10Gi", "500M", "1e3").
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)

_INT_OR_STRING_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a quantity (e.g. 10Gi, 500M, 1000)")
    return value


#: A Kubernetes quantity: an integer or a string such as "10Gi".
Quantity = Annotated[
    int | str,
    AfterValidator(_check_quantity),
    WithJsonSchema({**_INT_OR_STRING_SCHEMA, "pattern": QUANTITY_PATTERN}),
]

#: An integer or a string (e.g. a count or a percentage such as "30%").
IntOrString = Annotated[int | str, WithJsonSchema(dict(_INT_OR_STRING_SCHEMA))]


class ConditionStatus(DocEnum):
    """Status of a condition."""

    TRUE = "True", "The condition holds."
    FALSE = "False", "The condition does not hold."
    UNKNOWN = "Unknown", "The controller cannot tell (yet)."


class Condition(RacksmithModel):
    """One observation of an aspect of an object's state."""

    type: str = Field(description="Type of the condition, in CamelCase (e.g. Ready).")
    status: ConditionStatus = Field(description="Whether the condition holds.")
    reason: str | None = Field(
        default=None, description="Machine-readable CamelCase reason for the last transition."
    )
    message: str | None = Field(
        default=None, description="Human-readable details of the transition."
    )
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last changed."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed from."
    )


def conditions_field(description: str = "Current state observations.") -> Any:
    """A ``conditions`` list field: a list-map keyed by ``type``."""
    return Field(
        default_factory=list,
        description=description,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class ObjectReference(RacksmithModel):
    """A reference to another object, possibly of another kind or namespace."""

    api_version: str | None = Field(default=None, description="API version of the referent.")
    kind: str | None = Field(default=None, description="Kind of the referent.")
    namespace: str | None = Field(
        default=None, description="Namespace of the referent; empty means the referrer's namespace."
    )
    name: str = Field(description="Name of the referent.")
    uid: str | None = Field(
        default=None, description="UID of the referent, to detect a re-created object."
    )


class LocalObjectReference(RacksmithModel):
    """A reference by name to an object in the same namespace."""

    name: str = Field(description="Name of the referent.")


class SecretReference(RacksmithModel):
    """A reference to a Secret."""

    name: str = Field(description="Name of the Secret.")
    namespace: str | None = Field(
        default=None, description="Namespace of the Secret; empty means the referrer's namespace."
    )


class LabelSelectorOperator(DocEnum):
    """How a label selector requirement matches a label's value."""

    IN = "In", "The label's value is one of values."
    NOT_IN = "NotIn", "The label is absent or its value is none of values."
    EXISTS = "Exists", "The label is present (values must be empty)."
    DOES_NOT_EXIST = "DoesNotExist", "The label is absent (values must be empty)."


class LabelSelectorRequirement(RacksmithModel):
    """One requirement of a label selector."""

    key: str = Field(description="Label key the requirement applies to.")
    operator: LabelSelectorOperator = Field(description="Relation between the key and values.")
    values: list[str] = Field(
        default_factory=list, description="Values for In and NotIn; empty otherwise."
    )


class LabelSelector(RacksmithModel):
    """A label query; all requirements are ANDed. An empty selector matches everything."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels that must be present with exactly these values."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Set-based requirements."
    )
