"""The virtual datacenter: N emulated servers behind Redfish or fake BMCs.

Owns the composition of the emulator: the host records (``inventory``), the
image server (which also serves Ironic's ``[deploy]http_root``), the emulated
ramdisk agent and the BMCs — the sushy-tools Redfish emulator
(``hardware="redfish"``, the default) or the instant fake BMCs
(``hardware="fake"``, :mod:`racksmith.emulator.fakebmc`, driven by Ironic's
``racksmith-fake`` hardware type) — started and stopped together, plus
the manifest ``DATA/emulated-hosts.yaml`` (a Secret and a BareMetalHost per
host, ready for ``kubectl apply``). Called by the app's composition root
(``racksmith up --emulate-hosts N``) and by the tests.

Layout under ``data_dir``::

    emulated-hosts.yaml
    emulator/http/            served at http_url (Ironic's http_root)
    emulator/http/images/     deploy.iso, sample-os.img(.sha256sum)
    emulator/hosts/<host>/disks/<disk>.img
    emulator/hosts/<host>/root/    the installed OS's files (``osboot``)
    emulator/redfish/         sushy-tools config, state, log (redfish)
    emulator/fakebmc/         the fake BMCs' state (fake)
    emulator/bmc-passwords.json   current BMC passwords (0600)

Every directory here is 0700 and every file 0600 (``racksmith.filemodes``)
except inside ``emulator/hosts/<host>/root/``, which has a real host's
modes; the BMC passwords are registered with ``racksmith.redact``.

Listening sockets (``listeners``): bound at construction — by this process
(any free port) or by ``racksmith up``, which passes them to the
``racksmith emulator`` child — so URLs are known right after construction
(Ironic's settings need ``http_url`` before anything starts) and no port is
ever free between being chosen and being served. ``ports`` instead
describes a datacenter that another process runs (URLs and manifest only;
nothing is bound). Names: ``agent``, ``http``, ``bmc`` (``listeners``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import aiohttp
import structlog
import yaml

from racksmith.emulator.agent import AgentServer, AgentSettings
from racksmith.emulator.disks import DiskStore
from racksmith.emulator.fakebmc import FakeBMC, PowerAction
from racksmith.emulator.images import SAMPLE_IMAGE, ImageServer, PublishedImage
from racksmith.emulator.inventory import DiskInfo, EmulatedHost, generate_hosts
from racksmith.emulator.listeners import Listeners
from racksmith.emulator.osboot import OSBoot
from racksmith.emulator.redfish import RedfishEmulator
from racksmith.filemodes import private_dir, write_private
from racksmith.loopback import LoopbackMap
from racksmith.redact import register_secret

log = structlog.get_logger("racksmith.emulator.datacenter")

BMH_API_VERSION = "metal3.io/v1alpha1"
RACK_LABEL = "metal.racksmith.io/rack"
VENDOR_LABEL = "metal.racksmith.io/vendor"
EMULATED_LABEL = "metal.racksmith.io/emulated"
HARDWARE_KINDS = ("redfish", "fake")
"""``redfish``: sushy-tools BMCs, virtual media, Ironic's redfish driver.
``fake``: instant fake BMCs behind Ironic's ``racksmith-fake`` hardware type."""


