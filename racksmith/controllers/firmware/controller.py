"""The firmware controller: each host's HostFirmwareSettings status and FirmwareSchema.

Owns ``FirmwareReconciler`` and ``firmware_controller``. Key: the
BareMetalHost ``ns/name`` (its HostFirmwareSettings has the same name).
Per reconcile: a host that is gone, detached, or not registered with the
provisioner is left alone (its HostFirmwareSettings stays: it is the
user's, and a GitOps copy would come back anyway). Otherwise the host's
settings are read through the ``Provisioner`` (``firmware``) when it
settles in a state (available, provisioned, externally provisioned) it was
not read in by this process, when its HostFirmwareSettings has no status,
and every ``FirmwareTimings.resync``; a host whose BMC has no settings gets
none of these objects (one applied for it anyway gets a status that refuses
each setting: ``Valid`` False, so no reboot waits for it). From a reading:
the FirmwareSchema of the host's vendor, model and rules is created when
missing (never changed: its name is a digest of its content), a
HostFirmwareSettings with no wanted settings is created when the host has
none (as Metal3 does), and the status
(``planners.firmware.plan_status``: settings, schema, ``Valid``,
``ChangeDetected``) is written when it changed — also without a new reading,
when the spec was edited (checked against the schema named in the status).

Linked by name only: no owner reference to the host's UID (BMO#2814: an
object from a GitOps repository carries none, and must not vanish).

Sources: BareMetalHosts and HostFirmwareSettings (same key). Reads from the
shared informers; writes HostFirmwareSettings (create; status through its
subresource, PUT with the resourceVersion read: a lost race is a
``Conflict``, which the runtime requeues) and FirmwareSchemas (create).
Events (component ``racksmith-firmware``, about the HostFirmwareSettings):
Warning ``ConfigurationError`` when ``Valid`` turns False, Normal
``SettingsApplied`` when ``ChangeDetected`` turns False.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from racksmith.clock import Clock, SystemClock
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.base import ObjectMeta
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.firmware import (
    CHANGE_DETECTED,
    VALID,
    FirmwareSchema,
    HostFirmwareSettings,
    HostFirmwareSettingsStatus,
    SchemaReference,
    SettingSchema,
)
from racksmith.kinds.metal import BareMetalHost
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.planners.firmware import plan_status, schema_for
from racksmith.provisioner.base import FirmwareReading, HostIdentity, Provisioner
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.conditions import EventSpec, find, same_but_times
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import FIRMWARE_SCHEMAS, FIRMWARE_SETTINGS, HOSTS
from racksmith.runtime.result import Done, RequeueAfter, Result

CONTROLLER_NAME = "firmware"
ACCESS = (watches(HOSTS, FIRMWARE_SETTINGS, FIRMWARE_SCHEMAS)
          + writes(FIRMWARE_SETTINGS, "create")
          + writes(FIRMWARE_SETTINGS, "update", subresource="status")
          + writes(FIRMWARE_SCHEMAS, "create")
          + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""
COMPONENT = "racksmith-firmware"
FIELD_MANAGER = "racksmith-firmware"
SETTLED = frozenset({S.AVAILABLE, S.PROVISIONED, S.EXTERNALLY_PROVISIONED})
"""States a host's firmware is read in (it is not being changed or booted)."""


@dataclass(frozen=True)
class FirmwareTimings:
    """The firmware controller's waits (seconds)."""

    resync: float = 600.0
    """Read a settled host's settings again this often (changes made outside)."""

    def __post_init__(self) -> None:
        if self.resync <= 0:
            raise ValueError("FirmwareTimings.resync must be > 0")


@dataclass(frozen=True)
class _Read:
    """When and in which (state, provisioner id) a host was last read, and
    whether it had settings."""

    marker: tuple[str, str]
    at: float
    found: bool


