"""The Provisioner interface: how the BareMetalHost controller drives servers.

Owns: the contract between the BareMetalHost controller and a provisioning
backend (Ironic in production and in the emulated datacenter; an in-memory
fixture for unit tests). It takes and returns plain data — no Ironic,
Redfish or Kubernetes types cross it — and every vendor state or error is
translated at the backend's edge.

Every operation is **level-based and idempotent**: it may be called
repeatedly (after a crash, on every reconcile) and looks at the backend's
current state to decide what, if anything, to do next. It never blocks
waiting for a long operation: it starts it (once) and returns
``Result(done=False, requeue_after=…)``; a later call reports progress or
completion. A backend never starts the same long operation twice for the
same request (e.g. exactly one deploy per provision request).

Errors the operator must see come back as ``Result.error`` (a message that
never contains credentials) with an :class:`ErrorKind`; exceptions are for
the backend being unreachable (:class:`BackendUnavailable`) or bugs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from racksmith.kinds.firmware import SettingSchema
from racksmith.kinds.hardware import HardwareDetails


class ErrorKind(StrEnum):
    """What failed, in BareMetalHost ``errorType`` terms."""

    REGISTRATION = "registration error"
    """The BMC could not be reached or the credentials were refused."""
    INSPECTION = "inspection error"
    """Hardware inspection failed."""
    PREPARATION = "preparation error"
    """RAID/firmware preparation failed."""
    PROVISIONING = "provisioning error"
    """Deploying (or undeploying) the image failed."""
    POWER = "power management error"
    """A power change failed."""
    DETACH = "detach error"
    """The host could not be detached from the backend."""
    SERVICING = "servicing error"
    """Changing a provisioned host's firmware settings failed."""


@dataclass(frozen=True)
class HostIdentity:
    """Which host: stable across restarts (namespace, name, uid)."""

    namespace: str
    name: str
    uid: str

    @property
    def node_name(self) -> str:
        """The backend's name for the host (Ironic node names allow '~')."""
        return f"{self.namespace}~{self.name}"


@dataclass(frozen=True)
class BMCAccess:
    """How to reach the BMC. ``password`` is secret: never log or echo it."""

    address: str
    username: str
    password: str = field(repr=False)
    disable_certificate_verification: bool = False
    boot_mac_address: str | None = None
    boot_mode: str = "UEFI"
    inspection: str = ""
    """``spec.inspectionMode``: ``agent`` boots the ramdisk to inspect even
    where the BMC could tell out-of-band (Redfish); ``""`` or ``fast``: the
    backend's default for the BMC (out-of-band for Redfish)."""


@dataclass(frozen=True)
class ImageSpec:
    url: str
    checksum: str | None = None
    checksum_type: str | None = None
    disk_format: str | None = None


@dataclass(frozen=True)
class ProvisionRequest:
    """Everything a deploy needs. ``user_data``/``network_data``/``meta_data``
    are the rendered config drive contents (may hold secrets: never log)."""

    image: ImageSpec
    user_data: str | None = field(default=None, repr=False)
    network_data: dict[str, Any] | None = field(default=None, repr=False)
    meta_data: dict[str, Any] | None = None
    root_device_hints: dict[str, Any] | None = None
    boot_mode: str = "UEFI"


@dataclass(frozen=True)
class Result:
    """The outcome of one call."""

    done: bool = False
    """The requested state is reached."""
    requeue_after: float | None = None
    """Call again after this many seconds (progress is being made)."""
    error: str | None = None
    """A failure the operator must see (no secrets in it)."""
    error_kind: ErrorKind | None = None
    dirty: bool = False
    """The backend's state changed during this call (for status/events)."""

    @staticmethod
    def ok() -> Result:
        return Result(done=True)

    @staticmethod
    def wait(seconds: float, *, dirty: bool = False) -> Result:
        return Result(requeue_after=seconds, dirty=dirty)

    @staticmethod
    def fail(kind: ErrorKind, message: str) -> Result:
        return Result(error=message, error_kind=kind)


@dataclass(frozen=True)
class RegisterResult:
    result: Result
    provisioner_id: str | None = None
    """The backend's id for the host (Ironic node UUID)."""


@dataclass(frozen=True)
class InspectResult:
    result: Result
    hardware: HardwareDetails | None = None
    """Set once inspection completed."""
    raw_inventory: dict[str, Any] | None = None
    """The backend's full inventory, for BareMetalHostInventory."""


@dataclass(frozen=True)
class FirmwareReading:
    """A host's firmware (BIOS) settings as the backend last read them."""

    settings: dict[str, str]
    """Current values by setting name."""
    schema: dict[str, SettingSchema]
    """What each setting accepts (empty where the BMC has no registry)."""


class BackendUnavailable(Exception):
    """The backend cannot be reached (retry later; never a host error)."""


class Provisioner(Protocol):
    """A provisioning backend. See the module docstring for the contract."""

    async def is_ready(self) -> bool:
        """The backend answers and can take work."""

    async def register(self, host: HostIdentity, bmc: BMCAccess, *,
                       credentials_changed: bool) -> RegisterResult:
        """Enrol the host (create the node if missing, update its BMC
        details if they changed) and check BMC access. done = the backend can
        manage the host. Wrong credentials → error (REGISTRATION); called
        again with ``credentials_changed`` after the Secret changed, it
        retries with the new ones."""

    async def inspect(self, host: HostIdentity, *, force: bool = False) -> InspectResult:
        """Inspect the hardware once (``force``: again). done = hardware set."""

    async def prepare(self, host: HostIdentity) -> Result:
        """Make the host available for provisioning (clean as configured)."""

    async def provision(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        """Deploy the image (exactly one deploy per request). done = active."""

    async def deprovision(self, host: HostIdentity, *, clean: bool) -> Result:
        """Undeploy (and clean metadata if ``clean``). done = available again."""

    async def adopt(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        """Take over an externally provisioned host without touching its disk."""

    async def power(self, host: HostIdentity, on: bool, *, soft: bool = False) -> Result:
        """Power on/off. done = the BMC reports the requested state.
        ``soft``: power off through the operating system (ACPI), as
        ``reboot.metal3.io`` ``{"mode": "soft"}`` asks."""

    async def power_state(self, host: HostIdentity) -> bool | None:
        """True/False from the BMC; None if unknown."""

    async def delete(self, host: HostIdentity) -> Result:
        """Remove the host from the backend (powering it off first).
        done = gone (also when it was never there)."""

    async def firmware(self, host: HostIdentity) -> FirmwareReading | None:
        """The host's firmware settings; None when it has none (not registered,
        or a BMC without settings)."""

    async def service_firmware(self, host: HostIdentity, settings: dict[str, str]) -> Result:
        """Give a provisioned host these firmware values without deprovisioning
        it (done at once when it has them already). The backend reboots the
        host to apply them. A failed change is reported until it is asked
        for different values (an edit, or going back to the old ones)."""

    async def detach(self, host: HostIdentity) -> Result:
        """Stop managing the host without touching the server (node removed
        from the backend, power untouched). done = detached."""


@runtime_checkable
class HostChanges(Protocol):
    """Optional for a backend: it can say which hosts changed on its side
    (the BareMetalHost controller then queues them, the way an informer
    queues a changed object, instead of waiting for each host's poll)."""

    def host_changes(self) -> AsyncIterator[tuple[str, str]]:
        """(namespace, name) of each host whose backend state changed, as it
        is seen; runs until cancelled. A hint, never state: the controller
        reconciles the host, which reads what it needs."""
        ...
