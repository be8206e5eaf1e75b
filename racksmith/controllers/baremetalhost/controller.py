"""The BareMetalHost controller: reconciler and runtime wiring.

Owns ``BareMetalHostReconciler`` (read the host and what it references,
ask the state's handler for a proposal, hand it to the committer) and
``baremetalhost_controller``, which builds the runtime ``Controller``.

Watches (shared informers of the runtime ``Client``): BareMetalHosts; and
Secrets and BareMetalHostProfiles, mapped to the hosts that reference them
through indexes of the host informer (``index``); and, when the
provisioner can tell (``backend``), the hosts whose backend state changed —
from Ironic's shared node listing; HardwareData and HostFirmwareSettings,
mapped by name (a provisioned host asked to reboot reads the firmware
settings it is to take). Reads the host, its BMC
credentials and config-drive Secrets and its profile from those caches.
Writes the host (finalizer, annotations; its status subresource) and its
BareMetalHostInventory (``committer``, ``inventory``). Talks to the API
only through the ``Client`` (field manager ``racksmith-baremetalhost``) and
to servers only through the ``Provisioner`` it is given.

Per reconcile: gone → forget; paused → nothing; no finalizer → add it first;
then the handler. A ``BackendUnavailable`` from the provisioner is not a host
error: the host keeps its state, gets ``BackendReachable`` False (and an
Event) and is retried with a capped back-off. A write that lost a race
(``Conflict``: someone else wrote the host meanwhile) escapes to the
runtime, which requeues the host: the proposal is dropped and worked out
again from a fresh read.

Events (core v1, about the BareMetalHost, component
``racksmith-baremetalhost``, through the runtime's ``EventRecorder``: a
repeat bumps the count of the Event it repeats): a Normal one per state
transition, named by the state table (``Registered``,
``InspectionComplete``, ``Prepared``, ``ProvisioningComplete``,
``Deprovisioning``...),
a Warning per new error (``RegistrationError``, ``ProvisioningError``...),
one per condition change (Warning when False: ``BackendUnavailable``,
``ProfileDoesNotFit``...) and the handlers' own (``PowerOn``/``PowerOff``,
``Rebooting``, ``CredentialsUpdated``, ``Detached``/``Attached``,
``Deleted``).
"""

from __future__ import annotations

import base64
import dataclasses
import random as _random
from collections.abc import Callable, Mapping
from typing import Any

