"""Handlers of the states that take a host apart: deprovisioning, powering
off before delete, deleting.

A deletion never hangs silently: failures are errors with back-off, and
after ``delete_error_attempts`` failed deprovision or power-off attempts
the deletion goes on (with a Warning event). The unreachable backend is
handled by the reconciler (condition ``BackendReachable``). Dispatched by
``handlers``; they only propose.
"""

from __future__ import annotations

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.steps import ensure_registered, failed, waiting
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.metal import AutomatedCleaningMode, ErrorType
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.runtime.conditions import EventSpec


def _give_up(ctx: HostContext, proposal: Proposal, nxt: S, what: str, reason: str
             ) -> Proposal:
    """After repeated failures while deleting: go on, loudly."""
    if ctx.deleting and ctx.status.error_count + 1 >= ctx.settings.delete_error_attempts:
        message = proposal.error[1] if proposal.error else "unknown error"
        return Proposal(
            next_state=nxt,
            clear_error=True,
            detail=f"{what} failed {ctx.status.error_count + 1} times, deleting anyway",
            events=[EventSpec("Warning", reason,
                              f"{what} failed ({message}); the deletion goes on")],
        )
    return proposal


async def handle_deprovisioning(ctx: HostContext) -> Proposal:
    """Remove the image (cleaning the disks if automatedCleaningMode is metadata)."""
    nxt = S.POWERING_OFF_BEFORE_DELETE if ctx.deleting else S.AVAILABLE
    proposal = Proposal()
    if not ctx.deleting:
        proposal, registered = await ensure_registered(ctx)
        if not registered:
            return proposal
    clean = ctx.host.spec.automated_cleaning_mode is AutomatedCleaningMode.METADATA
    result = await ctx.calls.deprovision(clean=clean)
    if result.error:
        return _give_up(ctx, failed(ctx, result, ErrorType.PROVISIONING), nxt, "deprovisioning",
                        "DeprovisioningSkipped")
    if not result.done:
        return waiting(ctx, result)
    return proposal.merged(
        Proposal(
            next_state=nxt,
            clear_error=True,
            clear_image=True,
            powered_on=False,
            remove_annotations=(ann.RENDERED_LAYOUT,),
            detail="disks cleaned" if clean else "cleaning disabled",
        )
    )


async def handle_powering_off(ctx: HostContext) -> Proposal:
    """Power the host off before removing it from the backend."""
    result = await ctx.calls.power(False)
    if result.error:
        return _give_up(ctx, failed(ctx, result, ErrorType.POWER_MANAGEMENT), S.DELETING,
                        "power off", "PowerOffSkipped")
    if not result.done:
        return waiting(ctx, result)
    return Proposal(next_state=S.DELETING, powered_on=False, clear_error=True)


async def handle_deleting(ctx: HostContext) -> Proposal:
    """Remove the host from the backend; then drop the finalizer."""
    if not ctx.deleting:
        return Proposal()  # only reachable through a deletion; nothing to undo
    result = await ctx.calls.delete()
    if result.error:
        return failed(ctx, result, ErrorType.PROVISIONING)
    if not result.done:
        return waiting(ctx, result)
    return Proposal(
        remove_finalizer=True,
        events=[EventSpec("Normal", "Deleted", "removed from the provisioner")],
    )