def label_value(text: str) -> str:
    """``text`` as a valid Kubernetes label value (e.g. ``Dell-Inc``)."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return value[:63].rstrip("-._")


class VirtualDatacenter:
    """``count`` emulated hosts, their BMCs, ramdisk agent and image server.

    ``await start()`` … ``await stop()``; both idempotent, ``stop`` safe
    after a failed ``start``. ``ironic_url`` is only used once hosts boot.
    """

    def __init__(
        self,
        data_dir: Path,
        count: int,
        ironic_url: str,
        *,
        seed: int = 0,
        prefix: str = "host",
        namespace: str = "default",
        racks: int = 4,
        listeners: Listeners | None = None,
        ports: dict[str, int] | None = None,
        power_delay: float = 0.0,
        heartbeat_interval: float = 1.0,
        boot_delay: float = 0.3,
        inspect_on_boot: bool = True,
        sushy_python: Path | None = None,
        hardware: str = "redfish",
    ) -> None:
        if hardware not in HARDWARE_KINDS:
            raise ValueError(f"hardware must be one of {', '.join(HARDWARE_KINDS)}")
        self.hardware = hardware
        self.data_dir = Path(data_dir)
        self.root = self.data_dir / "emulator"
        self.namespace = namespace
        self.hosts: list[EmulatedHost] = generate_hosts(
            count, seed=seed, prefix=prefix, racks=racks
        )
        self._by_name = {h.name: h for h in self.hosts}
        self._passwords_file = self.root / "bmc-passwords.json"
        self._passwords = {h.name: h.bmc_password for h in self.hosts}
        self._passwords.update(self._load_passwords())
        for password in (*self._passwords.values(), *(h.bmc_password for h in self.hosts)):
            register_secret(password)  # never in a log line (racksmith.redact)
        self.disks = DiskStore(self.root / "hosts")
        self.network = LoopbackMap(self.root / "network.json")
        self.os_boot = OSBoot(self.disks, network_file=self.network.path)
        if listeners is None and ports is None:
            listeners = Listeners.bind()
        socks = dict(listeners.sockets) if listeners is not None else {}
        ports = ports or {}
        self.images = ImageServer(self.root / "http", ports.get("http", 0), sock=socks.get("http"))
        self.agent = AgentServer(
            self.hosts,
            self.disks,
            AgentSettings(
                ironic_url=ironic_url,
                heartbeat_interval=heartbeat_interval,
                boot_delay=boot_delay,
                inspect_on_boot=inspect_on_boot,
            ),
            power_off=self._power_off,
            port=ports.get("agent", 0),
            os_boot=self.os_boot,
            sock=socks.get("agent"),
        )
        self.redfish: RedfishEmulator | None = None
        self.fakebmc: FakeBMC | None = None
        if hardware == "fake":
            self.fakebmc = FakeBMC(self.root / "fakebmc", ports.get("bmc", 0), self.hosts,
                                   self.password, self.agent.on_system_change,
                                   sock=socks.get("bmc"))
        else:
            self.redfish = RedfishEmulator(
                self.root / "redfish",
                ports.get("bmc", 0),
                self.hosts,
                notify_url=self.agent.notify_url,
                power_delay=power_delay,
                python=sushy_python,
                sock=socks.get("bmc"),
            )
        self._session: aiohttp.ClientSession | None = None

    # --- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Create disks and the manifest; start images, agent and BMCs."""
        private_dir(self.root)
        private_dir(self.disks.hosts_dir)
        for host in self.hosts:
            # 0700: the host's OS root below reproduces a real host's modes.
            private_dir(self.disks.hosts_dir / host.name)
            self.disks.ensure(host)
        self.write_manifest()
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15))
        try:
            await self.images.start()
            await self.agent.start()
            if self.fakebmc is not None:
                await self.fakebmc.start()
            if self.redfish is not None:
                await self.redfish.start()
            await self._resume()
        except BaseException:
            await self.stop()
            raise
        log.info(
            "virtual datacenter started",
            hosts=len(self.hosts),
            hardware=self.hardware,
            bmc=self.bmc_url,
            agent=self.agent.url,
            http=self.images.url,
        )

    async def stop(self) -> None:
        """Stop the BMCs, the agent (and the hosts' OS processes) and the
        image server."""
        if self.redfish is not None:
            await self.redfish.stop()
        if self.fakebmc is not None:
            await self.fakebmc.stop()
        await self.agent.stop()
        await self.images.stop()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # --- what callers need ------------------------------------------------

    def set_ironic_url(self, url: str) -> None:
        """Where the ramdisks call Ironic, when it is known only after the
        datacenter was built (Ironic needs ``http_url`` first)."""
        self.agent.ironic_url = url

    @property
    def bmc_url(self) -> str:
        """Base URL of the BMCs (Redfish service or fake BMC API)."""
        if self.fakebmc is not None:
            return self.fakebmc.url
        assert self.redfish is not None
        return self.redfish.url

    @property
    def bmc_port(self) -> int:
        return int(self.bmc_url.rsplit(":", 1)[1])

    @property
    def http_url(self) -> str:
        """Base URL of the static server: Ironic's ``[deploy]http_url``."""
        return self.images.url

    @property
    def http_root(self) -> Path:
        """Directory served at ``http_url``: Ironic's ``[deploy]http_root``."""
        return self.images.root

    @property
    def deploy_iso_url(self) -> str:
        """The ramdisk ISO for ``driver_info.deploy_iso``."""
        return self.images.deploy_iso_url

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "emulated-hosts.yaml"

    def host(self, name: str) -> EmulatedHost:
        """The host called ``name`` (KeyError if none)."""
        return self._by_name[name]

    def image_url(self, name: str) -> str:
        """URL of ``images/<name>`` on the image server."""
        return self.images.image_url(name)

    def sample_image(self) -> PublishedImage:
        """The sample OS image (URL, sha256, size); available after ``start``."""
        return self.images.describe(SAMPLE_IMAGE)

    def disk_path(self, host: EmulatedHost | str, disk: DiskInfo | str) -> Path:
        """The file backing a host's disk (``sda``, ``/dev/sda`` or a DiskInfo)."""
        return self.disks.disk_path(host, disk)

    def bmc_address(self, host: EmulatedHost | str, scheme: str | None = None) -> str:
        """The BareMetalHost ``spec.bmc.address`` of ``host``: a Redfish
        virtual-media address, or ``fake+http://…/systems/<uuid>``."""
        h = self._resolve(host)
        if self.fakebmc is not None:
            return f"{scheme or 'fake+http'}://127.0.0.1:{self.fakebmc.port}/systems/{h.uuid}"
        assert self.redfish is not None
        return (f"{scheme or 'redfish-virtualmedia+http'}://127.0.0.1:{self.redfish.port}"
                f"/redfish/v1/Systems/{h.uuid}")

    def password(self, host: EmulatedHost | str) -> str:
        """The BMC password the host accepts now."""
        return self._passwords[self._resolve(host).name]

    def set_password(self, host: EmulatedHost | str, new: str) -> None:
        """Change the BMC password (the manifest's Secret is left stale on purpose)."""
        h = self._resolve(host)
        register_secret(new)
        self._passwords[h.name] = new
        self._save_passwords()
        if self.redfish is not None:
            self.redfish.set_password(h, new)
        log.info("bmc password changed", host=h.name)

    def _resolve(self, host: EmulatedHost | str) -> EmulatedHost:
        return self._by_name[host] if isinstance(host, str) else host

    def _load_passwords(self) -> dict[str, str]:
        with contextlib.suppress(FileNotFoundError, ValueError):
            data = json.loads(self._passwords_file.read_text())
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items() if k in self._by_name}
        return {}

    def _save_passwords(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self._passwords_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self._passwords, f)
        os.replace(tmp, self._passwords_file)

    async def _resume(self) -> None:
        """Hosts left powered on by an earlier run boot again (as after a
        power cut): the agent learns their state from the BMCs; an OS booted
        from disk adopts its agent processes if they still run."""
        if self.fakebmc is not None:
            for host in self.fakebmc.powered_on():
                self.agent.on_system_change(self.fakebmc.record(host))
            return
        for host in self.hosts:
            try:
                system = await self._redfish_get(host, f"/redfish/v1/Systems/{host.uuid}")
                if system.get("PowerState") != "On":
                    continue
                media = await self._redfish_get(
                    host, f"/redfish/v1/Systems/{host.uuid}/VirtualMedia/Cd"
                )
            except (aiohttp.ClientError, TimeoutError, ValueError, RuntimeError) as exc:
                log.warning("could not read host state from its BMC", host=host.name,
                            error=str(exc))
                continue
            self.agent.on_system_change(
                {
                    "uuid": host.uuid,
                    "power_state": "On",
                    "boot_device": (system.get("Boot") or {}).get("BootSourceOverrideTarget"),
                    "boot_image": {"Cd": [media.get("Image"), True, bool(media.get("Inserted"))]},
                }
            )

    async def _redfish_get(self, host: EmulatedHost, path: str) -> dict[str, Any]:
        assert self._session is not None and self.redfish is not None
        auth = aiohttp.encode_basic_auth(host.bmc_username, self.password(host))
        async with self._session.get(
            f"{self.redfish.url}{path}", headers={"Authorization": auth}
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}")
            body = await resp.json()
            return dict(body)

    async def _power_off(self, host: EmulatedHost) -> None:
        """Power ``host`` off through its BMC (the agent's standby.power_off)."""
        if self.fakebmc is not None:
            self.fakebmc.power(host, PowerAction.FORCE_OFF)
            return
        if self._session is None or self.redfish is None:
            return
        auth = aiohttp.encode_basic_auth(host.bmc_username, self.password(host))
        url = f"{self.redfish.url}/redfish/v1/Systems/{host.uuid}/Actions/ComputerSystem.Reset"
        async with self._session.post(
            url, json={"ResetType": "ForceOff"}, headers={"Authorization": auth}
        ) as resp:
            if resp.status >= 400:
                raise RuntimeError(f"BMC refused power off: HTTP {resp.status}")

    # --- the manifest -----------------------------------------------------

    def secret_name(self, host: EmulatedHost | str) -> str:
        return f"{self._resolve(host).name}-bmc-secret"

    def manifest_objects(self) -> list[dict[str, Any]]:
        """A Secret and a BareMetalHost per host (original passwords)."""
        objects: list[dict[str, Any]] = []
        for h in self.hosts:
            labels = {
                RACK_LABEL: h.rack,
                VENDOR_LABEL: label_value(h.inventory.system.manufacturer),
                EMULATED_LABEL: "true",
            }
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": self.secret_name(h),
                        "namespace": self.namespace,
                        "labels": {EMULATED_LABEL: "true"},
                    },
                    "type": "Opaque",
                    "data": {
                        "username": _b64(h.bmc_username),
                        "password": _b64(h.bmc_password),
                    },
                }
            )
            objects.append(
                {
                    "apiVersion": BMH_API_VERSION,
                    "kind": "BareMetalHost",
                    "metadata": {"name": h.name, "namespace": self.namespace, "labels": labels},
                    "spec": {
                        "bmc": {
                            "address": self.bmc_address(h),
                            "credentialsName": self.secret_name(h),
                        },
                        "bootMACAddress": h.boot_mac,
                        "bootMode": "UEFI",
                        "description": (
                            f"Emulated {h.inventory.system.manufacturer} "
                            f"{h.inventory.system.product} in {h.rack}"
                        ),
                    },
                }
            )
        return objects

    def write_manifest(self) -> Path:
        """Write ``emulated-hosts.yaml`` (mode 0600: it holds BMC passwords)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump_all(self.manifest_objects(), sort_keys=False)
        write_private(self.manifest_path, text)
        return self.manifest_path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()

