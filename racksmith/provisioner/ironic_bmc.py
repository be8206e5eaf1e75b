"""BMC addresses → Ironic driver, interfaces and driver_info.

Owns what each address scheme (parsed as Metal3 parses them,
``racksmith.kinds.bmcaddress``) means for an Ironic node: ``ipmi`` (or a
bare host[:port]), the Redfish family (``redfish``, ``-virtualmedia``,
``-uefihttp``, the ``ilo5-`` aliases: the ``redfish`` hardware type;
``idrac-redfish``, ``idrac-virtualmedia``: ``idrac``), ``fake://`` —
Ironic's fake-hardware, every step a no-op — and ``fake+http(s)://`` — the
virtual datacenter's instant fake BMCs, through the ``racksmith-fake``
hardware type of ``ironic_plugin/``. Pure: called by
:mod:`racksmith.provisioner.ironic` before any node is created, so a bad
address never reaches Ironic. Error messages name the scheme and host but
never userinfo or credentials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from racksmith.ironic.config import FAKE_HARDWARE, FAKE_INTERFACES
from racksmith.kinds.bmcaddress import BMCAddressError as KindsAddressError
from racksmith.kinds.bmcaddress import parse_bmc_address
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


VIRTUAL_MEDIA_BOOT = {"redfish": "redfish-virtual-media",
                      "idrac": "idrac-redfish-virtual-media"}
"""The boot interface of each Redfish-family hardware type's virtual media."""


def parse_bmc(bmc: BMCAccess, *, deploy_iso: str | None, ipmi_enabled: bool) -> DriverSpec:
    """The driver for ``bmc``; raises :class:`BMCAddressError`."""
    address = bmc.address.strip()
    try:
        parsed = parse_bmc_address(address)
    except KindsAddressError as exc:
        raise BMCAddressError(str(exc)) from None
    scheme, hardware = parsed.scheme, parsed.type.hardware
    if hardware == FAKE_HARDWARE:
        return DriverSpec(
            driver=FAKE_HARDWARE,
            interfaces=dict(FAKE_INTERFACES),
            driver_info={"fake_address": address.split("@")[-1]},
            credentials={})
    netloc = parsed.netloc
    if hardware == "racksmith-fake":
        # Power, boot device and virtual media through the fake BMC; the
        # ramdisk agent protocol (direct deploy, agent inspection) as usual.
        return DriverSpec(
            driver="racksmith-fake",
            interfaces={"boot": "racksmith-fake", "deploy": "direct", "inspect": "agent",
                        "management": "racksmith-fake", "power": "racksmith-fake"},
            driver_info={"fake_bmc_address": f"{parsed.transport}://{netloc}{parsed.path}"},
            credentials={"fake_bmc_username": bmc.username,
                         "fake_bmc_password": bmc.password})
    if hardware == "ipmi":
        if not ipmi_enabled:
            raise BMCAddressError(
                "BMC address scheme 'ipmi' needs the ipmi hardware type, which is "
                "disabled here (ipmitool is not installed)")
        info: dict[str, Any] = {"ipmi_address": parsed.host}
        if parsed.port is not None:
            info["ipmi_port"] = parsed.port
        return DriverSpec(
            driver="ipmi",
            interfaces={"boot": "ipxe", "deploy": "direct", "inspect": "agent",
                        "management": "ipmitool", "power": "ipmitool"},
            driver_info=info,
            credentials={"ipmi_username": bmc.username, "ipmi_password": bmc.password})

    explicit = "virtualmedia" in scheme or "uefihttp" in scheme
    if explicit and not deploy_iso:
        how = "UEFI HTTP" if parsed.type.boot == "uefi-http" else "virtual media"
        raise BMCAddressError(
            f"BMC address scheme {scheme!r} boots a deploy ISO over {how}, "
            "but no deploy ISO is configured")
    info = {"redfish_address": f"{parsed.transport}://{netloc}"}
    if parsed.path:
        info["redfish_system_id"] = parsed.path
    if bmc.disable_certificate_verification and parsed.transport == "https":
        info["redfish_verify_ca"] = False
    if deploy_iso:
        info["deploy_iso"] = deploy_iso
    # Every Redfish-family node boots the ramdisk over virtual media (no
    # PXE/DHCP network here), or by UEFI HTTP for redfish-uefihttp://.
    boot = "redfish-https" if parsed.type.boot == "uefi-http" else VIRTUAL_MEDIA_BOOT[hardware]
    dell = hardware == "idrac"
    out_of_band = "idrac-redfish" if dell else "redfish"
    return DriverSpec(
        driver=hardware,
        interfaces={"boot": boot, "deploy": "direct",
                    "inspect": "agent" if bmc.inspection == "agent" else out_of_band,
                    "management": "idrac-redfish" if dell else "redfish",
                    "power": "idrac-redfish" if dell else "redfish"},
        driver_info=info,
        credentials={"redfish_username": bmc.username, "redfish_password": bmc.password})