import structlog
import yaml
from prometheus_client import CollectorRegistry

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.baremetalhost.backend import BackendSource
from racksmith.controllers.baremetalhost.calls import BudgetExhausted, CallBudget, HostCalls
from racksmith.controllers.baremetalhost.committer import Committer
from racksmith.controllers.baremetalhost.context import (
    ConfigDrive,
    Credentials,
    HostContext,
    ProfileLookup,
)
from racksmith.controllers.baremetalhost.handlers import decide
from racksmith.controllers.baremetalhost.index import HostReferences
from racksmith.controllers.baremetalhost.inventory import upsert_hardware_data
from racksmith.controllers.baremetalhost.metrics import BareMetalHostMetrics
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.status import BACKEND_REACHABLE
from racksmith.controllers.baremetalhost.statusannotation import restored_status
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.common import ConditionStatus, SecretReference
from racksmith.kinds.firmware import HostFirmwareSettings, wanted_settings
from racksmith.kinds.hostprofile import BareMetalHostProfile
from racksmith.kinds.metal import BareMetalHost, HardwareData
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.provisioner.base import (
    BackendUnavailable,
    BMCAccess,
    HostChanges,
    HostIdentity,
    Provisioner,
)
from racksmith.redact import register_secret
from racksmith.runtime.access import EVENTS, watches, writes
from racksmith.runtime.client import as_client
from racksmith.runtime.conditions import ConditionSpec, EventSpec
from racksmith.runtime.controller import Controller
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.queue import Backoff
from racksmith.runtime.resources import (
    FIRMWARE_SETTINGS,
    HARDWARE_DATA,
    HOSTS,
    INVENTORIES,
    PROFILES,
    SECRETS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result
from racksmith.runtime.source import Source

CONTROLLER_NAME = "baremetalhost"
ACCESS = (watches(HOSTS, SECRETS, PROFILES, INVENTORIES, HARDWARE_DATA, FIRMWARE_SETTINGS)
          + writes(HOSTS, "update") + writes(HOSTS, "update", subresource="status")
          + writes(INVENTORIES, "create") + writes(INVENTORIES, "update", subresource="status")
          + writes(HARDWARE_DATA, "create", "update")
          + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``)."""
COMPONENT = "racksmith-baremetalhost"
FIELD_MANAGER = "racksmith-baremetalhost"
_PROFILE_STATES = (S.AVAILABLE, S.PROVISIONING)


class BareMetalHostReconciler:
    """Reconciles one BareMetalHost per call (see the module docstring).

    ``api_client``: a kubernetes_asyncio ``ApiClient`` or a runtime
    ``Client``; ``namespace``: the controller's scope (None: all), where the
    host indexes are looked up."""

    def __init__(
        self,
        api_client: Any,
        provisioner: Provisioner,
        clock: Clock | None = None,
        *,
        settings: BareMetalHostSettings | None = None,
        metrics: BareMetalHostMetrics | None = None,
        logger: Any = None,
        random: Callable[[], float] = _random.random,
        recorder: EventRecorder | None = None,
        namespace: str | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.settings = settings or BareMetalHostSettings()
        self.metrics = metrics or BareMetalHostMetrics()
        self.provisioner = provisioner
        self.client = as_client(api_client).with_field_manager(FIELD_MANAGER)
        self.references = HostReferences(self.client, namespace)
        self.budget = CallBudget(self.clock, self.settings.calls_per_minute)
        self._backend_backoff: Backoff[ObjectKey] = Backoff(
            base=self.settings.backend_retry_base, cap=self.settings.backend_retry_cap,
            jitter=self.settings.jitter, random=random,
        )
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.baremetalhost")
        self.recorder = component_recorder(recorder, self.client, COMPONENT, clock=self.clock)
        self.committer = Committer(self.client, self.clock, self.settings, self.metrics, random,
                                   self.recorder)
        #: Hosts waiting out an error back-off: the inputs the error was seen
        #: with, and until when (see ``_held``).
        self._holds: dict[ObjectKey, tuple[tuple[Any, ...], float]] = {}

    async def reconcile(self, key: ObjectKey) -> Result:
        raw = await self.client.get(HOSTS, key.namespace, key.name)
        if raw is None:
            self.budget.forget(key)
            self._backend_backoff.forget(key)
            self._holds.pop(key, None)
            return Done()
        host = BareMetalHost.model_validate(raw)
        annotations = host.metadata.annotations
        deleting = host.metadata.deletion_timestamp is not None
        finalizers = host.metadata.finalizers
        state = host.status.provisioning.state if host.status and host.status.provisioning \
            else None
        log = self.log.bind(kind="BareMetalHost", namespace=key.namespace, name=key.name,
                            state=state.value if state else "")
        if ann.is_paused(annotations):
            log.debug("paused, nothing done")
            return Done()
        if deleting and ann.FINALIZER not in finalizers:
            return Done()
        ctx = await self._context(key, host)
        committer = self.committer
        if ann.STATUS in annotations:
            # Before anything writes a status: a host created with the
            # annotation takes its status first.
            return await self._status_annotation(ctx, raw, log)
        if not deleting and ann.FINALIZER not in finalizers:
            # Protect the host before the backend learns about it.
            await committer.commit(ctx, raw, Proposal(add_finalizer=True), log)
            return RequeueAfter(0.0)
        if not deleting:
            await self._rebuild_hardware_data(host, raw, log)
        inputs = _inputs(host, ctx)
        held = self._held(key, host, inputs)
        if held is not None:
            return RequeueAfter(held)
        try:
            ctx.calls.admit()
            proposal = await decide(ctx)
        except BudgetExhausted as exc:
            # Routine while a deploy is polled (every deploying host runs at
            # the budget): counted, and logged only at debug level.
            self.metrics.throttled.inc()
            log.debug("provisioner call budget exhausted", retry_in=round(exc.retry_after, 3))
            return RequeueAfter(exc.retry_after)
        except BackendUnavailable as exc:
            proposal = self._unreachable(key, ctx, str(exc))
        else:
            self._backend_backoff.forget(key)
        result = await committer.commit(ctx, raw, proposal, log)
        if proposal.error is not None and isinstance(result, RequeueAfter):
            self._holds[key] = (inputs, self.clock.now() + result.seconds)
        else:
            self._holds.pop(key, None)
        return result

    async def _status_annotation(self, ctx: HostContext, raw: dict[str, Any], log: Any
                                 ) -> Result:
        """A host with no status takes the annotation's copy (``statusannotation``);
        a host with one drops the annotation (taken, or come too late)."""
        host = ctx.host
        if host.status is None and not ctx.deleting:
            restored = restored_status(host.metadata.annotations[ann.STATUS],
                                       self.committer.now())
            if restored is not None:
                body = dict(raw)
                body["status"] = restored.model_dump(mode="json", by_alias=True,
                                                     exclude_none=True)
                await self.client.update_status(HOSTS, body)
                state = restored.provisioning.state if restored.provisioning else None
                log.info("status taken from the status annotation",
                         state=state.value if state else "")
                await self.recorder.record_all(raw, [EventSpec(
                    "Normal", "StatusRestored", f"status taken from the {ann.STATUS} "
                    f"annotation: {state.value if state else 'new'}, not inspected again")])
                return RequeueAfter(0.0)
        await self.committer.commit(ctx, raw, Proposal(remove_annotations=(ann.STATUS,),
                                                       requeue_after=0.0), log)
        return RequeueAfter(0.0)

    def _held(self, key: ObjectKey, host: BareMetalHost, inputs: tuple[Any, ...]) -> float | None:
        """Seconds left of the error back-off, or None to act now.

        The error's own status write (errorCount + 1) is a watch event that
        wakes the host at once; without this gate every such wake-up would
        retry the failed call and count the error again — a tight loop
        against the backend (seen as errorCount in the hundreds). The gate
        holds only while the host still shows the error and nothing the
        user controls changed since: spec (generation), annotations, the
        credentials Secret's version, a deletion. Kept in memory: after a
        restart the first reconcile acts, then the back-off applies again.
        """
        hold = self._holds.get(key)
        if hold is None:
            return None
        seen, until = hold
        remaining = until - self.clock.now()
        status = host.status
        if remaining <= 0 or seen != inputs or status is None or status.error_type is None:
            self._holds.pop(key, None)
            return None
        return remaining

    def _unreachable(self, key: ObjectKey, ctx: HostContext, error: str) -> Proposal:
        waiting = " (the deletion waits for it)" if ctx.deleting else ""
        message = ctx.redact(f"the provisioning backend is unreachable{waiting}: {error}")
        return Proposal(
            conditions=[ConditionSpec(BACKEND_REACHABLE, ConditionStatus.FALSE,
                                      "BackendUnavailable", message)],
            requeue_after=max(self.settings.poll_floor,
                              self._backend_backoff.next_delay(key)),
        )

    async def _context(self, key: ObjectKey, host: BareMetalHost) -> HostContext:
        identity = HostIdentity(key.namespace, key.name, host.metadata.uid or "")
        calls = HostCalls(self.provisioner, identity, key, self.budget, self.metrics)
        ctx = HostContext(host=host, calls=calls, settings=self.settings)
        ctx.credentials = await self._credentials(key, host)
        profile = ann.profile(host.metadata.annotations)
        if profile and ctx.state in _PROFILE_STATES:
            found = await self.client.get(PROFILES, key.namespace, profile)
            spec = BareMetalHostProfile.model_validate(found).spec if found else None
            ctx.profile = ProfileLookup(profile, spec, missing=found is None)
        if ctx.state is S.PROVISIONING:
            ctx.config_drive = await self._config_drive(key, host)
        if ctx.state is S.SERVICING or (ctx.state is S.PROVISIONED
                                        and ann.reboot_keys(host.metadata.annotations)):
            found = await self.client.get(FIRMWARE_SETTINGS, key.namespace, key.name)
            ctx.firmware_checked, ctx.firmware = wanted_settings(
                HostFirmwareSettings.model_validate(found) if found else None)
        if ctx.state is S.REGISTERING and (host.status is None or host.status.hardware is None):
            found = await self.client.get(HARDWARE_DATA, key.namespace, key.name)
            if found is not None:
                ctx.hardware_data = HardwareData.model_validate(found).spec.hardware
        return ctx

    async def _rebuild_hardware_data(self, host: BareMetalHost, raw: dict[str, Any],
                                     log: Any) -> None:
        """A host whose hardware is known has its HardwareData: one deleted is
        written again, from the full inventory (else the status summary)."""
        namespace, name = host.metadata.namespace or "", host.metadata.name or ""
        if host.status is None or host.status.hardware is None or \
                await self.client.get(HARDWARE_DATA, namespace, name) is not None:
            return
        inventory = await self.client.get(INVENTORIES, namespace, name)
        hardware = ((inventory or {}).get("status") or {}).get("hardware") or \
            host.status.hardware.model_dump(mode="json", by_alias=True, exclude_none=True)
        if await upsert_hardware_data(self.client, raw, hardware):
            log.info("HardwareData written again")
            await self.recorder.record_all(raw, [EventSpec(
                "Normal", "HardwareDataRebuilt", "HardwareData written again from the "
                "host's inspection inventory")])

    async def _credentials(self, key: ObjectKey, host: BareMetalHost) -> Credentials:
        bmc = host.spec.bmc
        if bmc is None:
            return Credentials(problem="no BMC details")
        name = bmc.credentials_name
        secret = await self._secret(key.namespace, name)
        if secret is None:
            return Credentials(name, problem=f"secret {name} not found")
        missing = [k for k in ("username", "password") if not secret.data.get(k)]
        if missing:
            return Credentials(name, secret.resource_version,
                               problem=f"secret {name} has no {' or '.join(missing)} key")
        # Never in a log line, whatever logs it (racksmith.redact).
        register_secret(secret.data["password"].decode("utf-8", "replace").strip())
        access = BMCAccess(
            address=bmc.address,
            username=secret.data["username"].decode("utf-8", "replace").strip(),
            password=secret.data["password"].decode("utf-8", "replace").strip(),
            disable_certificate_verification=bmc.disable_certificate_verification,
            boot_mac_address=host.spec.boot_mac_address or _known_boot_mac(host),
            boot_mode=host.spec.boot_mode.value,
            inspection=host.spec.inspection_mode.value if host.spec.inspection_mode else "",
        )
        return Credentials(name, secret.resource_version, access)

    async def _config_drive(self, key: ObjectKey, host: BareMetalHost) -> ConfigDrive:
        values: dict[str, Any] = {}
        for field, ref, parse in (
            ("userData", host.spec.user_data, False),
            ("networkData", host.spec.network_data, True),
            ("metaData", host.spec.meta_data, True),
        ):
            if ref is None:
                continue
            value = await self._secret_value(key.namespace, ref, field)
            if isinstance(value, _Problem):
                return ConfigDrive(problem=value.message)
            if parse:
                try:
                    loaded = yaml.safe_load(value)
                except yaml.YAMLError:
                    return ConfigDrive(problem=f"secret {ref.name}: {field} is not YAML/JSON")
                if not isinstance(loaded, dict):
                    return ConfigDrive(problem=f"secret {ref.name}: {field} is not a mapping")
                values[field] = loaded
            else:
                values[field] = value
        return ConfigDrive(values.get("userData"), values.get("networkData"),
                           values.get("metaData"))

    async def _secret_value(self, namespace: str, ref: SecretReference, field: str
                            ) -> str | _Problem:
        if ref.namespace not in (None, "", namespace):
            return _Problem(f"secret {ref.namespace}/{ref.name} is in another namespace")
        secret = await self._secret(namespace, ref.name)
        if secret is None:
            return _Problem(f"secret {ref.name} not found")
        raw = secret.data.get(field) or secret.data.get("value")
        if raw is None:
            return _Problem(f"secret {ref.name} has no {field} (or value) key")
        return raw.decode("utf-8", "replace")

    async def _secret(self, namespace: str, name: str) -> _SecretData | None:
        obj = await self.client.get(SECRETS, namespace, name)
        if obj is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        return _SecretData(str((obj.get("metadata") or {}).get("resourceVersion") or ""), data)


@dataclasses.dataclass(frozen=True)
class _SecretData:
    """A Secret's decoded data and version. Never log ``data``."""

    resource_version: str
    data: dict[str, bytes] = dataclasses.field(repr=False)


class _Problem:
    def __init__(self, message: str) -> None:
        self.message = message


def baremetalhost_controller(
    api_client: Any,
    provisioner: Provisioner,
    *,
    clock: Clock | None = None,
    settings: BareMetalHostSettings | None = None,
    workers: int = 4,
    registry: CollectorRegistry | None = None,
    namespace: str | None = None,
    logger: Any = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The runtime Controller for BareMetalHosts (see the module docstring).

    ``registry``: where the controller's own metrics go (pass the manager's).
    ``namespace``: watch one namespace only (None: all). ``recorder``: the
    process's EventRecorder (None: one of its own).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = BareMetalHostReconciler(
        api_client, provisioner, clock, settings=settings,
        metrics=BareMetalHostMetrics(registry), logger=logger, recorder=recorder,
        namespace=namespace,
    )
    client, references = reconciler.client, reconciler.references
    sources: list[Source] = [
        client.source(HOSTS, namespace=namespace),
        client.source(SECRETS, namespace=namespace, mapper=references.secret_keys),
        client.source(PROFILES, namespace=namespace, mapper=references.profile_keys),
        # A HardwareData is named as its host: one deleted wakes the host (rebuilt).
        client.source(HARDWARE_DATA, namespace=namespace, mapper=_same_name),
        # So is a HostFirmwareSettings: an edit wakes a host that waits on it.
        client.source(FIRMWARE_SETTINGS, namespace=namespace, mapper=_same_name),
    ]
    if isinstance(provisioner, HostChanges):
        sources.append(BackendSource(provisioner, namespace))
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)


def _known_boot_mac(host: BareMetalHost) -> str | None:
    """Without ``spec.bootMACAddress``, the MAC of the NIC the host boots from
    (else its first) in the hardware already known — a host whose hardware
    was given or restored is not inspected, and the backend must still know
    a port to find its ramdisk by."""
    hardware = host.status.hardware if host.status else None
    if hardware is None or not hardware.nics:
        return None
    pxe = [n.mac for n in hardware.nics if n.pxe and n.mac]
    return pxe[0] if pxe else hardware.nics[0].mac or None


def _same_name(obj: Mapping[str, Any]) -> list[ObjectKey]:
    meta = obj.get("metadata") or {}
    return [ObjectKey(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def _inputs(host: BareMetalHost, ctx: HostContext) -> tuple[Any, ...]:
    """What the user controls about a host: a change ends an error back-off early."""
    meta = host.metadata
    return (meta.generation, tuple(sorted((meta.annotations or {}).items())),
            ctx.credentials.version, meta.deletion_timestamp is not None)
