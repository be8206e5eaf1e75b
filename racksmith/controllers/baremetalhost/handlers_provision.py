"""Handlers of the provisioning states: available, provisioning, provisioned,
servicing, externally provisioned.

Available hosts start a deploy once ``spec.image`` is set and the profile
fits the inspected hardware (otherwise they stay available with
``ProfileValid`` False); provisioned and externally provisioned hosts are
adopted (idempotent) and powered as ``spec.online`` says. A deploy that
fails is recorded as a provisioning error; if it still fails once that
error's back-off has passed, the host is deprovisioned and provisioning
starts over (Metal3's behaviour). A provisioned host asked to reboot
(``reboot.metal3.io``, keyed or not) whose HostFirmwareSettings want other
values is serviced first (``servicing``: the backend applies them and
reboots it, the disk is kept), then powered off as the reboot asks; a
failed servicing stays in ``servicing`` with a servicing error until the
settings are edited. Dispatched by ``handlers``; they only propose.
"""

from __future__ import annotations

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.handlers_setup import deletion
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.provisioning import (
    layout_json,
    profile_condition,
    provision_request,
    render_profile,
)
from racksmith.controllers.baremetalhost.steps import (
    ensure_registered,
    failed,
    manage_power,
    waiting,
)
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.metal import ErrorType, Image
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.planners.layout import RenderedLayout
from racksmith.provisioner.base import ErrorKind, Result


def _image_changed(ctx: HostContext) -> bool:
    """The image to deploy differs from the one provisioned (or is gone)."""
    recorded = ctx.status.provisioning.image if ctx.status.provisioning else None
    return ctx.host.spec.image is None or ctx.host.spec.image != recorded


async def handle_available(ctx: HostContext) -> Proposal:
    """Adopt, re-inspect, start provisioning, or keep the power as asked."""
    if ctx.deleting:
        return deletion(ctx)
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    if ctx.host.spec.externally_provisioned:
        result = await ctx.calls.adopt(provision_request(ctx, ctx.host.spec.image, None))
        if result.error:
            return failed(ctx, result, ErrorType.PROVISIONING)
        if not result.done:
            return waiting(ctx, result)
        return proposal.merged(Proposal(next_state=S.EXTERNALLY_PROVISIONED, clear_error=True))
    if ann.is_inspection_requested(ctx.annotations):
        # The backend took the request once this call returns without an
        # error: the annotation is consumed now, so it is never passed twice.
        out = await ctx.calls.inspect(force=True)
        if out.result.error:
            return failed(ctx, out.result, ErrorType.INSPECTION)
        return proposal.merged(Proposal(next_state=S.INSPECTING, clear_error=True,
                                        remove_annotations=(ann.INSPECT,)))
    image = ctx.host.spec.image
    if image is not None:
        rendered = render_profile(ctx)
        if rendered is None:
            return proposal.merged(_start(image, None))
        condition = profile_condition(ctx, rendered)
        if isinstance(rendered, RenderedLayout):
            return proposal.merged(_start(image, rendered)).merged(
                Proposal(conditions=[condition])
            )
        # Does not fit: stay available (and keep managing power) until it does.
        power = await manage_power(ctx)
        return proposal.merged(power).merged(Proposal(conditions=[condition]))
    return proposal.merged(await manage_power(ctx))


def _start(image: Image, layout: RenderedLayout | None) -> Proposal:
    proposal = Proposal(next_state=S.PROVISIONING, record_image=image, clear_error=True,
                        detail=f"image {image.url}")
    if layout is not None:
        proposal.set_annotations = {ann.RENDERED_LAYOUT: layout_json(layout)}
        proposal.record_layout = layout.to_dict()
    else:
        proposal.remove_annotations = (ann.RENDERED_LAYOUT,)
    return proposal


