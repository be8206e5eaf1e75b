"""BMC addresses → Ironic driver, interfaces and driver_info.

Owns the address schemes Racksmith accepts (``redfish://``,
``redfish+http(s)://``, ``redfish-virtualmedia[+http(s)]://``, ``ipmi://``,
``fake://`` — Ironic's fake-hardware, every step a no-op — and
``fake+http(s)://`` — the virtual datacenter's instant fake BMCs, through
the ``racksmith-fake`` hardware type of ``ironic_plugin/``) and what each
means for an Ironic node. Pure: called by
:mod:`racksmith.provisioner.ironic` before any node is created, so a bad
address never reaches Ironic. Error messages name the scheme and host but
never userinfo or credentials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from racksmith.ironic.config import FAKE_HARDWARE, FAKE_INTERFACES
from racksmith.provisioner.base import BMCAccess


class BMCAddressError(ValueError):
    """The address is malformed or its scheme is not supported."""


@dataclass(frozen=True)
class DriverSpec:
    """What an Ironic node needs for one BMC."""

    driver: str
    interfaces: dict[str, str]
    driver_info: dict[str, Any]
    """Without credentials (safe to compare, log and show)."""
    credentials: dict[str, str] = field(repr=False)
    """The secret part of driver_info (username/password fields)."""

    def full_driver_info(self) -> dict[str, Any]:
        return {**self.driver_info, **self.credentials}


REDFISH_SCHEMES = {"redfish", "redfish+http", "redfish+https"}
VIRTUALMEDIA_SCHEMES = {"redfish-virtualmedia", "redfish-virtualmedia+http",
                        "redfish-virtualmedia+https"}
FAKE_BMC_SCHEMES = {"fake+http", "fake+https"}
SUPPORTED_SCHEMES = sorted(REDFISH_SCHEMES | VIRTUALMEDIA_SCHEMES | FAKE_BMC_SCHEMES
                           | {"ipmi", "fake"})


def parse_bmc(bmc: BMCAccess, *, deploy_iso: str | None, ipmi_enabled: bool) -> DriverSpec:
    """The driver for ``bmc``; raises :class:`BMCAddressError`."""
    address = bmc.address.strip()
    if "://" not in address:
        raise BMCAddressError(
            "malformed BMC address: expected <scheme>://<host>[:port][/path] "
            f"(supported schemes: {', '.join(SUPPORTED_SCHEMES)})")
    scheme = address.split("://", 1)[0].lower()
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        raise BMCAddressError(f"malformed {scheme}:// BMC address: bad host or port") from None
    host = parts.hostname
    if scheme == "fake":
        return DriverSpec(
            driver=FAKE_HARDWARE,
            interfaces=dict(FAKE_INTERFACES),
            driver_info={"fake_address": address.split("@")[-1]},
            credentials={})
    if scheme not in REDFISH_SCHEMES | VIRTUALMEDIA_SCHEMES | FAKE_BMC_SCHEMES | {"ipmi"}:
        raise BMCAddressError(
            f"unsupported BMC address scheme {scheme!r} "
            f"(supported: {', '.join(SUPPORTED_SCHEMES)})")
    if not host:
        raise BMCAddressError(f"malformed {scheme}:// BMC address: no host")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc = f"{netloc}:{port}"

    if scheme in FAKE_BMC_SCHEMES:
        # Power, boot device and virtual media through the fake BMC; the
        # ramdisk agent protocol (direct deploy, agent inspection) as usual.
        transport = scheme.split("+", 1)[1]
        path = parts.path.rstrip("/")
        return DriverSpec(
            driver="racksmith-fake",
            interfaces={"boot": "racksmith-fake", "deploy": "direct", "inspect": "agent",
                        "management": "racksmith-fake", "power": "racksmith-fake"},
            driver_info={"fake_bmc_address": f"{transport}://{netloc}{path}"},
            credentials={"fake_bmc_username": bmc.username,
                         "fake_bmc_password": bmc.password})
    if scheme == "ipmi":
        if not ipmi_enabled:
            raise BMCAddressError(
                "BMC address scheme 'ipmi' needs the ipmi hardware type, which is "
                "disabled here (ipmitool is not installed)")
        info: dict[str, Any] = {"ipmi_address": host}
        if port is not None:
            info["ipmi_port"] = port
        return DriverSpec(
            driver="ipmi",
            interfaces={"boot": "ipxe", "deploy": "direct", "inspect": "agent",
                        "management": "ipmitool", "power": "ipmitool"},
            driver_info=info,
            credentials={"ipmi_username": bmc.username, "ipmi_password": bmc.password})

    transport = "https"
    if scheme.endswith("+http"):
        transport = "http"
    virtual_media = scheme in VIRTUALMEDIA_SCHEMES
    if virtual_media and not deploy_iso:
        raise BMCAddressError(
            f"BMC address scheme {scheme!r} boots a deploy ISO over virtual media, "
            "but no deploy ISO is configured")
    info = {"redfish_address": f"{transport}://{netloc}"}
    if parts.path and parts.path != "/":
        info["redfish_system_id"] = parts.path.rstrip("/")
    if bmc.disable_certificate_verification and transport == "https":
        info["redfish_verify_ca"] = False
    if deploy_iso:
        info["deploy_iso"] = deploy_iso
    # Every redfish node boots the ramdisk over virtual media: no PXE/DHCP
    # network here (redfish-virtualmedia:// only makes it explicit).
    return DriverSpec(
        driver="redfish",
        interfaces={"boot": "redfish-virtual-media", "deploy": "direct",
                    "inspect": "redfish", "management": "redfish", "power": "redfish"},
        driver_info=info,
        credentials={"redfish_username": bmc.username, "redfish_password": bmc.password})
