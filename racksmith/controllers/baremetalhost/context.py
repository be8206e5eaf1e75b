"""Everything a state handler may look at, gathered once per reconcile.

Owns ``HostContext``: the host as read, its BMC credentials (from the
Secret, never logged), its profile, its config-drive inputs, the budgeted
provisioner and the settings. Built by the reconciler; read by handlers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from racksmith.controllers.baremetalhost.calls import HostCalls
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.hardware import HardwareDetails
from racksmith.kinds.hostprofile import BareMetalHostProfileSpec
from racksmith.kinds.metal import BareMetalHost, BareMetalHostStatus, ProvisioningState
from racksmith.provisioner.base import BMCAccess, Result
from racksmith.redact import mask_values


@dataclass(frozen=True)
class Credentials:
    """The BMC credentials as found in the Secret named by ``spec.bmc.credentialsName``."""

    secret_name: str | None = None
    version: str | None = None
    """The Secret's resourceVersion."""
    bmc: BMCAccess | None = None
    problem: str | None = None
    """Why no usable credentials (e.g. "secret bmc-0 not found"); never a value."""


@dataclass(frozen=True)
class ProfileLookup:
    """The BareMetalHostProfile the host's profile annotation names, if any."""

    name: str | None = None
    spec: BareMetalHostProfileSpec | None = None
    missing: bool = False


@dataclass(frozen=True)
class ConfigDrive:
    """Rendered cloud-init inputs from the userData/networkData/metaData Secrets."""

    user_data: str | None = field(default=None, repr=False)
    network_data: dict[str, Any] | None = field(default=None, repr=False)
    meta_data: dict[str, Any] | None = None
    problem: str | None = None


@dataclass
class HostContext:
    """One reconcile's view of one host."""

    host: BareMetalHost
    calls: HostCalls
    settings: BareMetalHostSettings
    credentials: Credentials = field(default_factory=Credentials)
    profile: ProfileLookup = field(default_factory=ProfileLookup)
    config_drive: ConfigDrive = field(default_factory=ConfigDrive)
    hardware_data: HardwareDetails | None = None
    """The HardwareData of the host's name, read while it registers: hardware
    known before inspection (applied with the host, from another site)."""
    firmware: dict[str, str] | None = None
    """The values the HostFirmwareSettings of the host's name wants (None: no
    such object, no settings named, or ``Valid`` False), read while the host
    is provisioned or servicing."""
    firmware_checked: bool = True
    """False while that object's current spec is not checked against its
    schema yet (then a reboot waits)."""

    @property
    def status(self) -> BareMetalHostStatus:
        return self.host.status or BareMetalHostStatus()

    @property
    def state(self) -> ProvisioningState | None:
        prov = self.status.provisioning
        return prov.state if prov is not None else None

    @property
    def deleting(self) -> bool:
        return self.host.metadata.deletion_timestamp is not None

    @property
    def annotations(self) -> dict[str, str]:
        return self.host.metadata.annotations

    @property
    def detached(self) -> bool:
        return ann.is_detached(self.annotations)

    def poll_delay(self, result: Result) -> float:
        """When to look again at an operation in progress (never below the floor)."""
        wanted = result.requeue_after
        if wanted is None:
            wanted = self.settings.poll_default
        return max(self.settings.poll_floor, wanted)

    def redact(self, message: str) -> str:
        """``message`` without the BMC password, should a backend ever echo it."""
        bmc = self.credentials.bmc
        if bmc is not None and bmc.password:
            message = mask_values(message, (bmc.password,), "***")
        return message[:1000]