class FirmwareReconciler:
    """Reconciles one host's firmware objects per call (see the module docstring)."""

    def __init__(self, api_client: Any, provisioner: Provisioner, clock: Clock | None = None, *,
                 timings: FirmwareTimings | None = None, logger: Any = None,
                 recorder: EventRecorder | None = None) -> None:
        self.client: Client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.provisioner = provisioner
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timings = timings if timings is not None else FirmwareTimings()
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.firmware")
        self._read: dict[ObjectKey, _Read] = {}
        """Per host: this process's last reading."""

    async def reconcile(self, key: ObjectKey) -> Result:
        raw_host = await self.client.get(HOSTS, key.namespace, key.name)
        host = BareMetalHost.model_validate(raw_host) if raw_host is not None else None
        prov = host.status.provisioning if host is not None and host.status else None
        if host is None or prov is None or not prov.id or prov.state not in SETTLED \
                or ann.is_detached(host.metadata.annotations):
            self._read.pop(key, None)
            return Done()
        raw_hfs = await self.client.get(FIRMWARE_SETTINGS, key.namespace, key.name)
        hfs = HostFirmwareSettings.model_validate(raw_hfs) if raw_hfs is not None else None
        marker = (prov.state.value, prov.id)
        last = self._read.get(key)
        now = self.clock.now()
        due = (last is None or last.marker != marker or now - last.at >= self.timings.resync
               or (hfs is None and last.found) or (hfs is not None and hfs.status is None))
        if not due and hfs is None:
            return Done()  # its BMC has no settings (read once per state)
        if not due:
            assert hfs is not None and hfs.status is not None and raw_hfs is not None
            return await self._checked(key, hfs, raw_hfs, hfs.status.settings,
                                       await self._rules(hfs.status), hfs.status.schema_, None)
        reading = await self.provisioner.firmware(
            HostIdentity(key.namespace, key.name, host.metadata.uid or ""))
        self._read[key] = _Read(marker, now, reading is not None)
        if reading is None:
            if hfs is not None and raw_hfs is not None:
                # Settings asked of a BMC that has none: each is refused
                # (Valid False), so that nothing waits for them.
                await self._checked(key, hfs, raw_hfs, {}, {}, None, self.clock.wall())
            return RequeueAfter(self.timings.resync)
        schema = await self._schema(key.namespace, host, reading)
        if hfs is None:
            raw_hfs = await self._create_settings(key)
            hfs = HostFirmwareSettings.model_validate(raw_hfs)
        assert raw_hfs is not None
        await self._checked(key, hfs, raw_hfs, reading.settings, reading.schema, schema,
                            self.clock.wall())
        return RequeueAfter(self.timings.resync)

    async def _checked(self, key: ObjectKey, hfs: HostFirmwareSettings, raw: Mapping[str, Any],
                       settings: dict[str, str], rules: dict[str, SettingSchema],
                       schema: SchemaReference | None, read_at: Any) -> Result:
        """Write the planned status when it changed; Events on condition changes."""
        status = plan_status(hfs, settings=settings, rules=rules, schema=schema,
                             read_at=read_at, now=self.clock.wall())
        if same_but_times(hfs.status, status, also=("last_updated",) if read_at is None else ()):
            return Done()
        body = dict(raw)
        body["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            written = await self.client.update_status(FIRMWARE_SETTINGS, body)
        except NotFound:
            return Done()
        await self.recorder.record_all(written, _events(hfs.status, status))
        self.log.info("firmware settings checked", namespace=key.namespace, name=key.name,
                      valid=_status_of(status, VALID), change=_status_of(status, CHANGE_DETECTED))
        return Done()

    async def _rules(self, status: HostFirmwareSettingsStatus) -> dict[str, SettingSchema]:
        ref = status.schema_
        if ref is None:
            return {}
        raw = await self.client.get(FIRMWARE_SCHEMAS, ref.namespace, ref.name)
        return FirmwareSchema.model_validate(raw).spec.schema_ if raw is not None else {}

    async def _schema(self, namespace: str, host: BareMetalHost,
                      reading: FirmwareReading) -> SchemaReference | None:
        """The reading's FirmwareSchema, created when missing (None: no rules read)."""
        if not reading.schema:
            return None
        vendor = host.status.hardware.system_vendor if host.status and host.status.hardware \
            else None
        plan = schema_for(vendor.manufacturer if vendor else None,
                          vendor.product_name if vendor else None, reading.schema)
        if await self.client.get(FIRMWARE_SCHEMAS, namespace, plan.name) is None:
            body = FirmwareSchema(metadata=ObjectMeta(name=plan.name, namespace=namespace),
                                  spec=plan.spec).model_dump(by_alias=True, exclude_none=True,
                                                             mode="json")
            try:
                await self.client.create(FIRMWARE_SCHEMAS, body, namespace=namespace)
            except AlreadyExists:
                pass  # made meanwhile (same name: same content)
        return SchemaReference(name=plan.name, namespace=namespace)

    async def _create_settings(self, key: ObjectKey) -> dict[str, Any]:
        body = HostFirmwareSettings(metadata=ObjectMeta(name=key.name, namespace=key.namespace)) \
            .model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            return dict(await self.client.create(FIRMWARE_SETTINGS, body,
                                                 namespace=key.namespace))
        except AlreadyExists:
            found = await self.client.get(FIRMWARE_SETTINGS, key.namespace, key.name,
                                          live=True)
            if found is None:
                raise
            return dict(found)


def _status_of(status: HostFirmwareSettingsStatus, type_: str) -> str | None:
    cond = find(status.conditions, type_)
    return cond.status.value if cond is not None else None


def _events(old: HostFirmwareSettingsStatus | None,
            new: HostFirmwareSettingsStatus) -> list[EventSpec]:
    before = old.conditions if old is not None else []
    out = []
    valid, was_valid = find(new.conditions, VALID), find(before, VALID)
    if valid is not None and valid.status is ConditionStatus.FALSE and (
            was_valid is None or (was_valid.status, was_valid.message)
            != (valid.status, valid.message)):
        out.append(EventSpec("Warning", "ConfigurationError", valid.message or ""))
    change, had_change = find(new.conditions, CHANGE_DETECTED), find(before, CHANGE_DETECTED)
    if change is not None and change.status is ConditionStatus.FALSE and \
            had_change is not None and had_change.status is ConditionStatus.TRUE:
        out.append(EventSpec("Normal", "SettingsApplied", change.message or ""))
    return out


def firmware_controller(
    api_client: Any,
    provisioner: Provisioner,
    *,
    clock: Clock | None = None,
    workers: int = 2,
    namespace: str | None = None,
    timings: FirmwareTimings | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for hosts' firmware objects (see the module docstring)."""
    clock = clock if clock is not None else SystemClock()
    reconciler = FirmwareReconciler(api_client, provisioner, clock, timings=timings,
                                    logger=logger, recorder=recorder)
    client = reconciler.client
    sources = [
        client.source(HOSTS, namespace=namespace),
        client.source(FIRMWARE_SETTINGS, namespace=namespace),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)
