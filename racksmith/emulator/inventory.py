"""Deterministic hardware inventories of emulated hosts (pure; no I/O).

Owns what each emulated server *is*: CPUs, memory, disks, NICs, vendor and
firmware, plus its stable identity (name, UUID, MACs) and BMC credentials.
The same ``(seed, index)`` always yields the same host, so a datacenter
restarted on the same data dir keeps its MACs and UUIDs. The Redfish BMC
(``sushy_ext``) and the emulated agent (``agent``) both serve views of
these records; ``to_dict``/``from_dict`` carry them across the process
boundary as plain JSON.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

DiskKind = Literal["hdd", "ssd", "nvme"]

_UUID_NAMESPACE = uuid.UUID("5b0c2f6e-8d0e-4c6a-9f1e-72616b736d74")

_GIB = 1024**3
_SECTOR = 512


@dataclass(frozen=True)
class CPUInfo:
    """The processors: ``count`` logical CPUs over ``sockets`` packages."""

    model: str
    vendor: str
    frequency_mhz: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    arch: str = "x86_64"
    flags: tuple[str, ...] = ("fpu", "vme", "sse2", "ssse3", "sse4_2", "avx", "avx2", "vmx")

    @property
    def count(self) -> int:
        """Logical CPUs (what Linux and Ironic call the CPU count)."""
        return self.sockets * self.cores_per_socket * self.threads_per_core


@dataclass(frozen=True)
class DiskInfo:
    """A block device as the ramdisk sees it (``name`` is the /dev path)."""

    name: str
    kind: DiskKind
    size_bytes: int
    vendor: str
    model: str
    serial: str
    wwn: str
    hctl: str | None

    @property
    def rotational(self) -> bool:
        """True for spinning disks."""
        return self.kind == "hdd"

    @property
    def short_name(self) -> str:
        """The device name without /dev/ (e.g. ``sda``, ``nvme0n1``)."""
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class NICInfo:
    """A network interface with a stable, locally administered MAC."""

    name: str
    mac: str
    vendor: str
    product: str
    model: str
    speed_mbps: int


@dataclass(frozen=True)
class SystemInfo:
    """Who made the server and its firmware."""

    manufacturer: str
    product: str
    serial: str
    bios_vendor: str
    bios_version: str
    bios_date: str


@dataclass(frozen=True)
class HostInventory:
    """Everything inspection should find on one host."""

    cpu: CPUInfo
    memory_mib: int
    disks: tuple[DiskInfo, ...]
    nics: tuple[NICInfo, ...]
    system: SystemInfo

    @property
    def memory_gib(self) -> int:
        """Installed memory in GiB (Redfish MemorySummary unit)."""
        return self.memory_mib // 1024


@dataclass(frozen=True)
class EmulatedHost:
    """One emulated server: identity, hardware and BMC credentials.

    ``bmc_password`` is excluded from ``repr`` so it never lands in logs.
    """

    index: int
    name: str
    uuid: str
    rack: str
    inventory: HostInventory
    bmc_username: str
    bmc_password: str = field(repr=False)

    @property
    def boot_mac(self) -> str:
        """The MAC of the first NIC, the one the host boots from."""
        return self.inventory.nics[0].mac


# --- catalogues the generator picks from --------------------------------------

_VENDORS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    ("Dell Inc.", ("PowerEdge R640", "PowerEdge R650", "PowerEdge R750"), "Dell Inc.",
     ("2.17.1", "2.19.1", "1.12.2")),
    ("HPE", ("ProLiant DL360 Gen10", "ProLiant DL380 Gen10 Plus"), "HPE",
     ("U32 v2.72", "U46 v1.60")),
    ("Supermicro", ("SYS-1029P-WTR", "SYS-620U-TNR"), "American Megatrends Inc.",
     ("3.4", "1.3a")),
    ("Lenovo", ("ThinkSystem SR630", "ThinkSystem SR650 V2"), "Lenovo",
     ("IVE164L-2.61", "AFE118M-1.41")),
)

# (model, vendor, MHz, cores per socket, threads per core)
_CPUS: tuple[tuple[str, str, int, int, int], ...] = (
    ("Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", "Intel", 2100, 20, 2),
    ("Intel(R) Xeon(R) Silver 4214R CPU @ 2.40GHz", "Intel", 2400, 12, 2),
    ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "Intel", 2000, 32, 2),
    ("AMD EPYC 7302 16-Core Processor", "AMD", 3000, 16, 2),
    ("AMD EPYC 7543 32-Core Processor", "AMD", 2800, 32, 2),
    ("Intel(R) Xeon(R) E-2236 CPU @ 3.40GHz", "Intel", 3400, 6, 2),
)

_MEMORY_GIB = (32, 64, 96, 128, 192, 256, 384, 512)

# kind → (vendor, model, sizes in decimal GB)
_DISKS: dict[DiskKind, tuple[tuple[str, str, tuple[int, ...]], ...]] = {
    "hdd": (
        ("SEAGATE", "ST2000NM0055", (2000,)),
        ("WDC", "WUH721414AL", (4000, 8000)),
        ("TOSHIBA", "MG04ACA100N", (1000,)),
    ),
    "ssd": (
        ("INTEL", "SSDSC2KB480G8", (480,)),
        ("SAMSUNG", "MZ7LH960HAJR", (960,)),
        ("Micron", "5300_MTFDDAK1T9TDS", (1920,)),
        ("INTEL", "SSDSC2KB240G8", (240,)),
    ),
    "nvme": (
        ("SAMSUNG", "MZQLB1T9HAJR-00007", (1920,)),
        ("INTEL", "SSDPE2KX040T8", (4000,)),
        ("Micron", "MTFDHAL800MCE", (800,)),
    ),
}

_NICS: tuple[tuple[str, str, str, int], ...] = (
    ("0x8086", "0x1572", "Intel Corporation Ethernet Controller X710 for 10GbE SFP+", 10000),
    ("0x8086", "0x158b", "Intel Corporation Ethernet Controller XXV710 for 25GbE SFP28", 25000),
    ("0x15b3", "0x1015", "Mellanox Technologies MT27710 Family [ConnectX-4 Lx]", 25000),
    ("0x14e4", "0x16d7", "Broadcom Inc. BCM57414 NetXtreme-E 10Gb/25Gb", 25000),
)


# --- generation ---------------------------------------------------------------


def host_mac(seed: int, index: int, nic: int) -> str:
    """A stable, unicast, locally administered MAC for NIC ``nic`` of host ``index``."""
    octets = (0x02, seed & 0xFF, (index >> 16) & 0xFF, (index >> 8) & 0xFF, index & 0xFF, nic)
    return ":".join(f"{o:02x}" for o in octets)


def host_name(prefix: str, index: int) -> str:
    """The host's name, e.g. ``host-000``."""
    return f"{prefix}-{index:03d}"


