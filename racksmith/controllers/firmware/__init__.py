"""The firmware controller: Metal3's HostFirmwareSettings and FirmwareSchema.

Owns ``firmware`` (reads each host's firmware settings through the
provisioner, keeps its HostFirmwareSettings status and FirmwareSchema). The
pure decisions are ``racksmith.planners.firmware``; applying the wanted
values is the BareMetalHost controller's (servicing, in a reboot).
"""

from racksmith.controllers.firmware.controller import (
    FirmwareReconciler,
    FirmwareTimings,
    firmware_controller,
)

__all__ = ["FirmwareReconciler", "FirmwareTimings", "firmware_controller"]
