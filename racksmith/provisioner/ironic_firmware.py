"""Firmware settings between Ironic and the Provisioner contract.

Owns the translation of Ironic's cached BIOS settings (``GET
/v1/nodes/{node}/bios?detail=True``: a value and the registry fields per
setting) into a ``FirmwareReading`` (Password settings left out: their
value must never reach a status), the service step that applies wanted
values (``bios.apply_configuration``, out of band: no ramdisk), and the
fingerprint of a request that the node records (``extra``) so a failed
change is reported, not retried, until different values are asked for.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from racksmith.kinds.firmware import AttributeType, SettingSchema, same_value
from racksmith.provisioner.base import FirmwareReading

ATTEMPT_KEY = "racksmith_firmware_request"
"""The node's ``extra`` key holding the fingerprint of the last servicing request."""
NO_SETTINGS_INTERFACES = frozenset({None, "", "no-bios", "fake"})
"""BIOS interfaces that hold no settings: hosts on them have no firmware reading."""
_RULE_FIELDS = tuple(SettingSchema.model_fields)


def reading(rows: list[dict[str, Any]]) -> FirmwareReading | None:
    """Ironic's BIOS rows as a reading; None when Ironic has none cached."""
    if not rows:
        return None
    settings: dict[str, str] = {}
    schema: dict[str, SettingSchema] = {}
    for row in rows:
        name = row.get("name")
        if not isinstance(name, str) or not name:
            continue
        rule = {key: row.get(key) for key in _RULE_FIELDS if row.get(key) is not None}
        if rule.get("attribute_type") == AttributeType.PASSWORD.value:
            continue  # a secret: never copied into a status (and never settable)
        value = row.get("value")
        settings[name] = "" if value is None else str(value)
        if rule.get("attribute_type"):
            try:
                schema[name] = SettingSchema.model_validate(rule)
            except ValidationError:
                continue  # a type Redfish adds later: the setting is shown, not checked
    return FirmwareReading(settings=settings, schema=schema)


def missing(wanted: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """The wanted values the host does not have yet (booleans in any case)."""
    return {name: value for name, value in wanted.items()
            if not same_value(current.get(name), value)}


def fingerprint(wanted: Mapping[str, str]) -> str:
    """A stable digest of a request's values (what the node records)."""
    text = json.dumps(dict(sorted(wanted.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def service_steps(wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    """The one service step that sets ``wanted`` (Ironic reboots the host)."""
    return [{
        "interface": "bios",
        "step": "apply_configuration",
        "args": {"settings": [{"name": n, "value": v} for n, v in sorted(wanted.items())]},
    }]