def _sectors(decimal_gb: int) -> int:
    return (decimal_gb * 10**9) // _SECTOR * _SECTOR


def _disks(rng: random.Random, host_key: str) -> tuple[DiskInfo, ...]:
    count = rng.randint(1, 4)
    kinds: list[DiskKind] = [rng.choice(("hdd", "ssd", "nvme")) for _ in range(count)]
    # A server boots from flash more often than not: make the first disk fast.
    if "hdd" in kinds and all(k == "hdd" for k in kinds) and count > 1:
        kinds[0] = "ssd"
    sata = 0
    nvme = 0
    disks: list[DiskInfo] = []
    for i, kind in enumerate(kinds):
        vendor, model, sizes = rng.choice(_DISKS[kind])
        digest = hashlib.sha256(f"{host_key}/disk{i}".encode()).hexdigest()
        if kind == "nvme":
            name = f"/dev/nvme{nvme}n1"
            hctl = None
            nvme += 1
            wwn = f"eui.{digest[:16]}"
        else:
            name = f"/dev/sd{chr(ord('a') + sata)}"
            hctl = f"0:0:{sata}:0"
            sata += 1
            wwn = f"0x5{digest[:15]}"
        disks.append(
            DiskInfo(
                name=name,
                kind=kind,
                size_bytes=_sectors(rng.choice(sizes)),
                vendor=vendor,
                model=model,
                serial=f"S{digest[16:26].upper()}",
                wwn=wwn,
                hctl=hctl,
            )
        )
    return tuple(disks)


def _nics(rng: random.Random, seed: int, index: int) -> tuple[NICInfo, ...]:
    count = rng.randint(2, 4)
    onboard = rng.choice(_NICS)
    addon = rng.choice(_NICS)
    nics: list[NICInfo] = []
    for i in range(count):
        vendor, product, model, speed = onboard if i < 2 else addon
        name = f"eno{i + 1}" if i < 2 else f"ens1f{i - 2}"
        nics.append(NICInfo(name, host_mac(seed, index, i), vendor, product, model, speed))
    return tuple(nics)


