"""A host's firmware (BIOS) settings, as Metal3 serves them.

Owns HostFirmwareSettings (``hfs``: the settings a user wants on the host of
the same name, and those read from it) and FirmwareSchema (what each setting
of one vendor's and model's firmware accepts), both ``metal3.io/v1alpha1``
with Metal3's fields, and ``setting_violation``, the pure check of one
wanted value against its schema entry (Metal3's messages). Linked by name,
never by UID: a HostFirmwareSettings is named as its host, and its
``status.schema`` names its FirmwareSchema (BMO#2814: an object applied
from a GitOps repository carries no UID of ours).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
)
from racksmith.kinds.common import Condition, IntOrString, conditions_field
from racksmith.kinds.metal import CATEGORIES, METAL3_GROUP

VALID = "Valid"
"""HostFirmwareSettings condition: every wanted setting fits the schema."""
CHANGE_DETECTED = "ChangeDetected"
"""HostFirmwareSettings condition: a wanted setting differs from the host's."""


class AttributeType(DocEnum):
    """The type of a firmware setting (Redfish's attribute registry)."""

    ENUMERATION = "Enumeration", "One of allowable_values."
    STRING = "String", "Text, between min_length and max_length characters."
    INTEGER = "Integer", "A whole number between lower_bound and upper_bound."
    BOOLEAN = "Boolean", "true or false."
    PASSWORD = "Password", "A password: never read back, never set through settings."


class SettingSchema(RacksmithModel):
    """What one firmware setting accepts (names as Metal3 spells them)."""

    attribute_type: AttributeType | None = Field(
        default=None, alias="attribute_type", description="The setting's type.")
    allowable_values: list[str] | None = Field(
        default=None, alias="allowable_values", description="The values an Enumeration takes.")
    lower_bound: int | None = Field(
        default=None, alias="lower_bound", description="An Integer's smallest value.")
    upper_bound: int | None = Field(
        default=None, alias="upper_bound", description="An Integer's largest value.")
    min_length: int | None = Field(
        default=None, alias="min_length", description="A String's shortest length.")
    max_length: int | None = Field(
        default=None, alias="max_length", description="A String's longest length.")
    read_only: bool | None = Field(
        default=None, alias="read_only", description="The setting cannot be changed.")
    unique: bool | None = Field(
        default=None, alias="unique", description="The value is unique to this system.")


class FirmwareSchemaSpec(RacksmithModel):
    """The settings one vendor's and model's firmware has."""

    hardware_vendor: str | None = Field(default=None, description="The system's manufacturer.")
    hardware_model: str | None = Field(default=None, description="The system's model.")
    schema_: dict[str, SettingSchema] = Field(
        default_factory=dict, alias="schema", description="Each setting's rules, by name.")


class FirmwareSchema(Resource):
    """The firmware settings one vendor's and model's hosts have, and their rules.

    Written from the provisioner's reading of a host's firmware registry; one
    per distinct schema in a namespace (named ``schema-`` and a hash of it),
    shared by every HostFirmwareSettings whose ``status.schema`` names it.
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=METAL3_GROUP,
        kind="FirmwareSchema",
        plural="firmwareschemas",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Vendor", ".spec.hardwareVendor", description="Manufacturer."),
            PrinterColumn("Model", ".spec.hardwareModel", description="Model."),
            age_column(),
        ),
    )

    spec: FirmwareSchemaSpec = Field(default_factory=FirmwareSchemaSpec,
                                     description="The settings and their rules.")


class SchemaReference(RacksmithModel):
    """The FirmwareSchema a HostFirmwareSettings is checked against."""

    name: str = Field(description="The FirmwareSchema's name.")
    namespace: str = Field(description="The FirmwareSchema's namespace.")


class HostFirmwareSettingsSpec(RacksmithModel):
    """The firmware settings wanted on the host of the same name."""

    settings: dict[str, IntOrString] = Field(
        default_factory=dict,
        description="Wanted values by setting name; settings not named are left as they are.")


class HostFirmwareSettingsStatus(RacksmithModel):
    """The host's firmware settings as last read, and how they compare."""

    schema_: SchemaReference | None = Field(
        default=None, alias="schema", description="The FirmwareSchema the settings follow.")
    settings: dict[str, str] = Field(
        default_factory=dict, description="The host's current values by setting name.")
    last_updated: datetime | None = Field(default=None, description="When last read.")
    conditions: list[Condition] = conditions_field(
        "Valid (every wanted value fits the schema) and ChangeDetected (a wanted value "
        "differs from the host's).")


