"""What a host's HostFirmwareSettings status says, and its FirmwareSchema.

Owns the pure decisions of the firmware controller: the FirmwareSchema a
reading belongs to (``schema_for``: named ``schema-`` and a digest of the
vendor, model and rules, so hosts of one model share one and a new firmware
release with other rules gets another) and the status (``plan_status``):
the settings read, the schema's name, ``Valid`` (every wanted value fits
its rule; Metal3's messages, from ``kinds.firmware.setting_violation``) and
``ChangeDetected`` (a wanted value differs from the host's). No I/O; the
caller passes the time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from racksmith.kinds.firmware import (
    CHANGE_DETECTED,
    VALID,
    FirmwareSchemaSpec,
    HostFirmwareSettings,
    HostFirmwareSettingsStatus,
    SchemaReference,
    SettingSchema,
    same_value,
    setting_violation,
)
from racksmith.runtime.conditions import ConditionSpec, set_condition


@dataclass(frozen=True)
class SchemaPlan:
    """The FirmwareSchema a reading belongs to."""

    name: str
    spec: FirmwareSchemaSpec


def schema_for(vendor: str | None, model: str | None,
               rules: dict[str, SettingSchema]) -> SchemaPlan:
    """The FirmwareSchema of this vendor, model and rules (a stable name)."""
    spec = FirmwareSchemaSpec(hardware_vendor=vendor, hardware_model=model, schema=rules)
    text = json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                      sort_keys=True, separators=(",", ":"))
    return SchemaPlan(name="schema-" + hashlib.sha256(text.encode()).hexdigest()[:8], spec=spec)


def violations(hfs: HostFirmwareSettings, rules: dict[str, SettingSchema]) -> list[str]:
    """Why the wanted values cannot be applied, one message per setting."""
    found = []
    for name, value in sorted(hfs.spec.settings.items()):
        problem = setting_violation(name, value, rules.get(name))
        if problem is not None:
            found.append(problem)
    return found


def plan_status(hfs: HostFirmwareSettings, *, settings: dict[str, str],
                rules: dict[str, SettingSchema], schema: SchemaReference | None,
                read_at: datetime | None, now: datetime) -> HostFirmwareSettingsStatus:
    """The status for ``hfs`` given the host's ``settings`` and the ``rules``
    of its ``schema``; ``read_at``: when the settings were read (None: kept
    from the last reading)."""
    old = hfs.status or HostFirmwareSettingsStatus()
    generation = hfs.metadata.generation
    problems = violations(hfs, rules)
    valid = (ConditionSpec.false(VALID, "ConfigurationError", "; ".join(problems)) if problems
             else ConditionSpec.true(VALID, "Success", "every wanted setting fits the schema"))
    differs = sorted(name for name, value in hfs.spec.settings.items()
                     if not same_value(settings.get(name), str(value)))
    change = (ConditionSpec.true(CHANGE_DETECTED, "SettingsChanged",
                                 f"to apply at the next reboot: {', '.join(differs)}")
              if differs else
              ConditionSpec.false(CHANGE_DETECTED, "Applied",
                                  "the host has every wanted setting"))
    conditions = set_condition(old.conditions, valid, now, generation)
    conditions = set_condition(conditions, change, now, generation)
    return HostFirmwareSettingsStatus(
        schema=schema, settings=dict(settings), conditions=conditions,
        last_updated=read_at or old.last_updated)
