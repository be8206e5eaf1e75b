"""sushy-tools extensions that turn its fake driver into convincing servers.

Runs inside Ironic's virtualenv (sushy-tools lives only there), so it may
import only the standard library and ``sushy_tools``. Owns:

* :class:`InventoryFakeDriver` — the fake systems driver plus each host's
  declared hardware (processors, memory, simple storage, NICs, BIOS) and a
  configurable power-change delay instead of the stock random 1-11 s;
* :func:`storage_config` — static Storage/Drive entries for sushy-tools'
  storage drivers;
* :class:`PerSystemAuth` — HTTP basic auth where each system accepts only
  its own BMC credentials (salted PBKDF2 hashes, file re-read when it
  changes, so passwords can be rotated while running);
* :func:`enrich_response` — adds vendor, model, serials, speeds and WWNs to
  the stock JSON templates, which hard-code placeholders.

The host records are the plain dicts written by ``racksmith.emulator.redfish``
(the ``inventory`` of ``racksmith.emulator.inventory.to_dict``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import re
import threading
import time
from typing import Any

from sushy_tools import error
from sushy_tools.emulator.resources.systems import fakedriver

from racksmith.emulator.bmc_credentials import hash_password


def _inventory(system: dict[str, Any]) -> dict[str, Any]:
    inv = system.get("racksmith_inventory")
    if not inv:
        raise error.NotSupportedError("no inventory declared for this system")
    return dict(inv)


class InventoryFakeDriver(fakedriver.FakeDriver):  # type: ignore[misc]
    """The fake driver serving each system's declared inventory."""

    @property
    def driver(self) -> str:
        return "<racksmith-fake>"

    def _inv(self, identity: str) -> dict[str, Any]:
        return _inventory(self._get(identity))

    def _send_external_notification(self, system: dict[str, Any]) -> None:
        # Stock behaviour lets a dead listener fail the BMC request itself
        # (a power action would answer 500); a real BMC does not care.
        try:
            super()._send_external_notification(system)
        except Exception as exc:
            self._logger.warning("external notification failed: %s", exc)

    def set_power_state(self, identity: str, state: str) -> None:
        delay = float(self._config.get("RACKSMITH_POWER_DELAY", 0.0))
        system = self._get(identity)
        if "On" in state:
            target = "On"
        elif state in ("ForceOff", "GracefulShutdown"):
            target = "Off"
        elif "Restart" in state:
            target = "Restart"
        else:
            raise error.NotSupportedError(f"Power state {state} is not supported")
        if target == "Restart":
            # Power cycle: the agent sees Off, then On (now or after the delay).
            self._update(system, power_state="Off", pending_power=None)
            target = "On"
        if system["power_state"] == target and not system.get("pending_power"):
            return
        if delay <= 0:
            self._update(system, power_state=target, pending_power=None)
        else:
            self._update(
                system,
                pending_power={"power_state": target, "apply_time": time.time() + delay},
            )

    def get_total_memory(self, identity: str) -> int:
        return int(self._inv(identity)["memory_mib"]) // 1024

    def get_total_cpus(self, identity: str) -> int:
        cpu = self._inv(identity)["cpu"]
        return int(cpu["sockets"] * cpu["cores_per_socket"] * cpu["threads_per_core"])

    def get_processors(self, identity: str) -> list[dict[str, Any]]:
        cpu = self._inv(identity)["cpu"]
        return [
            {
                "id": f"CPU{i}",
                "Id": f"CPU{i}",
                "socket": f"CPU {i + 1}",
                "vendor": cpu["vendor"],
                "model": cpu["model"],
                "cores": cpu["cores_per_socket"],
                "threads": cpu["cores_per_socket"] * cpu["threads_per_core"],
            }
            for i in range(cpu["sockets"])
        ]

    def get_simple_storage_collection(self, identity: str) -> dict[str, Any]:
        disks = self._inv(identity)["disks"]
        return {
            "1": {
                "Id": "1",
                "Name": "Storage",
                "DeviceList": [
                    {"Name": d["name"].rsplit("/", 1)[-1], "CapacityBytes": d["size_bytes"]}
                    for d in disks
                ],
            }
        }

    def get_nics(self, identity: str) -> list[dict[str, str]]:
        system = self._get(identity)
        return [{"id": nic["mac"], "mac": nic["mac"]} for nic in system["nics"]]

    def get_versions(self, identity: str) -> dict[str, str]:
        return {"BiosVersion": str(self._inv(identity)["system"]["bios_version"])}

    def get_bios(self, identity: str) -> dict[str, Any]:
        system = self._get(identity)
        default = {"BootMode": "Uefi", "ProcTurboMode": "Enabled"}
        return dict(system.get("bios_attributes") or default)

    def set_bios(self, identity: str, attributes: dict[str, Any]) -> None:
        system = self._get(identity)
        merged = dict(system.get("bios_attributes") or self.get_bios(identity))
        merged.update(attributes)
        self._update(system, bios_attributes=merged)

    def reset_bios(self, identity: str) -> None:
        self._update(identity, bios_attributes=None)


