"""Racksmith's ``racksmith-fake`` hardware type for Ironic: instant BMCs.

Owns the Ironic side of ``racksmith up --emulate-hosts N --hardware fake``:
an out-of-tree hardware type (Ironic's documented extension point, loaded
through the ``ironic.hardware.*`` entry points) whose power, management
and boot interfaces talk to the virtual datacenter's fake BMC
(``racksmith/emulator/fakebmc.py``) over a small JSON API on 127.0.0.1,
instead of Redfish and virtual-media ISOs:

- power: ``GET``/``POST {base}/power`` (On, ForceOff, GracefulShutdown,
  ForceRestart, GracefulRestart); a reboot of a powered-off host powers it
  on, as Ironic's Redfish driver does;
- management: boot device (``PUT {base}/boot``: Hdd, Cd, Pxe, once or
  persistent), the NIC MACs for port pre-creation before inspection, UEFI
  as the only boot mode;
- boot: the ramdisk "boots from virtual media" (``PUT {base}/media``), the
  instance from disk.

Everything else is Ironic's own: fake-hardware's defaults plus the real
``direct`` deploy and ``agent`` inspection, so the ramdisk agent protocol
(lookup, heartbeats, write_image with the config drive, the inspection
callback) runs exactly as with Redfish hosts. What is gone is what a test
of the layers above provisioning does not need: Redfish sessions (Ironic
39 derives a PBKDF2 key with 600,000 rounds on every Redfish call, ~0.4 s
of CPU each) and virtual-media ISO publishing.

``driver_info``: ``fake_bmc_address`` (``http://127.0.0.1:PORT/systems/UUID``),
``fake_bmc_username``, ``fake_bmc_password`` (masked by Ironic like every
``*password`` field; sent as HTTP basic auth). Errors never quote them.

Installed into Ironic's own virtual env by the Makefile; imports only
Ironic and the standard library.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

from ironic.common import boot_devices, boot_modes, exception, states
from ironic.conductor import utils as manager_utils
from ironic.drivers import base, fake_hardware
from ironic.drivers import utils as driver_utils

PROPERTIES = {
    "fake_bmc_address": "URL of the system on the fake BMC "
                        "(http://127.0.0.1:PORT/systems/UUID). Required.",
    "fake_bmc_username": "BMC user name. Optional.",
    "fake_bmc_password": "BMC password. Optional.",
}
TIMEOUT = 10.0
"""Seconds per BMC call: the BMC answers from memory, on loopback."""

_DEVICES = {boot_devices.DISK: "Hdd", boot_devices.CDROM: "Cd", boot_devices.PXE: "Pxe"}
_DEVICES_BACK = {v: k for k, v in _DEVICES.items()}
_ACTIONS = {
    states.POWER_ON: "On",
    states.POWER_OFF: "ForceOff",
    states.SOFT_POWER_OFF: "GracefulShutdown",
    states.REBOOT: "ForceRestart",
    states.SOFT_REBOOT: "GracefulRestart",
}


class FakeBMCError(exception.IronicException):
    _msg_fmt = "Fake BMC of node %(node)s: %(error)s"


def _address(node: Any) -> str:
    address = (node.driver_info or {}).get("fake_bmc_address")
    if not address:
        raise exception.MissingParameterValue(
            f"Node {node.uuid} is missing driver_info fake_bmc_address")
    if not str(address).startswith(("http://", "https://")):
        raise exception.InvalidParameterValue(
            f"fake_bmc_address of node {node.uuid} must be an http(s) URL")
    return str(address).rstrip("/")


def _call(node: Any, method: str, path: str = "", body: Any = None) -> Any:
    """One BMC request; raises FakeBMCError (never quoting credentials)."""
    info = node.driver_info or {}
    user = str(info.get("fake_bmc_username") or "")
    password = str(info.get("fake_bmc_password") or "")
    headers = {"Accept": "application/json"}
    if user or password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(_address(node) + path, data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise FakeBMCError(node=node.uuid, error="the BMC refused the credentials "
                                                     "(HTTP 401)") from None
        raise FakeBMCError(node=node.uuid, error="HTTP {} on {} {}".format(
            exc.code, method, path or "/")) from None
    except (OSError, ValueError) as exc:
        raise FakeBMCError(node=node.uuid,
                           error=f"cannot reach the BMC: {type(exc).__name__}") from None
    return json.loads(payload) if payload else None


class FakeBMCPower(base.PowerInterface):
    """Power through the fake BMC; changes apply at once."""

    def get_properties(self) -> dict[str, str]:
        return PROPERTIES

    def validate(self, task: Any) -> None:
        _address(task.node)

    def get_power_state(self, task: Any) -> str:
        system = _call(task.node, "GET")
        return states.POWER_ON if system.get("power_state") == "On" else states.POWER_OFF

    def set_power_state(self, task: Any, power_state: str, timeout: Any = None) -> None:
        action = _ACTIONS.get(power_state)
        if action is None:
            raise exception.InvalidParameterValue(
                f"set_power_state called with an invalid power state: {power_state}")
        _call(task.node, "POST", "/power", {"action": action})

    def reboot(self, task: Any, timeout: Any = None) -> None:
        if self.get_power_state(task) == states.POWER_ON:
            _call(task.node, "POST", "/power", {"action": "ForceRestart"})
        else:
            _call(task.node, "POST", "/power", {"action": "On"})

    def get_supported_power_states(self, task: Any) -> list[str]:
        return [states.POWER_ON, states.POWER_OFF, states.REBOOT,
                states.SOFT_REBOOT, states.SOFT_POWER_OFF]


class FakeBMCManagement(base.ManagementInterface):
    """Boot device, boot mode and NIC MACs through the fake BMC."""

    def get_properties(self) -> dict[str, str]:
        return PROPERTIES

    def validate(self, task: Any) -> None:
        _address(task.node)

    def get_supported_boot_devices(self, task: Any) -> list[str]:
        return list(_DEVICES)

    def set_boot_device(self, task: Any, device: str, persistent: bool = False) -> None:
        if device not in _DEVICES:
            raise exception.InvalidParameterValue(
                f"Invalid boot device {device} specified")
        _call(task.node, "PUT", "/boot", {"device": _DEVICES[device],
                                          "persistent": bool(persistent)})

    def get_boot_device(self, task: Any) -> dict[str, Any]:
        system = _call(task.node, "GET")
        return {"boot_device": _DEVICES_BACK.get(system.get("boot_device")),
                "persistent": system.get("boot_persistent")}

    def get_supported_boot_modes(self, task: Any) -> list[str]:
        return [boot_modes.UEFI]

    def get_boot_mode(self, task: Any) -> str:
        return boot_modes.UEFI

    def set_boot_mode(self, task: Any, mode: str) -> None:
        if mode != boot_modes.UEFI:
            raise exception.InvalidParameterValue(
                f"The fake BMC of node {task.node.uuid} only boots in UEFI mode")

    def get_sensors_data(self, task: Any) -> dict[str, Any]:
        return {}

    def get_mac_addresses(self, task: Any) -> list[str]:
        system = _call(task.node, "GET")
        return [str(mac) for mac in system.get("macs") or []]


class FakeBMCBoot(base.BootInterface):
    """The ramdisk boots from the BMC's virtual media, the instance from disk."""

    capabilities: list[str] = []

    def get_properties(self) -> dict[str, str]:
        return PROPERTIES

    def validate(self, task: Any) -> None:
        _address(task.node)

    def validate_inspection(self, task: Any) -> None:
        _address(task.node)

    def prepare_ramdisk(self, task: Any, ramdisk_params: Any) -> None:
        if not driver_utils.need_prepare_ramdisk(task.node):
            return
        manager_utils.node_power_action(task, states.POWER_OFF)
        _call(task.node, "PUT", "/media", {"inserted": True})
        manager_utils.node_set_boot_device(task, boot_devices.CDROM, persistent=False)

    def clean_up_ramdisk(self, task: Any) -> None:
        _call(task.node, "PUT", "/media", {"inserted": False})

    def prepare_instance(self, task: Any) -> None:
        _call(task.node, "PUT", "/media", {"inserted": False})
        manager_utils.node_set_boot_device(task, boot_devices.DISK, persistent=True)

    def clean_up_instance(self, task: Any) -> None:
        _call(task.node, "PUT", "/media", {"inserted": False})


class FakeBMCHardware(fake_hardware.FakeHardware):
    """fake-hardware whose power, management and boot reach the fake BMC."""

    @property
    def supported_boot_interfaces(self) -> list[Any]:
        return [FakeBMCBoot, *super().supported_boot_interfaces]

    @property
    def supported_management_interfaces(self) -> list[Any]:
        return [FakeBMCManagement, *super().supported_management_interfaces]

    @property
    def supported_power_interfaces(self) -> list[Any]:
        return [FakeBMCPower, *super().supported_power_interfaces]