def generate_host(
    index: int, *, seed: int = 0, prefix: str = "host", racks: int = 4
) -> EmulatedHost:
    """The host number ``index`` of the datacenter seeded with ``seed``.

    Deterministic: equal arguments give equal hosts. Hosts are spread
    round-robin over ``racks`` racks (``rack-1`` …).
    """
    name = host_name(prefix, index)
    host_key = f"{seed}/{prefix}/{index}"
    rng = random.Random(host_key)
    manufacturer, products, bios_vendor, bios_versions = rng.choice(_VENDORS)
    model, cpu_vendor, mhz, cores, threads = rng.choice(_CPUS)
    sockets = 1 if cores <= 6 else rng.choice((1, 2))
    year = rng.randint(2019, 2024)
    system = SystemInfo(
        manufacturer=manufacturer,
        product=rng.choice(products),
        serial=f"{manufacturer[:2].upper()}{hashlib.sha256(host_key.encode()).hexdigest()[:8].upper()}",
        bios_vendor=bios_vendor,
        bios_version=rng.choice(bios_versions),
        bios_date=f"{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{year}",
    )
    inventory = HostInventory(
        cpu=CPUInfo(model, cpu_vendor, mhz, sockets, cores, threads),
        memory_mib=rng.choice(_MEMORY_GIB) * 1024,
        disks=_disks(rng, host_key),
        nics=_nics(rng, seed, index),
        system=system,
    )
    return EmulatedHost(
        index=index,
        name=name,
        uuid=str(uuid.uuid5(_UUID_NAMESPACE, host_key)),
        rack=f"rack-{index % max(racks, 1) + 1}",
        inventory=inventory,
        bmc_username="admin",
        bmc_password=f"pw-{rng.getrandbits(64):016x}",
    )


def generate_hosts(
    count: int, *, seed: int = 0, prefix: str = "host", racks: int = 4
) -> list[EmulatedHost]:
    """``count`` hosts, indexes 0 … count-1 (see :func:`generate_host`)."""
    return [generate_host(i, seed=seed, prefix=prefix, racks=racks) for i in range(count)]


# --- views --------------------------------------------------------------------


def root_disk(inventory: HostInventory, hints: dict[str, Any] | None = None) -> DiskInfo:
    """The disk an image goes to: the first matching the root device hints,
    else the smallest disk (ties: the first), as IPA chooses.

    Supported hints: name/device_name, serial/serial_number, wwn, model,
    vendor, rotational, size (GiB, exact or ``>= N``) and min_size_gigabytes.
    Raises ``LookupError`` when no disk matches.
    """
    candidates = list(inventory.disks)
    for key, wanted in (hints or {}).items():
        candidates = [d for d in candidates if _matches(d, key, wanted)]
    if not candidates:
        raise LookupError(f"no disk matches root device hints {hints!r}")
    if hints:
        return candidates[0]
    return min(candidates, key=lambda d: d.size_bytes)


def _matches(disk: DiskInfo, key: str, wanted: Any) -> bool:
    text = str(wanted)
    for prefix in ("s== ", "<in> ", "== "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    size_gib = disk.size_bytes // _GIB
    match key:
        case "name" | "device_name":
            return disk.name == text or disk.short_name == text
        case "serial" | "serial_number":
            return disk.serial == text
        case "wwn":
            return disk.wwn == text
        case "model":
            return text.lower() in disk.model.lower()
        case "vendor":
            return text.lower() in disk.vendor.lower()
        case "rotational":
            return disk.rotational == (text.lower() in ("true", "1", "yes"))
        case "size":
            if text.startswith(">="):
                return size_gib >= int(text[2:].strip())
            return size_gib == int(text)
        case "min_size_gigabytes":
            return size_gib >= int(text)
        case _:
            return True


def to_dict(host: EmulatedHost) -> dict[str, Any]:
    """A JSON-ready dict of the host, password included (for 0600 files only)."""
    data = asdict(host)
    data["inventory"]["cpu"]["count"] = host.inventory.cpu.count
    return data


def from_dict(data: dict[str, Any]) -> EmulatedHost:
    """The inverse of :func:`to_dict`."""
    inv = data["inventory"]
    cpu = {k: v for k, v in inv["cpu"].items() if k != "count"}
    cpu["flags"] = tuple(cpu.get("flags", ()))
    inventory = HostInventory(
        cpu=CPUInfo(**cpu),
        memory_mib=inv["memory_mib"],
        disks=tuple(DiskInfo(**d) for d in inv["disks"]),
        nics=tuple(NICInfo(**n) for n in inv["nics"]),
        system=SystemInfo(**inv["system"]),
    )
    return EmulatedHost(
        index=data["index"],
        name=data["name"],
        uuid=data["uuid"],
        rack=data["rack"],
        inventory=inventory,
        bmc_username=data["bmc_username"],
        bmc_password=data["bmc_password"],
    )