class HostFirmwareSettings(Resource):
    """Firmware (BIOS) settings of the BareMetalHost of the same name.

    ``spec.settings`` names only what to change. The status holds what the
    host has, read through the provisioner. A provisioned host takes the
    changes in its next reboot (``reboot.metal3.io``, as the node
    maintenance flow asks once the node is drained and its locks taken):
    the provisioner services it, the disk is kept. A value that does not
    fit the schema sets ``Valid`` False and nothing is applied.
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=METAL3_GROUP,
        kind="HostFirmwareSettings",
        plural="hostfirmwaresettings",
        namespaced=True,
        short_names=("hfs",),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Valid", ".status.conditions[?(@.type==\"Valid\")].status",
                          description="Every wanted value fits the schema."),
            PrinterColumn("Change", ".status.conditions[?(@.type==\"ChangeDetected\")].status",
                          description="A wanted value differs from the host's."),
            age_column(),
        ),
    )

    spec: HostFirmwareSettingsSpec = Field(default_factory=HostFirmwareSettingsSpec,
                                           description="The wanted settings.")
    status: HostFirmwareSettingsStatus | None = Field(
        default=None, description="The host's settings as read.")


def setting_violation(name: str, value: int | str, rule: SettingSchema | None) -> str | None:
    """Why ``value`` cannot be given to setting ``name`` (None: it can); Metal3's words."""
    if rule is None:
        return f"setting {name} is not in the Firmware Schema"
    if rule.read_only:
        return f"setting {name} is ReadOnly"
    text = str(value)
    kind = rule.attribute_type
    if kind is AttributeType.PASSWORD:
        return f"setting {name} is a Password: it cannot be set through settings"
    if kind is AttributeType.ENUMERATION:
        if rule.allowable_values and text not in rule.allowable_values:
            return (f"setting {name}: unknown enumeration value - {text} "
                    f"(allowed: {', '.join(rule.allowable_values)})")
    elif kind is AttributeType.INTEGER:
        try:
            number = int(text)
        except ValueError:
            return f"setting {name}: {text!r} is not an integer"
        if rule.upper_bound is not None and number > rule.upper_bound:
            return f"setting {name}: integer {number} is above maximum value {rule.upper_bound}"
        if rule.lower_bound is not None and number < rule.lower_bound:
            return f"setting {name}: integer {number} is below minimum value {rule.lower_bound}"
    elif kind is AttributeType.STRING:
        if rule.max_length is not None and len(text) > rule.max_length:
            return f"setting {name}: string length is above maximum length {rule.max_length}"
        if rule.min_length is not None and len(text) < rule.min_length:
            return f"setting {name}: string length is below minimum length {rule.min_length}"
    elif kind is AttributeType.BOOLEAN and text.lower() not in ("true", "false"):
        return f"setting {name}: {text!r} is not true or false"
    return None


def wanted_settings(hfs: HostFirmwareSettings | None) -> tuple[bool, dict[str, str] | None]:
    """``(checked, wanted)`` for a host's HostFirmwareSettings: ``checked`` is
    False while its current spec has not been checked against the schema yet
    (``Valid`` of an older generation, or none); ``wanted`` the values to
    apply (None: nothing named, or ``Valid`` False)."""
    if hfs is None or not hfs.spec.settings:
        return True, None
    valid = next((c for c in (hfs.status.conditions if hfs.status else []) if c.type == VALID),
                 None)
    if valid is None or valid.observed_generation != hfs.metadata.generation:
        return False, None
    if valid.status.value != "True":
        return True, None
    return True, {name: str(value) for name, value in hfs.spec.settings.items()}


def same_value(a: str | None, b: str | None) -> bool:
    """Two readings of one setting agree (booleans in any case: Redfish's
    ``True``, a manifest's ``true``)."""
    def plain(value: str | None) -> str | None:
        if value is not None and value.lower() in ("true", "false"):
            return value.lower()
        return value
    return plain(a) == plain(b)
