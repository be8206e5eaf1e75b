"""An in-memory provisioning backend for the BareMetalHost controller's tests.

Owns: a fake backend that keeps the :class:`~racksmith.provisioner.base.Provisioner`
contract honestly — one record per host, long operations that take a
configurable number of calls to finish, a power state, BMCs that refuse
wrong credentials or cannot be reached, images that fail to download, an
"unavailable" switch (every call raises ``BackendUnavailable``) and counters
(deploys per host, calls per operation). Test code, kept out of the
package: the real backend is Ironic. Shared by the unit and integration
tests.

Node states follow Ironic's words: enroll → manageable → available →
deploying → active → cleaning → available; ``deploy failed`` after a bad
image.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from racksmith.kinds.firmware import AttributeType, SettingSchema, same_value
from racksmith.kinds.hardware import CPU, NIC, DiskType, HardwareDetails, Storage, SystemVendor
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

DEFAULT_STEPS = {
    "register": 1,
    "inspect": 2,
    "prepare": 1,
    "provision": 3,
    "deprovision": 2,
    "adopt": 1,
    "power": 1,
    "delete": 1,
    "detach": 1,
    "service": 2,
}

FIRMWARE_SETTINGS = {"BootMode": "Uefi", "ProcTurboMode": "Enabled", "NumCores": "16",
                     "QuietBoot": "true"}
"""Every fixture host's firmware settings before anyone changes them."""
FIRMWARE_SCHEMA = {
    "BootMode": SettingSchema(attribute_type=AttributeType.ENUMERATION,
                              allowable_values=["Bios", "Uefi"]),
    "ProcTurboMode": SettingSchema(attribute_type=AttributeType.ENUMERATION,
                                   allowable_values=["Enabled", "Disabled"]),
    "NumCores": SettingSchema(attribute_type=AttributeType.INTEGER, lower_bound=10,
                              upper_bound=20, read_only=True),
    "QuietBoot": SettingSchema(attribute_type=AttributeType.BOOLEAN),
}
"""What the fixture's firmware settings accept."""


def default_hardware(host: HostIdentity) -> HardwareDetails:
    """A small server: 2 SSDs of 480 GB, one HDD of 2 TB, 64 GiB RAM, 2 NICs."""
    return HardwareDetails(
        system_vendor=SystemVendor(manufacturer="Fixture", product_name="FX-1",
                                   serial_number=f"SN-{host.name}"),
        ram_mebibytes=65536,
        cpu=CPU(arch="x86_64", model="Fixture CPU", clock_megahertz=2400, count=16,
                flags=["pdpe1gb", "vmx"]),
        nics=[NIC(name="eno1", mac="52:54:00:00:00:01", pxe=True, speed_gbps=10),
              NIC(name="eno2", mac="52:54:00:00:00:02", speed_gbps=10)],
        storage=[
            Storage(name="/dev/sda", type=DiskType.SSD, rotational=False, size_bytes=480 * 10**9,
                    serial_number="ssd-a"),
            Storage(name="/dev/sdb", type=DiskType.SSD, rotational=False, size_bytes=480 * 10**9,
                    serial_number="ssd-b"),
            Storage(name="/dev/sdc", type=DiskType.HDD, rotational=True, size_bytes=2 * 10**12,
                    serial_number="hdd-c"),
        ],
        hostname=host.name,
    )


@dataclass
class _Operation:
    name: str
    remaining: int
    key: object = None


@dataclass
class FixtureNode:
    """The backend's record of one host."""

    node_id: str
    address: str
    username: str
    password: str = field(repr=False)
    state: str = "enroll"
    credentials_error: str | None = None
    hardware: HardwareDetails | None = None
    powered_on: bool = False
    operation: _Operation | None = None
    deploy_error: str | None = None
    deployed: ProvisionRequest | None = None
    last_request: ProvisionRequest | None = None
    firmware: dict[str, str] = field(default_factory=lambda: dict(FIRMWARE_SETTINGS))
    service_failed: dict[str, str] | None = None
    """The values of a servicing that failed (reported until others are asked)."""


