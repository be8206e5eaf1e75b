"""From the host's spec to what the provisioner needs: hardware summaries,
the rendered profile and the ``ProvisionRequest``.

Owns the translation of kinds (Image, HardwareDetails, the profile) into the
provisioner's plain data, the disk layout (via ``racksmith.planners``) and
the ``ProfileValid`` condition. Pure: no I/O. Called by the handlers.
"""

from __future__ import annotations

import json
from typing import Any

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.kinds.common import ConditionStatus
from racksmith.kinds.hardware import CPU, NIC, HardwareDetails
from racksmith.kinds.metal import ChecksumType, Image
from racksmith.planners.disklayout import FitError, RenderedLayout, render_layout
from racksmith.provisioner.base import ImageSpec, ProvisionRequest
from racksmith.runtime.conditions import ConditionSpec

PROFILE_VALID = "ProfileValid"
LAYOUT_META_KEY = "racksmith_disk_layout"


def hardware_summary(full: HardwareDetails) -> HardwareDetails:
    """What ``status.hardware`` keeps: disks in full (profiles match on them), NICs
    without VLAN lists, CPUs without flags (except ``pdpe1gb``)."""
    return HardwareDetails(
        system_vendor=full.system_vendor,
        firmware=full.firmware,
        ram_mebibytes=full.ram_mebibytes,
        cpu=CPU(arch=full.cpu.arch, model=full.cpu.model,
                clock_megahertz=full.cpu.clock_megahertz, count=full.cpu.count,
                flags=[f for f in full.cpu.flags if f == "pdpe1gb"])
        if full.cpu else None,
        nics=[NIC(name=n.name, mac=n.mac, ip=n.ip, speed_gbps=n.speed_gbps, pxe=n.pxe)
              for n in full.nics],
        storage=[s.model_copy() for s in full.storage],
        hostname=full.hostname,
    )


def image_spec(image: Image | None) -> ImageSpec:
    if image is None:
        return ImageSpec(url="")
    return ImageSpec(
        url=image.url,
        checksum=image.checksum,
        checksum_type=image.checksum_type.value
        if image.checksum_type and image.checksum_type is not ChecksumType.AUTO else None,
        disk_format=image.format.value if image.format else None,
    )


def render_profile(ctx: HostContext) -> RenderedLayout | list[FitError] | None:
    """The host's profile laid out on its inspected hardware; None without a profile."""
    lookup = ctx.profile
    if lookup.name is None:
        return None
    if lookup.missing or lookup.spec is None:
        return [FitError("", f"profile {lookup.name} not found")]
    return render_layout(lookup.spec, ctx.status.hardware)


def profile_condition(ctx: HostContext, rendered: RenderedLayout | list[FitError]) -> ConditionSpec:
    """``ProfileValid`` for a rendering: True (ProfileFits) or False with every reason."""
    name = ctx.profile.name
    if isinstance(rendered, RenderedLayout):
        return ConditionSpec(PROFILE_VALID, ConditionStatus.TRUE, "ProfileFits",
                             f"profile {name}: {rendered.summary()}")
    if ctx.profile.missing:
        return ConditionSpec(PROFILE_VALID, ConditionStatus.FALSE, "ProfileNotFound",
                             f"profile {name} not found")
    reasons = "; ".join(str(e) for e in rendered)
    return ConditionSpec(PROFILE_VALID, ConditionStatus.FALSE, "ProfileDoesNotFit",
                         f"profile {name} does not fit this host: {reasons}")


def layout_json(layout: RenderedLayout) -> str:
    """The layout as stored in the rendered-layout annotation (compact, stable)."""
    return json.dumps(layout.to_dict(), sort_keys=True, separators=(",", ":"))


def provision_request(
    ctx: HostContext, image: Image | None, layout: RenderedLayout | None
) -> ProvisionRequest:
    """Everything a deploy (or an adoption) needs; the layout rides in meta_data."""
    drive = ctx.config_drive
    meta: dict[str, Any] | None = dict(drive.meta_data) if drive.meta_data else None
    if layout is not None:
        meta = {**(meta or {}), LAYOUT_META_KEY: layout.to_dict()}
    hints = ctx.host.spec.root_device_hints
    return ProvisionRequest(
        image=image_spec(image),
        user_data=drive.user_data,
        network_data=drive.network_data,
        meta_data=meta,
        root_device_hints=hints.model_dump(mode="json", exclude_none=True) if hints else None,
        boot_mode=ctx.host.spec.boot_mode.value,
    )