def storage_config(
    systems: list[dict[str, Any]],
) -> tuple[dict[str, Any], dict[Any, Any], dict[Any, Any]]:
    """``SUSHY_EMULATOR_STORAGE``, ``_DRIVES`` and ``_VOLUMES`` for the systems.

    Every controller gets an empty volume list: without one sushy-tools
    answers 500 on ``Volumes`` and Ironic's inspection retries for a minute.
    """
    storage: dict[str, Any] = {}
    drives: dict[Any, Any] = {}
    volumes: dict[Any, Any] = {}
    for system in systems:
        disks = system["racksmith_inventory"]["disks"]
        ids = [d["name"].rsplit("/", 1)[-1] for d in disks]
        storage[system["uuid"]] = [
            {
                "Id": "1",
                "Name": "Local Storage Controller",
                "StorageControllers": [{"MemberId": "0", "Name": "Controller 0", "SpeedGbps": 12}],
                "Drives": ids,
            }
        ]
        volumes[(system["uuid"], "1")] = []
        drives[(system["uuid"], "1")] = [
            {
                "Id": ident,
                "Name": d["name"],
                "CapacityBytes": d["size_bytes"],
                "Protocol": "NVMe" if d["kind"] == "nvme" else "SATA",
            }
            for ident, d in zip(ids, disks, strict=True)
        ]
    return storage, drives, volumes


# --- response enrichment ------------------------------------------------------

_SYSTEM_PATH = re.compile(r"^/redfish/v1/Systems/([^/]+)(/.*)?$")


_MANAGER_PATH = re.compile(r"^/redfish/v1/Managers/[^/]+$")
BMC_FIRMWARE_VERSION = "6.10.30.00"


def enrich_response(path: str, body: dict[str, Any], systems: dict[str, dict[str, Any]]) -> bool:
    """Add declared vendor details to a rendered resource; True if changed."""
    if _MANAGER_PATH.match(path.rstrip("/")):
        # sushy-tools reports every BMC as firmware "1.00"; Ironic refuses
        # virtual media on a Dell whose iDRAC is not 6.x/7.x, so report a
        # current iDRAC9 firmware (harmless for the other vendors).
        body["FirmwareVersion"] = BMC_FIRMWARE_VERSION
        return True
    m = _SYSTEM_PATH.match(path.rstrip("/"))
    if not m:
        return False
    system = systems.get(m.group(1))
    if system is None:
        return False
    inv = system["racksmith_inventory"]
    sub = (m.group(2) or "").strip("/").split("/")
    if sub == [""]:
        vendor = inv["system"]
        body["Manufacturer"] = vendor["manufacturer"]
        body["Model"] = vendor["product"]
        body["SerialNumber"] = vendor["serial"]
        body["BiosVersion"] = vendor["bios_version"]
        body.setdefault("MemorySummary", {})["TotalSystemMemoryGiB"] = inv["memory_mib"] // 1024
        return True
    if sub[0] == "Processors" and len(sub) == 2:
        cpu = inv["cpu"]
        body["MaxSpeedMHz"] = cpu["frequency_mhz"]
        body["ProcessorArchitecture"] = "x86"
        body["InstructionSet"] = "x86-64"
        return True
    if sub[0] == "Storage" and len(sub) == 4 and sub[2] == "Drives":
        for disk in inv["disks"]:
            if disk["name"].rsplit("/", 1)[-1] == sub[3]:
                body["Manufacturer"] = disk["vendor"]
                body["Model"] = disk["model"]
                body["SerialNumber"] = disk["serial"]
                body["MediaType"] = "HDD" if disk["kind"] == "hdd" else "SSD"
                body["Protocol"] = "NVMe" if disk["kind"] == "nvme" else "SATA"
                body["Identifiers"] = [
                    {"DurableNameFormat": "NAA" if disk["kind"] != "nvme" else "EUI",
                     "DurableName": disk["wwn"]}
                ]
                if disk["kind"] != "hdd":
                    body.pop("RotationSpeedRPM", None)
                return True
        return False
    if sub[0] == "EthernetInterfaces" and len(sub) == 2:
        for nic in inv["nics"]:
            if nic["mac"] == sub[1]:
                body["Name"] = nic["name"]
                body["SpeedMbps"] = nic["speed_mbps"]
                body["LinkStatus"] = "LinkUp"
                return True
    return False