async def handle_provisioning(ctx: HostContext) -> Proposal:
    """Deploy the recorded image with the rendered layout (one deploy per request)."""
    if ctx.deleting or _image_changed(ctx):
        return Proposal(next_state=S.DEPROVISIONING, clear_error=True,
                        detail="host deleted" if ctx.deleting else "image changed")
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    rendered = render_profile(ctx)
    if isinstance(rendered, list):
        reasons = "; ".join(str(e) for e in rendered)
        return Proposal(
            error=(ErrorType.PROVISIONING, f"profile {ctx.profile.name}: {reasons}"),
            conditions=[profile_condition(ctx, rendered)],
        )
    if ctx.config_drive.problem is not None:
        return Proposal(error=(ErrorType.PROVISIONING, ctx.config_drive.problem))
    result = await ctx.calls.provision(provision_request(ctx, ctx.host.spec.image, rendered))
    if result.error:
        if _failed_again(ctx, result):
            # As Metal3's BMO: a deploy that still fails once its error's
            # back-off has passed is undone (deprovisioned: cleaned, back to
            # available) and started over — a transient failure (a ramdisk
            # that missed its callback on a loaded conductor) does not strand
            # the host; a lasting one (a bad image) retries, cleaning between
            # tries, until the spec changes.
            return Proposal(next_state=S.DEPROVISIONING,
                            detail=ctx.redact(f"retrying a failed deploy: {result.error}"))
        return failed(ctx, result, ErrorType.PROVISIONING)
    if not result.done:
        return waiting(ctx, result)
    return proposal.merged(Proposal(next_state=S.PROVISIONED, clear_error=True))


def _failed_again(ctx: HostContext, result: Result) -> bool:
    """The deploy failed and the host already shows a provisioning error (the
    first failure was recorded and its back-off has passed)."""
    return (result.error_kind in (None, ErrorKind.PROVISIONING)
            and ctx.status.error_type is ErrorType.PROVISIONING)


async def handle_provisioned(ctx: HostContext) -> Proposal:
    """Keep the deployed host adopted and powered as asked; deprovision when the
    image goes away or changes; service it when a reboot is asked and its
    firmware settings are to change."""
    if ctx.deleting or _image_changed(ctx):
        return Proposal(next_state=S.DEPROVISIONING, clear_error=True,
                        detail="host deleted" if ctx.deleting else "image changed or removed")
    if ann.reboot_keys(ctx.annotations) and ctx.status.powered_on is not False:
        if not ctx.firmware_checked:
            # The settings were edited and not checked against the schema yet:
            # the reboot waits for the check rather than go without them.
            return Proposal(requeue_after=ctx.settings.poll_default)
        if ctx.firmware:
            return await _service(ctx, entering=True)
    return await _steady(ctx, ctx.host.spec.image)


async def handle_servicing(ctx: HostContext) -> Proposal:
    """Wait for the firmware change to finish; a deleted host is deprovisioned
    (once the backend is done)."""
    if ctx.deleting:
        return Proposal(next_state=S.DEPROVISIONING, clear_error=True, detail="host deleted")
    return await _service(ctx, entering=False)


async def _service(ctx: HostContext, *, entering: bool) -> Proposal:
    """Ask the backend for the wanted firmware values. Entering: nothing to
    change → the reboot goes on; a change started → ``servicing``. In
    servicing: done → ``provisioned`` (whose reboot then powers the host off)."""
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    result = await ctx.calls.service_firmware(ctx.firmware or {})
    if result.error:
        return proposal.merged(failed(ctx, result, ErrorType.SERVICING))
    if result.done:
        if entering:
            return proposal.merged(await _steady(ctx, ctx.host.spec.image))
        return proposal.merged(Proposal(next_state=S.PROVISIONED, clear_error=True,
                                        requeue_after=0.0))
    if entering and result.dirty:
        return proposal.merged(Proposal(
            next_state=S.SERVICING, clear_error=True, requeue_after=ctx.poll_delay(result),
            detail=f"firmware settings {', '.join(sorted(ctx.firmware or {}))}"))
    return proposal.merged(waiting(ctx, result))


async def handle_externally_provisioned(ctx: HostContext) -> Proposal:
    """Manage only the power of a host provisioned elsewhere."""
    if ctx.deleting:
        return deletion(ctx)
    if not ctx.host.spec.externally_provisioned:
        nxt = S.PREPARING if ctx.status.hardware is not None else S.INSPECTING
        return Proposal(next_state=nxt, clear_error=True)
    return await _steady(ctx, ctx.host.spec.image)


async def _steady(ctx: HostContext, image: Image | None) -> Proposal:
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    result = await ctx.calls.adopt(provision_request(ctx, image, None))
    if result.error:
        return failed(ctx, result, ErrorType.PROVISIONING)
    if not result.done:
        return waiting(ctx, result)
    return proposal.merged(await manage_power(ctx))