class FixtureProvisioner:
    """The in-memory backend; see the module docstring.

    ``steps[op]`` is how many calls an operation takes: the first call
    starts it, the ``steps``-th call reports it done (1: done at once).
    """

    def __init__(
        self,
        *,
        steps: dict[str, int] | None = None,
        poll: float = 1.0,
        hardware: Callable[[HostIdentity], HardwareDetails] = default_hardware,
    ) -> None:
        self.steps = {**DEFAULT_STEPS, **(steps or {})}
        self.poll = poll
        self.hardware = hardware
        self.nodes: dict[str, FixtureNode] = {}
        self.unavailable = False
        self.bmc_credentials: dict[str, tuple[str, str]] = {}
        """BMC address → the only (username, password) it accepts (absent: any)."""
        self.unreachable_bmcs: set[str] = set()
        self.broken_images: set[str] = set()
        self.deploys: Counter[str] = Counter()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.history: list[tuple[str, str]] = []
        """Every call in order: (node name, operation)."""
        self.detached: Counter[str] = Counter()
        self.deleted: Counter[str] = Counter()
        self.services: Counter[str] = Counter()
        """Servicings (firmware changes) completed per node name."""
        self.refused_settings: set[str] = set()
        """Setting names a servicing fails on (the BMC does not apply them)."""
        self.without_firmware: set[str] = set()
        """Node names whose BMC has no firmware settings (as IPMI, fake BMCs)."""
        self._ids = 0

    # ----------------------------------------------------------- test helpers

    def node(self, host: HostIdentity | str) -> FixtureNode | None:
        """The record of ``host`` (or of a node name), if enrolled."""
        name = host.node_name if isinstance(host, HostIdentity) else host
        return self.nodes.get(name)

    # ------------------------------------------------------------- internals

    def _enter(self, host: HostIdentity, op: str) -> None:
        self.calls[(host.node_name, op)] += 1
        self.history.append((host.node_name, op))
        if self.unavailable:
            raise BackendUnavailable("provisioning backend unreachable (fixture switched off)")

    def _step(self, node: FixtureNode, name: str, key: object = None) -> bool:
        """Advance operation ``name``; True once it has completed."""
        op = node.operation
        if op is None or op.name != name or op.key != key:
            op = node.operation = _Operation(name, self.steps[name], key)
        op.remaining -= 1
        if op.remaining <= 0:
            node.operation = None
            return True
        return False

    def _wait(self) -> Result:
        return Result.wait(self.poll, dirty=True)

    def _registered(self, host: HostIdentity, kind: ErrorKind) -> FixtureNode | Result:
        node = self.nodes.get(host.node_name)
        if node is None:
            return Result.fail(kind, "host is not registered with the backend")
        if node.state == "enroll":
            return Result.fail(kind, "host registration has not completed")
        return node

    # -------------------------------------------------------------- contract

    async def is_ready(self) -> bool:
        return not self.unavailable

    async def register(
        self, host: HostIdentity, bmc: BMCAccess, *, credentials_changed: bool
    ) -> RegisterResult:
        self._enter(host, "register")
        node = self.nodes.get(host.node_name)
        if node is None:
            self._ids += 1
            node = FixtureNode(f"fixture-{self._ids:04d}", bmc.address, bmc.username,
                               bmc.password)
            self.nodes[host.node_name] = node
            credentials_changed = True
        if (node.address, node.username, node.password) != (
            bmc.address, bmc.username, bmc.password
        ):
            node.address, node.username, node.password = bmc.address, bmc.username, bmc.password
            credentials_changed = True
        if node.credentials_error is not None and not credentials_changed:
            return RegisterResult(Result.fail(ErrorKind.REGISTRATION, node.credentials_error),
                                  node.node_id)
        if node.state != "enroll" and not credentials_changed:
            return RegisterResult(Result.ok(), node.node_id)
        if not self._step(node, "register", (bmc.address, bmc.username)):
            return RegisterResult(self._wait(), node.node_id)
        if bmc.address in self.unreachable_bmcs:
            node.credentials_error = f"cannot reach the BMC at {bmc.address}"
        elif bmc.address in self.bmc_credentials and self.bmc_credentials[bmc.address] != (
            bmc.username, bmc.password
        ):
            node.credentials_error = f"the BMC at {bmc.address} refused the credentials"
        else:
            node.credentials_error = None
        if node.credentials_error is not None:
            node.state = "enroll"
            return RegisterResult(Result.fail(ErrorKind.REGISTRATION, node.credentials_error),
                                  node.node_id)
        if node.state == "enroll":
            node.state = "manageable"
        return RegisterResult(Result(done=True, dirty=True), node.node_id)

    async def inspect(self, host: HostIdentity, *, force: bool = False) -> InspectResult:
        self._enter(host, "inspect")
        node = self._registered(host, ErrorKind.INSPECTION)
        if isinstance(node, Result):
            return InspectResult(node)
        running = node.operation is not None and node.operation.name == "inspect"
        if node.hardware is not None and not force and not running:
            return InspectResult(Result.ok(), node.hardware, {"source": "fixture"})
        if force and not running:
            node.hardware = None
        if not self._step(node, "inspect"):
            return InspectResult(self._wait())
        node.hardware = self.hardware(host)
        return InspectResult(Result(done=True, dirty=True), node.hardware, {"source": "fixture"})

    async def prepare(self, host: HostIdentity) -> Result:
        self._enter(host, "prepare")
        node = self._registered(host, ErrorKind.PREPARATION)
        if isinstance(node, Result):
            return node
        if node.state in ("available", "active"):
            return Result.ok()
        if not self._step(node, "prepare"):
            return self._wait()
        node.state = "available"
        return Result(done=True, dirty=True)

    async def provision(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        self._enter(host, "provision")
        node = self._registered(host, ErrorKind.PROVISIONING)
        if isinstance(node, Result):
            return node
        if node.state == "active" and node.deployed == request:
            return Result.ok()
        if node.state == "deploy failed" and node.last_request == request:
            return Result.fail(ErrorKind.PROVISIONING, node.deploy_error or "deploy failed")
        if node.state == "deploying" and node.last_request == request:
            if not self._step(node, "provision", request):
                return self._wait()
            node.state, node.deployed, node.powered_on = "active", request, True
            return Result(done=True, dirty=True)
        if node.state not in ("available", "deploy failed", "deploying"):
            return Result.fail(ErrorKind.PROVISIONING,
                               f"cannot deploy a node in state {node.state}")
        node.last_request = request
        self.deploys[host.node_name] += 1
        if request.image.url in self.broken_images or not request.image.url.startswith(
            ("http://", "https://", "file://")
        ):
            node.state = "deploy failed"
            node.deploy_error = f"image download failed: {request.image.url}"
            return Result.fail(ErrorKind.PROVISIONING, node.deploy_error)
        node.state, node.operation = "deploying", None
        if not self._step(node, "provision", request):
            return self._wait()
        node.state, node.deployed, node.powered_on = "active", request, True
        return Result(done=True, dirty=True)

    async def deprovision(self, host: HostIdentity, *, clean: bool) -> Result:
        self._enter(host, "deprovision")
        node = self._registered(host, ErrorKind.PROVISIONING)
        if isinstance(node, Result):
            return node
        if node.state in ("available", "manageable"):
            return Result.ok()
        if not self._step(node, "deprovision", clean):
            node.state = "cleaning" if clean else "deleting"
            return self._wait()
        node.state, node.deployed, node.last_request = "available", None, None
        node.powered_on = False
        return Result(done=True, dirty=True)

    async def adopt(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        self._enter(host, "adopt")
        node = self._registered(host, ErrorKind.PROVISIONING)
        if isinstance(node, Result):
            return node
        if node.state == "active":
            return Result.ok()
        if not self._step(node, "adopt"):
            return self._wait()
        node.state, node.deployed = "active", request
        return Result(done=True, dirty=True)

    async def power(self, host: HostIdentity, on: bool, *, soft: bool = False) -> Result:
        self._enter(host, "power")
        node = self._registered(host, ErrorKind.POWER)
        if isinstance(node, Result):
            return node
        if node.powered_on == on:
            return Result.ok()
        if not self._step(node, "power", on):
            return self._wait()
        node.powered_on = on
        return Result(done=True, dirty=True)

    async def power_state(self, host: HostIdentity) -> bool | None:
        self._enter(host, "power_state")
        node = self.nodes.get(host.node_name)
        return None if node is None or node.state == "enroll" else node.powered_on

    async def delete(self, host: HostIdentity) -> Result:
        self._enter(host, "delete")
        node = self.nodes.get(host.node_name)
        if node is None:
            return Result.ok()
        if not self._step(node, "delete"):
            return self._wait()
        node.powered_on = False
        del self.nodes[host.node_name]
        self.deleted[host.node_name] += 1
        return Result(done=True, dirty=True)

    async def firmware(self, host: HostIdentity) -> FirmwareReading | None:
        self._enter(host, "firmware")
        node = self.nodes.get(host.node_name)
        if node is None or node.state == "enroll" or host.node_name in self.without_firmware:
            return None
        return FirmwareReading(settings=dict(node.firmware), schema=dict(FIRMWARE_SCHEMA))

    async def service_firmware(self, host: HostIdentity, settings: dict[str, str]) -> Result:
        self._enter(host, "service")
        node = self._registered(host, ErrorKind.SERVICING)
        if isinstance(node, Result):
            return node
        if node.state != "active":
            return Result.fail(ErrorKind.SERVICING,
                               f"cannot change firmware settings in state {node.state!r}")
        if node.service_failed == settings:
            return Result.fail(ErrorKind.SERVICING,
                               f"settings {sorted(node.service_failed)} were not applied")
        if all(same_value(node.firmware.get(k), v) for k, v in settings.items()):
            node.service_failed = None
            return Result.ok()
        if not self._step(node, "service", tuple(sorted(settings.items()))):
            return self._wait()
        refused = self.refused_settings & set(settings)
        if refused:
            node.service_failed = dict(settings)
            return Result.fail(ErrorKind.SERVICING, f"settings {sorted(refused)} were not applied")
        node.firmware.update(settings)
        node.service_failed = None
        self.services[host.node_name] += 1
        return Result(done=True, dirty=True)

    async def detach(self, host: HostIdentity) -> Result:
        self._enter(host, "detach")
        node = self.nodes.get(host.node_name)
        if node is None:
            return Result.ok()
        if not self._step(node, "detach"):
            return self._wait()
        del self.nodes[host.node_name]  # power untouched: the server keeps running
        self.detached[host.node_name] += 1
        return Result(done=True, dirty=True)
