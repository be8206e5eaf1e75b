"""The Ironic provisioner: the Provisioner contract over a standalone Ironic.

Owns :class:`IronicProvisioner`. Each method re-reads the node (by its
stable name ``<namespace>~<name>``), decides from its provision state,
target and power state what — if anything — to ask Ironic next, asks at most
once per call and returns at once (``Result.wait`` while Ironic works). With
the client's node cache (``racksmith up``) the reads of one reconcile
(register, then e.g. power_state and power) cost at most one Ironic call:
the client serves them from data fetched after our last write to the node
and at most ``node_cache_ttl`` old. State
translation and the waits after our own requests (``IronicTimings``) live
in :mod:`ironic_states`, BMC schemes in
:mod:`ironic_bmc`, inventory mapping in :mod:`ironic_inventory`.

Exactly one deploy per provision request: ``active`` is requested only from
``available``; a node that is deploying, active or failed is never
redeployed by :meth:`provision` (a failed deploy stays failed until
deprovisioned).

Failures that Ironic records are sticky where retrying would repeat a
destructive operation (deploy) and retried on the next call where it cannot
(cleaning: the node is moved back to ``manageable`` as the failure is
reported, so the next prepare/deprovision call cleans again). Registration
retries when called with ``credentials_changed``; inspection with ``force``.

Secrets: BMC passwords go to Ironic only inside ``driver_info`` (Ironic masks
them on read); messages are scrubbed of the password; config-drive contents
are never logged.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import structlog

from racksmith.ironic.client import IronicAPIError, IronicClient, IronicUnavailable, JsonObject
from racksmith.ironic.config import FAKE_HARDWARE, IronicSettings
from racksmith.provisioner import ironic_firmware as fw
from racksmith.provisioner import ironic_states as st
from racksmith.provisioner.base import (
    BackendUnavailable,
    BMCAccess,
    ErrorKind,
    FirmwareReading,
    HostIdentity,
    InspectResult,
    ProvisionRequest,
    RegisterResult,
    Result,
)
from racksmith.provisioner.ironic_bmc import BMCAddressError, DriverSpec, parse_bmc
from racksmith.provisioner.ironic_inventory import hardware_from_inventory

#: Namespace for node UUIDs derived from host UIDs (stable across restarts).
NODE_UUID_NAMESPACE = uuid.UUID("6f1c7a52-5d2e-4b8e-9a43-7d1f0e3c2b90")
_M = TypeVar("_M", bound=Callable[..., Awaitable[Any]])
DETACH_REASON = "racksmith: host detached, Ironic must not touch it"

BOOT_MODES = {"UEFI": "uefi", "legacy": "bios", "UEFISecureBoot": "uefi"}


def node_uuid(host: HostIdentity) -> str:
    """The Ironic node UUID for ``host`` (derived from its uid)."""
    return str(uuid.uuid5(NODE_UUID_NAMESPACE, host.uid))


def _backend_errors(method: _M) -> _M:
    """The provisioner contract's error for an unreachable backend: Ironic's
    client raises its own ``IronicUnavailable`` (it knows nothing of the
    contract); every public method of the adapter turns it into
    ``BackendUnavailable``."""
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except IronicUnavailable as exc:
            raise BackendUnavailable(str(exc)) from None
    return wrapper  # type: ignore[return-value]


def _not_registered(kind: ErrorKind) -> Result:
    return Result.fail(kind, "the host is not registered with Ironic")


class IronicProvisioner:
    """Provisioner backed by Ironic (see the module docstring)."""

    def __init__(self, client: IronicClient, settings: IronicSettings, *,
                 logger: Any = None, timings: st.IronicTimings | None = None) -> None:
        self.client = client
        self.settings = settings
        self.timings = timings if timings is not None else st.IronicTimings()
        self._ipmi = settings.ipmi_enabled()
        #: node name → the boot MAC whose port registration found or made: a
        #: fake-hardware node's one NIC, so its inspection needs no port read.
        #: Lost with the process (the ports are read then).
        self._boot_macs: dict[str, str] = {}
        self._log = logger if logger is not None else structlog.get_logger(
            "racksmith.provisioner.ironic")

    # --- service ----------------------------------------------------------

    async def is_ready(self) -> bool:
        try:
            return bool(await self.client.list_drivers())
        except (IronicUnavailable, IronicAPIError):
            return False

    async def host_changes(self) -> AsyncIterator[tuple[str, str]]:
        """Hosts whose node changed between two of the client's background
        listings (:meth:`IronicClient.node_changes`); nothing without them
        (the client polls no listing: each host's own poll is all there is)."""
        if not self.client.polls_nodes:
            await asyncio.Event().wait()  # never set: runs until cancelled
        async for node in self.client.node_changes():
            namespace, sep, name = node.partition("~")
            if sep and namespace and name:
                yield namespace, name

    # --- registration -----------------------------------------------------

    @_backend_errors
    async def register(self, host: HostIdentity, bmc: BMCAccess, *,
                       credentials_changed: bool) -> RegisterResult:
        try:
            spec = parse_bmc(bmc, deploy_iso=self.settings.deploy_iso, ipmi_enabled=self._ipmi)
        except BMCAddressError as exc:
            return RegisterResult(Result.fail(ErrorKind.REGISTRATION, str(exc)))
        secrets = (bmc.password,)
        name = host.node_name
        node = await self.client.get_node(name)
        dirty = False
        created = False
        if node is None:
            try:
                node = await self.client.create_node(
                    self._node_body(host, bmc, spec), host=name)
            except IronicAPIError as exc:
                if exc.is_conflict:  # created meanwhile, or a stale uuid: look again
                    return RegisterResult(Result.wait(self.timings.action_poll))
                return RegisterResult(Result.fail(
                    ErrorKind.REGISTRATION, st.scrub(exc.message, secrets)))
            self._log.info("ironic node created", host=name, uuid=node.get("uuid"),
                           driver=spec.driver)
            dirty = created = True
        else:
            ops = self._driver_patch(node, spec, credentials_changed=credentials_changed)
            if ops:
                if st.is_busy(node):
                    return RegisterResult(st.busy_result(node, self.timings), node.get("uuid"))
                try:
                    node = await self.client.patch_node(name, ops)
                except IronicAPIError as exc:
                    return RegisterResult(self._api_failure(
                        exc, ErrorKind.REGISTRATION, secrets), node.get("uuid"))
                self._log.info("ironic node BMC details updated", host=name,
                               credentials_changed=credentials_changed)
                dirty = True
        node_id = node.get("uuid")
        state = node.get("provision_state")
        if state == st.VERIFYING or (state == st.ENROLL and node.get("target_provision_state")):
            return RegisterResult(st.busy_result(node, self.timings, dirty=dirty), node_id)
        if state != st.ENROLL:
            return RegisterResult(Result(done=True, dirty=dirty), node_id)
        # enroll: verify BMC access with "manage" (once per credentials change).
        if node.get("last_error") and not (credentials_changed or dirty):
            return RegisterResult(
                st.failure(node, kind=ErrorKind.REGISTRATION, secrets=secrets), node_id)
        port_error = await self._ensure_port(node, bmc, just_created=created)
        if port_error is not None:
            return RegisterResult(port_error, node_id)
        result = await self._provision_action(
            name, "manage", ErrorKind.REGISTRATION, secrets=secrets)
        return RegisterResult(result, node_id)

    def _node_body(self, host: HostIdentity, bmc: BMCAccess, spec: DriverSpec) -> JsonObject:
        boot_mode = BOOT_MODES.get(bmc.boot_mode, "uefi")
        capabilities = f"boot_mode:{boot_mode}"
        if bmc.boot_mode == "UEFISecureBoot":
            capabilities += ",secure_boot:true"
        body: JsonObject = {
            "name": host.node_name,
            "uuid": node_uuid(host),
            "driver": spec.driver,
            "driver_info": spec.full_driver_info(),
            "properties": {"capabilities": capabilities},
            "extra": {"racksmith_namespace": host.namespace, "racksmith_name": host.name,
                      "racksmith_uid": host.uid},
        }
        for kind, interface in spec.interfaces.items():
            body[f"{kind}_interface"] = interface
        return body

    @staticmethod
    def _driver_patch(node: JsonObject, spec: DriverSpec, *,
                      credentials_changed: bool) -> list[JsonObject]:
        """JSON-patch ops bringing the node's driver/BMC details up to date."""
        if node.get("driver") != spec.driver:
            ops: list[JsonObject] = [
                {"op": "replace", "path": "/driver", "value": spec.driver},
                {"op": "replace", "path": "/driver_info", "value": spec.full_driver_info()},
            ]
            ops += [{"op": "replace", "path": f"/{kind}_interface", "value": iface}
                    for kind, iface in spec.interfaces.items()]
            return ops
        current = node.get("driver_info") or {}
        ops = [{"op": "add", "path": f"/driver_info/{key}", "value": value}
               for key, value in spec.driver_info.items() if current.get(key) != value]
        if credentials_changed or ops:
            # Re-send credentials with any BMC change: Ironic masks them on
            # read, so they cannot be compared.
            ops += [{"op": "add", "path": f"/driver_info/{key}", "value": value}
                    for key, value in spec.credentials.items()]
        return ops

    async def _ensure_port(self, node: JsonObject, bmc: BMCAccess, *,
                           just_created: bool = False) -> Result | None:
        mac = (bmc.boot_mac_address or "").lower()
        if not mac:
            return None
        name = str(node.get("name"))
        # A node created a moment ago has no ports yet: skip the lookup.
        ports = [] if just_created else await self.client.list_ports(name)
        if not any(str(p.get("address", "")).lower() == mac for p in ports):
            try:
                await self.client.create_port(str(node["uuid"]), mac, host=name)
            except IronicAPIError as exc:
                if exc.is_conflict:
                    return Result.fail(ErrorKind.REGISTRATION,
                                       f"boot MAC address {mac} belongs to another Ironic node")
                return Result.fail(ErrorKind.REGISTRATION, exc.message)
        self._boot_macs[name] = mac
        return None

    async def _idle_node(self, host: HostIdentity, kind: ErrorKind, *,
                         absent: Result | None = None) -> JsonObject | Result:
        """The host's Ironic node when no operation runs on it; else what the
        caller returns at once: ``absent`` (default: not registered, of
        ``kind``) when there is no node, the busy wait while one runs."""
        node = await self.client.get_node(host.node_name)
        if node is None:
            return absent if absent is not None else _not_registered(kind)
        if st.is_busy(node):
            return st.busy_result(node, self.timings)
        return node

    # --- inspection -------------------------------------------------------

    @_backend_errors
    async def inspect(self, host: HostIdentity, *, force: bool = False) -> InspectResult:
        """``force`` starts a new inspection whenever the node is idle: pass
        it until the call returns ``wait``, then stop passing it."""
        name = host.node_name
        node = await self._idle_node(host, ErrorKind.INSPECTION)
        if isinstance(node, Result):
            return InspectResult(node)
        state = node.get("provision_state")
        inspected = bool(node.get("inspection_finished_at"))
        if state == st.INSPECT_FAILED:
            if force:
                return InspectResult(await self._provision_action(
                    name, "inspect", ErrorKind.INSPECTION))
            return InspectResult(st.failure(node, kind=ErrorKind.INSPECTION))
        if state == st.MANAGEABLE and (force or not inspected):
            return InspectResult(await self._provision_action(
                name, "inspect", ErrorKind.INSPECTION))
        if state == st.AVAILABLE and force:
            # Re-inspection runs from manageable only: go there first; the
            # controller keeps asking with force until the call says wait.
            return InspectResult(await self._provision_action(
                name, "manage", ErrorKind.INSPECTION))
        if not inspected:
            if state == st.AVAILABLE:  # inspection runs from manageable only
                return InspectResult(await self._provision_action(
                    name, "manage", ErrorKind.INSPECTION))
            return InspectResult(Result.fail(
                ErrorKind.INSPECTION, f"cannot inspect a host in Ironic state {state!r}"))
        return await self._read_inventory(node)

    async def _read_inventory(self, node: JsonObject) -> InspectResult:
        """The inspected hardware: from Ironic's inventory (none for
        fake-hardware, whose ``fake`` inspection stores none: not asked for),
        its NICs from the inventory's interfaces as Metal3 takes them; the
        node's ports are read only when the inventory names no interface
        (an inspection without one), to show at least the boot NIC. A
        fake-hardware node's only port is the boot MAC's that registration
        made: when this process registered it, that is its NIC (no read)."""
        name = str(node.get("name"))
        inventory: JsonObject = {}
        ports: list[JsonObject] = []
        if node.get("driver") != FAKE_HARDWARE:
            data = await self.client.get_inventory(name)
            inventory = (data or {}).get("inventory") or {}
        elif name in self._boot_macs:
            ports = [{"address": self._boot_macs[name], "pxe_enabled": True}]
        if not ports and not inventory.get("interfaces"):
            ports = await self.client.list_ports(name)
        hardware = hardware_from_inventory(inventory, node, ports)
        return InspectResult(Result.ok(), hardware=hardware,
                             raw_inventory=inventory or None)

    # --- preparation, provisioning ----------------------------------------

    @_backend_errors
    async def prepare(self, host: HostIdentity, *, clean: bool | None = None) -> Result:
        """``clean`` (from automatedCleaningMode) sets the node's
        automated_clean; None keeps Ironic's configured default."""
        node = await self._idle_node(host, ErrorKind.PREPARATION)
        if isinstance(node, Result):
            return node
        state = node.get("provision_state")
        if state == st.AVAILABLE:
            return Result.ok()
        if state == st.MANAGEABLE:
            return await self._provide(node, clean, ErrorKind.PREPARATION)
        if state == st.CLEAN_FAILED:
            return await self._report_clean_failure(node, ErrorKind.PREPARATION)
        if st.state_info(state).phase is st.Phase.FAILED:
            return st.failure(node, kind=ErrorKind.PREPARATION)
        return Result.fail(ErrorKind.PREPARATION,
                           f"cannot prepare a host in Ironic state {state!r}")

    @_backend_errors
    async def provision(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        name = host.node_name
        node = await self._idle_node(host, ErrorKind.PROVISIONING)
        if isinstance(node, Result):
            return node
        state = node.get("provision_state")
        if state == st.ACTIVE:
            return Result.ok()
        if state == st.MANAGEABLE:  # not prepared yet: make it available first
            return await self._provide(node, None, ErrorKind.PROVISIONING)
        if state == st.CLEAN_FAILED:
            return await self._report_clean_failure(node, ErrorKind.PREPARATION)
        if state != st.AVAILABLE:
            if st.state_info(state).phase is st.Phase.FAILED:
                return st.failure(node, kind=ErrorKind.PROVISIONING)
            return Result.fail(ErrorKind.PROVISIONING,
                               f"cannot provision a host in Ironic state {state!r}")
        # available: set the instance and deploy, once.
        self._log.info("deploying", host=name, image=request.image.url)
        return await self._instance_action(node, request, "active",
                                           configdrive=_configdrive(request))

    @_backend_errors
    async def adopt(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        name = host.node_name
        node = await self._idle_node(host, ErrorKind.PROVISIONING)
        if isinstance(node, Result):
            return node
        state = node.get("provision_state")
        if state == st.ACTIVE:
            return Result.ok()
        if state == st.AVAILABLE:  # adoption starts from manageable
            return await self._provision_action(name, "manage", ErrorKind.PROVISIONING)
        if state != st.MANAGEABLE:
            if st.state_info(state).phase is st.Phase.FAILED:
                return st.failure(node, kind=ErrorKind.PROVISIONING)
            return Result.fail(ErrorKind.PROVISIONING,
                               f"cannot adopt a host in Ironic state {state!r}")
        return await self._instance_action(node, request, "adopt")

    async def _instance_action(self, node: JsonObject, request: ProvisionRequest,
                               target: str, **extra: Any) -> Result:
        """Bring the node's instance_info up to date, then request ``target``."""
        name = str(node.get("name"))
        ops = _instance_info_patch(node, request)
        if ops:
            try:
                await self.client.patch_node(name, ops)
            except IronicAPIError as exc:
                return self._api_failure(exc, ErrorKind.PROVISIONING)
        return await self._provision_action(name, target, ErrorKind.PROVISIONING, **extra)

    @_backend_errors
    async def deprovision(self, host: HostIdentity, *, clean: bool) -> Result:
        name = host.node_name
        node = await self._idle_node(host, ErrorKind.PROVISIONING, absent=Result.ok())
        if isinstance(node, Result):
            return node
        state = node.get("provision_state")
        if state == st.AVAILABLE:
            return Result.ok()
        if state in (st.ACTIVE, st.DEPLOY_FAILED, st.ERROR):
            patched = await self._set_automated_clean(node, clean, ErrorKind.PROVISIONING)
            if patched is not None:
                return patched
            self._log.info("undeploying", host=name, clean=clean)
            return await self._provision_action(name, "deleted", ErrorKind.PROVISIONING)
        if state == st.MANAGEABLE:
            return await self._provide(node, clean, ErrorKind.PROVISIONING)
        if state == st.CLEAN_FAILED:
            return await self._report_clean_failure(node, ErrorKind.PROVISIONING)
        if st.state_info(state).phase is st.Phase.FAILED:
            return st.failure(node, kind=ErrorKind.PROVISIONING)
        return Result.fail(ErrorKind.PROVISIONING,
                           f"cannot deprovision a host in Ironic state {state!r}")

    async def _provide(self, node: JsonObject, clean: bool | None, kind: ErrorKind) -> Result:
        name = str(node.get("name"))
        patched = await self._set_automated_clean(node, clean, kind)
        if patched is not None:
            return patched
        if node.get("maintenance") and node.get("fault"):
            # Ironic set maintenance itself after a failure (e.g. cleaning);
            # "provide" is refused in maintenance.
            await self.client.set_maintenance(name, False)
        return await self._provision_action(name, "provide", kind)

    async def _set_automated_clean(self, node: JsonObject, clean: bool | None,
                                   kind: ErrorKind) -> Result | None:
        if clean is None or node.get("automated_clean") == clean:
            return None
        try:
            await self.client.patch_node(str(node.get("name")), [
                {"op": "replace", "path": "/automated_clean", "value": clean}])
        except IronicAPIError as exc:
            return self._api_failure(exc, kind)
        return None

    async def _report_clean_failure(self, node: JsonObject, kind: ErrorKind) -> Result:
        """Report a cleaning failure and move the node back to manageable, so
        the next call cleans again."""
        result = st.failure(node, kind=kind)
        moved = await self._provision_action(str(node.get("name")), "manage", kind)
        if moved.error:
            self._log.warning("could not move node out of clean failed",
                              host=node.get("name"), error=moved.error)
        return result

    # --- power --------------------------------------------------------------

    @_backend_errors
    async def power(self, host: HostIdentity, on: bool, *, soft: bool = False) -> Result:
        name = host.node_name
        node = await self.client.get_node(name)
        if node is None:
            return _not_registered(ErrorKind.POWER)
        if node.get("target_power_state"):
            return Result.wait(self.timings.power_poll)
        if st.power_on(node.get("power_state")) is on:
            return Result.ok()
        return await self._power_action(name, on, soft=soft)

    async def _power_action(self, name: str, on: bool, *, soft: bool = False) -> Result:
        target = "power on" if on else "soft power off" if soft else "power off"
        try:
            await self.client.set_power_state(name, target)
        except IronicAPIError as exc:
            return self._api_failure(exc, ErrorKind.POWER)
        self._log.info("power change requested", host=name, on=on)
        return Result.wait(self.timings.power_poll, dirty=True)

    @_backend_errors
    async def power_state(self, host: HostIdentity) -> bool | None:
        node = await self.client.get_node(host.node_name)
        if node is None:
            return None
        return st.power_on(node.get("power_state"))

    # --- firmware -----------------------------------------------------------

    @_backend_errors
    async def firmware(self, host: HostIdentity) -> FirmwareReading | None:
        node = await self.client.get_node(host.node_name)
        if node is None or node.get("bios_interface") in fw.NO_SETTINGS_INTERFACES:
            return None
        return fw.reading(await self.client.get_bios(host.node_name))

    @_backend_errors
    async def service_firmware(self, host: HostIdentity, settings: dict[str, str]) -> Result:
        """Servicing (``bios.apply_configuration``) from ``active``; the
        request's fingerprint goes to the node's ``extra`` first, so that
        ``service failed`` for these very values is reported, and a request
        for other values services again (Ironic's only way out of it)."""
        name = host.node_name
        node = await self._idle_node(host, ErrorKind.SERVICING)
        if isinstance(node, Result):
            return node
        state = node.get("provision_state")
        asked = fw.fingerprint(settings)
        if state == st.SERVICE_FAILED and (node.get("extra") or {}).get(fw.ATTEMPT_KEY) == asked:
            return st.failure(node, kind=ErrorKind.SERVICING)
        if state not in (st.ACTIVE, st.SERVICE_FAILED):
            return Result.fail(ErrorKind.SERVICING,
                               f"cannot change firmware settings in Ironic state {state!r}")
        current = fw.reading(await self.client.get_bios(name))
        if state == st.ACTIVE and not fw.missing(settings, current.settings if current else {}):
            return Result.ok()
        try:
            await self.client.patch_node(name, [{"op": "add", "path": f"/extra/{fw.ATTEMPT_KEY}",
                                                 "value": asked}])
            await self.client.set_provision_state(name, "service",
                                                  service_steps=fw.service_steps(settings))
        except IronicAPIError as exc:
            return self._api_failure(exc, ErrorKind.SERVICING)
        self._log.info("servicing requested", host=name, settings=sorted(settings))
        return Result.wait(self.timings.action_poll, dirty=True)

    # --- removal ------------------------------------------------------------

    @_backend_errors
    async def delete(self, host: HostIdentity) -> Result:
        name = host.node_name
        node = await self.client.get_node(name)
        if node is None:
            return Result.ok()
        state = node.get("provision_state")
        if not node.get("maintenance"):
            if st.is_busy(node) or node.get("target_power_state"):
                return st.busy_result(node, self.timings)
            if state in (st.ACTIVE, st.DEPLOY_FAILED, st.ERROR):
                return await self._provision_action(name, "deleted", ErrorKind.PROVISIONING)
            if state in (st.CLEAN_FAILED, st.INSPECT_FAILED):
                return await self._provision_action(name, "manage", ErrorKind.PROVISIONING)
            if state != st.ENROLL and st.power_on(node.get("power_state")) is True:
                result = await self._power_action(name, False)
                if result.error is None:
                    return result
                # A BMC that refuses must not block deletion forever.
                self._log.warning("power off before delete failed, deleting anyway",
                                  host=name, error=result.error)
        return await self._delete_node(node, ErrorKind.PROVISIONING)

    @_backend_errors
    async def detach(self, host: HostIdentity) -> Result:
        name = host.node_name
        node = await self.client.get_node(name)
        if node is None:
            return Result.ok()
        if not node.get("maintenance"):
            try:
                await self.client.set_maintenance(name, True, reason=DETACH_REASON)
            except IronicAPIError as exc:
                return self._api_failure(exc, ErrorKind.DETACH)
        return await self._delete_node(node, ErrorKind.DETACH)

    async def _delete_node(self, node: JsonObject, kind: ErrorKind) -> Result:
        name = str(node.get("name"))
        try:
            await self.client.delete_node(name)
        except IronicAPIError as exc:
            return self._api_failure(exc, kind)
        self._boot_macs.pop(name, None)
        self._log.info("ironic node deleted", host=name, uuid=node.get("uuid"))
        return Result(done=True, dirty=True)

    # --- helpers ------------------------------------------------------------

    async def _provision_action(self, name: str, target: str, kind: ErrorKind, *,
                                configdrive: Any = None,
                                secrets: tuple[str, ...] = ()) -> Result:
        try:
            await self.client.set_provision_state(name, target, configdrive=configdrive)
        except IronicAPIError as exc:
            return self._api_failure(exc, kind, secrets)
        self._log.info("provision action requested", host=name, target=target)
        return Result.wait(self.timings.action_poll, dirty=True)

    def _api_failure(self, exc: IronicAPIError, kind: ErrorKind,
                     secrets: tuple[str, ...] = ()) -> Result:
        """A locked node (409 "... is locked ...") means look again; any other
        refusal (including 409 for a change the state forbids) is the host's."""
        if exc.is_conflict and "locked" in exc.message.lower():
            return Result.wait(self.timings.action_poll)
        return Result.fail(kind, st.scrub(exc.message, secrets))


def instance_info(request: ProvisionRequest) -> JsonObject:
    """The node's ``instance_info`` for ``request``."""
    image = request.image
    info: JsonObject = {"image_source": image.url}
    if image.checksum:
        if image.checksum_type:
            info["image_os_hash_algo"] = image.checksum_type
            info["image_os_hash_value"] = image.checksum
        else:
            info["image_checksum"] = image.checksum
    if image.disk_format:
        info["image_disk_format"] = image.disk_format
    if request.root_device_hints:
        info["root_device"] = dict(request.root_device_hints)
    capabilities = {"boot_mode": BOOT_MODES.get(request.boot_mode, "uefi")}
    if request.boot_mode == "UEFISecureBoot":
        capabilities["secure_boot"] = "true"
    info["capabilities"] = capabilities
    return info


def _instance_info_patch(node: JsonObject, request: ProvisionRequest) -> list[JsonObject]:
    desired = instance_info(request)
    current = node.get("instance_info") or {}
    stale = [key for key in ("image_os_hash_algo", "image_os_hash_value", "image_checksum",
                             "image_disk_format", "root_device")
             if key in current and key not in desired]
    ops: list[JsonObject] = [{"op": "remove", "path": f"/instance_info/{key}"}
                             for key in stale]
    ops += [{"op": "add", "path": f"/instance_info/{key}", "value": value}
            for key, value in desired.items() if current.get(key) != value]
    return ops


def _configdrive(request: ProvisionRequest) -> JsonObject | None:
    """Ironic builds the ISO from this JSON (API >= 1.56)."""
    drive: JsonObject = {}
    if request.meta_data is not None:
        drive["meta_data"] = dict(request.meta_data)
    if request.user_data is not None:
        drive["user_data"] = request.user_data
    if request.network_data is not None:
        drive["network_data"] = dict(request.network_data)
    return drive or None