def memory_collection(identity: str, inv: dict[str, Any]) -> dict[str, Any]:
    """A Memory collection: the declared RAM split into equal DIMMs."""
    return {
        "@odata.type": "#MemoryCollection.MemoryCollection",
        "Name": "Memory Module Collection",
        "Members@odata.count": len(_dimms(inv)),
        "Members": [
            {"@odata.id": f"/redfish/v1/Systems/{identity}/Memory/{d}"} for d in _dimms(inv)
        ],
        "@odata.id": f"/redfish/v1/Systems/{identity}/Memory",
    }


def memory_module(identity: str, inv: dict[str, Any], dimm: str) -> dict[str, Any] | None:
    """One DIMM of :func:`memory_collection`, or None."""
    dimms = _dimms(inv)
    if dimm not in dimms:
        return None
    return {
        "@odata.type": "#Memory.v1_7_0.Memory",
        "Id": dimm,
        "Name": f"DIMM {dimm}",
        "MemoryDeviceType": "DDR4",
        "CapacityMiB": inv["memory_mib"] // len(dimms),
        "OperatingSpeedMhz": 2933,
        "Status": {"State": "Enabled", "Health": "OK"},
        "@odata.id": f"/redfish/v1/Systems/{identity}/Memory/{dimm}",
    }


def _dimms(inv: dict[str, Any]) -> list[str]:
    gib = inv["memory_mib"] // 1024
    count = 8 if gib % 8 == 0 and gib >= 64 else 4 if gib % 4 == 0 else 1
    return [f"DIMM{i}" for i in range(count)]


# --- authentication -----------------------------------------------------------


class PerSystemAuth:
    """WSGI middleware: HTTP basic auth with per-system credentials.

    The credentials file maps system UUID → ``{username, salt, hash}``. A
    request whose path names a system (``/Systems/<uuid>``, ``/Managers/<uuid>``)
    must carry that system's credentials; other paths (collections, chassis)
    accept any system's. The service root stays open, as on real BMCs.
    """

    _OPEN = frozenset(["", "redfish", "redfish/v1"])

    def __init__(self, app: Any, credentials_file: str) -> None:
        self.app = app
        self.credentials_file = credentials_file
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] = (-1, -1)
        self._creds: dict[str, dict[str, str]] = {}

    def _load(self) -> dict[str, dict[str, str]]:
        with self._lock:
            st = os.stat(self.credentials_file)
            stamp = (st.st_ino, st.st_mtime_ns)
            if stamp != self._stamp:
                with open(self.credentials_file, encoding="utf-8") as f:
                    self._creds = json.load(f)
                self._stamp = stamp
            return self._creds

    def _valid(self, entry: dict[str, str], user: str, password: str) -> bool:
        if not hmac.compare_digest(entry["username"], user):
            return False
        digest = hash_password(password, bytes.fromhex(entry["salt"]))
        return hmac.compare_digest(digest, entry["hash"])

    def _authorized(self, path: str, header: str) -> bool:
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        creds = self._load()
        parts = path.strip("/").split("/")
        named = [p for p in parts if p in creds]
        if named:
            return all(self._valid(creds[p], user, password) for p in named)
        return any(self._valid(entry, user, password) for entry in creds.values())

    def __call__(self, env: dict[str, Any], start_response: Any) -> Any:
        path = env.get("PATH_INFO", "")
        if path.strip("/") in self._OPEN:
            return self.app(env, start_response)
        if self._authorized(path, env.get("HTTP_AUTHORIZATION", "")):
            return self.app(env, start_response)
        body = json.dumps(
            {"error": {"code": "Base.1.0.InsufficientPrivilege", "message": "Unauthorized"}}
        ).encode()
        start_response(
            "401 Unauthorized",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("WWW-Authenticate", 'Basic realm="racksmith-bmc"'),
            ],
        )
        return [body]
