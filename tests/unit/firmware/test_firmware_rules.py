"""Firmware settings: Metal3's checks of a wanted value, the status planner,
and Ironic's BIOS rows as a reading."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from racksmith.kinds.base import ObjectMeta
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.firmware import (
    AttributeType,
    HostFirmwareSettings,
    HostFirmwareSettingsSpec,
    HostFirmwareSettingsStatus,
    SettingSchema,
    same_value,
    setting_violation,
    wanted_settings,
)
from racksmith.planners.firmware import plan_status, schema_for
from racksmith.provisioner import ironic_firmware as fw

T0 = datetime(2026, 12, 1, tzinfo=UTC)
ENUM = SettingSchema(attribute_type=AttributeType.ENUMERATION, allowable_values=["On", "Off"])
RULES = {
    "Turbo": ENUM,
    "Cores": SettingSchema(attribute_type=AttributeType.INTEGER, lower_bound=2, upper_bound=8),
    "Name": SettingSchema(attribute_type=AttributeType.STRING, min_length=1, max_length=4),
    "Quiet": SettingSchema(attribute_type=AttributeType.BOOLEAN),
    "Secret": SettingSchema(attribute_type=AttributeType.PASSWORD),
    "Serial": SettingSchema(attribute_type=AttributeType.STRING, read_only=True),
}


@pytest.mark.parametrize(("name", "value", "words"), [
    ("Turbo", "Max", "unknown enumeration value - Max"),
    ("Cores", 9, "integer 9 is above maximum value 8"),
    ("Cores", "1", "integer 1 is below minimum value 2"),
    ("Cores", "many", "'many' is not an integer"),
    ("Name", "toolong", "string length is above maximum length 4"),
    ("Name", "", "string length is below minimum length 1"),
    ("Quiet", "yes", "'yes' is not true or false"),
    ("Secret", "hunter2", "is a Password"),
    ("Serial", "X1", "setting Serial is ReadOnly"),
    ("Nope", "1", "setting Nope is not in the Firmware Schema"),
])
def test_a_value_the_schema_refuses_is_named(name: str, value: int | str, words: str) -> None:
    problem = setting_violation(name, value, RULES.get(name))
    assert problem is not None and words in problem
    if name == "Secret":
        assert "hunter2" not in problem


@pytest.mark.parametrize(("name", "value"), [
    ("Turbo", "Off"), ("Cores", 8), ("Cores", "2"), ("Name", "abcd"), ("Quiet", "True"),
])
def test_a_value_that_fits_passes(name: str, value: int | str) -> None:
    assert setting_violation(name, value, RULES[name]) is None


def _hfs(settings: dict[str, int | str], *, generation: int = 1,
         valid: tuple[ConditionStatus, int] | None = None) -> HostFirmwareSettings:
    status = None
    if valid is not None:
        status = HostFirmwareSettingsStatus(conditions=[Condition(
            type="Valid", status=valid[0], observed_generation=valid[1])])
    return HostFirmwareSettings(metadata=ObjectMeta(name="h", generation=generation),
                                spec=HostFirmwareSettingsSpec(settings=settings), status=status)


def test_wanted_settings_only_once_checked_and_valid() -> None:
    assert wanted_settings(None) == (True, None)
    assert wanted_settings(_hfs({})) == (True, None)
    assert wanted_settings(_hfs({"Cores": 4})) == (False, None)  # never checked
    assert wanted_settings(_hfs({"Cores": 4}, generation=2,
                                valid=(ConditionStatus.TRUE, 1))) == (False, None)  # stale
    assert wanted_settings(_hfs({"Cores": 4}, valid=(ConditionStatus.FALSE, 1))) == (True, None)
    assert wanted_settings(_hfs({"Cores": 4}, valid=(ConditionStatus.TRUE, 1))) == \
        (True, {"Cores": "4"})


def test_status_says_valid_and_what_changes() -> None:
    hfs = _hfs({"Turbo": "Off", "Quiet": "true"})
    status = plan_status(hfs, settings={"Turbo": "On", "Quiet": "True"}, rules=RULES,
                         schema=None, read_at=T0, now=T0)
    by_type = {c.type: c for c in status.conditions}
    assert by_type["Valid"].status is ConditionStatus.TRUE
    assert by_type["ChangeDetected"].status is ConditionStatus.TRUE
    assert by_type["ChangeDetected"].message == "to apply at the next reboot: Turbo"
    assert all(c.observed_generation == 1 for c in status.conditions)
    assert status.last_updated == T0
    bad = plan_status(_hfs({"Turbo": "Max", "Serial": "1"}), settings={}, rules=RULES,
                      schema=None, read_at=None, now=T0)
    valid = next(c for c in bad.conditions if c.type == "Valid")
    assert valid.status is ConditionStatus.FALSE and valid.reason == "ConfigurationError"
    assert "setting Serial is ReadOnly" in (valid.message or "")


def test_one_schema_per_vendor_model_and_rules() -> None:
    a = schema_for("Dell Inc.", "R650", {"Turbo": ENUM})
    assert a == schema_for("Dell Inc.", "R650", {"Turbo": ENUM})
    assert a.name.startswith("schema-") and len(a.name) == len("schema-") + 8
    assert a.name != schema_for("Dell Inc.", "R750", {"Turbo": ENUM}).name


def test_ironic_bios_rows_become_a_reading() -> None:
    rows = [
        {"name": "ProcTurboMode", "value": "Enabled", "attribute_type": "Enumeration",
         "allowable_values": ["Enabled", "Disabled"], "read_only": False},
        {"name": "QuietBoot", "value": True, "attribute_type": None},
        {"name": "Future", "value": "x", "attribute_type": "Collection"},
        {"name": "SysPassword", "value": "hunter2", "attribute_type": "Password"},
    ]
    reading = fw.reading(rows)
    assert reading is not None
    assert reading.settings == {"ProcTurboMode": "Enabled", "QuietBoot": "True", "Future": "x"}
    assert set(reading.schema) == {"ProcTurboMode"}
    assert fw.reading([]) is None
    assert fw.missing({"QuietBoot": "true", "ProcTurboMode": "Disabled"}, reading.settings) == \
        {"ProcTurboMode": "Disabled"}
    assert same_value("True", "true") and not same_value("On", "on")


def test_one_service_step_and_a_stable_fingerprint() -> None:
    (step,) = fw.service_steps({"b": "2", "a": "1"})
    assert (step["interface"], step["step"]) == ("bios", "apply_configuration")
    assert step["args"]["settings"] == [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]
    assert fw.fingerprint({"a": "1", "b": "2"}) == fw.fingerprint({"b": "2", "a": "1"})
    assert fw.fingerprint({"a": "1"}) != fw.fingerprint({"a": "2"})


def test_the_node_flow_does_not_count_a_serviced_host_as_off() -> None:
    from racksmith.controllers.maintenance.flow import bmh_powered_on

    def host(state: str, on: object) -> dict[str, object]:
        return {"status": {"provisioning": {"state": state}, "poweredOn": on}}
    assert bmh_powered_on(host("provisioned", False)) is False
    assert bmh_powered_on(host("provisioned", True)) is True
    assert bmh_powered_on(host("servicing", False)) is None
    assert bmh_powered_on(host("provisioned", "off")) is None
    assert bmh_powered_on({}) is None
