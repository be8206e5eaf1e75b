"""Steps shared by several state handlers: registration, power, results.

Owns how a provisioner ``Result`` becomes a proposal (error / wait / done),
the registration check every managed state makes (credentials rotated or
the backend forgot the host → register again), and the power management of
settled hosts (``spec.online`` and the reboot annotation). Called by the
``handlers_*`` modules only.
"""

from __future__ import annotations

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.common import SecretReference
from racksmith.kinds.metal import CredentialsStatus, ErrorType
from racksmith.provisioner.base import Result
from racksmith.runtime.conditions import EventSpec


def failed(ctx: HostContext, result: Result, default: ErrorType) -> Proposal:
    """The proposal for a failed call: the error, its kind, no state change."""
    kind = ErrorType(result.error_kind.value) if result.error_kind is not None else default
    return Proposal(error=(kind, ctx.redact(result.error or "unknown error")))


def waiting(ctx: HostContext, result: Result) -> Proposal:
    """The proposal for an operation still in progress."""
    return Proposal(requeue_after=ctx.poll_delay(result), clear_error=True)


def needs_registration(ctx: HostContext) -> bool:
    """The backend must be told about the host (again): no id, or new credentials."""
    status, creds = ctx.status, ctx.credentials
    good = status.good_credentials
    return (
        status.provisioning is None
        or not status.provisioning.id
        or good is None
        or good.credentials is None
        or good.credentials.name != creds.secret_name
        or good.credentials_version != creds.version
    )


async def ensure_registered(ctx: HostContext) -> tuple[Proposal, bool]:
    """Register when needed. Returns the proposal so far and whether the host
    is registered with working credentials (then the caller goes on)."""
    creds = ctx.credentials
    if creds.problem is not None or creds.bmc is None:
        return Proposal(error=(ErrorType.REGISTRATION, creds.problem or "no BMC details")), False
    if not needs_registration(ctx):
        return Proposal(), True
    tried_before = ctx.status.tried_credentials
    changed = (
        tried_before is None
        or tried_before.credentials is None
        or tried_before.credentials.name != creds.secret_name
        or tried_before.credentials_version != creds.version
    )
    out = await ctx.calls.register(creds.bmc, credentials_changed=changed)
    assert creds.secret_name is not None
    tried = CredentialsStatus(
        credentials=SecretReference(name=creds.secret_name), credentials_version=creds.version
    )
    base = Proposal(tried_credentials=tried, provisioning_id=out.provisioner_id)
    if out.result.error:
        return base.merged(failed(ctx, out.result, ErrorType.REGISTRATION)), False
    if not out.result.done:
        return base.merged(waiting(ctx, out.result)), False
    good = Proposal(good_credentials=tried, clear_error=True)
    if ctx.status.good_credentials is not None:
        good.events.append(EventSpec("Normal", "CredentialsUpdated",
                                     f"BMC credentials from secret {creds.secret_name} work"))
    return base.merged(good), True


async def manage_power(ctx: HostContext) -> Proposal:
    """Reboot on request (``reboot.metal3.io``: off, annotation removed, on
    again; ``reboot.metal3.io/<key>``: off until every key is removed), then
    make the power match ``spec.online``."""
    requested = ann.reboot_keys(ctx.annotations)
    if requested:
        return await _reboot(ctx, requested)
    actual = await ctx.calls.power_state()
    wanted = ctx.host.spec.online
    # An unknown power state (Ironic's None: no reading yet, or hardware that
    # cannot tell) keeps the last one known, as Metal3's BMO does: a host never
    # seen on counts as off, so a host wanted off is not powered off blind.
    known = actual if actual is not None else bool(ctx.status.powered_on)
    if known is wanted:
        settled = Proposal(powered_on=actual, clear_error=True, steady=True)
        if actual is not None and ctx.status.powered_on is (not actual):
            # A power change that completed after its call returned (Ironic
            # powers asynchronously; the reboot's power-on, typically) gets its
            # event now, when the reading first shows it.
            settled.events.append(_power_event(actual))
        return settled
    result = await ctx.calls.power(wanted)
    if result.error:
        return failed(ctx, result, ErrorType.POWER_MANAGEMENT)
    if not result.done:
        return waiting(ctx, result).merged(Proposal(powered_on=actual))
    return Proposal(powered_on=wanted, clear_error=True, steady=True,
                    events=[_power_event(wanted)])


async def _reboot(ctx: HostContext, requested: list[str]) -> Proposal:
    """Power off for the reboot annotations ``requested``; the unkeyed one is
    removed once the host is off (the next reconcile powers it on again), a
    keyed one only by whoever set it — until then the host stays off."""
    unkeyed = tuple(k for k in requested if k == ann.REBOOT)
    held = ann.held_off_by(ctx.annotations)
    # Soft (through the OS) when asked, as Metal3 does; after a failed power
    # action the next try is hard (a BMC or OS that cannot do it must not
    # keep the host on forever).
    soft = any(ann.reboot_mode(ctx.annotations[k]) == ann.REBOOT_SOFT for k in requested) \
        and ctx.status.error_type is not ErrorType.POWER_MANAGEMENT
    was_on = ctx.status.powered_on is not False
    result = await ctx.calls.power(False, soft=soft)
    if result.error:
        return failed(ctx, result, ErrorType.POWER_MANAGEMENT)
    if not result.done:
        return waiting(ctx, result)
    events = [EventSpec("Normal", "Rebooting", "powered off for the requested reboot"
                        + (f"; held off by {', '.join(held)}" if held else ""))] \
        if was_on or unkeyed else []
    if unkeyed:
        return Proposal(powered_on=False, remove_annotations=unkeyed, clear_error=True,
                        requeue_after=0.0, events=events)
    # Held off: nothing to do until a key goes (an annotation change wakes the host).
    return Proposal(powered_on=False, clear_error=True, steady=True, events=events)


def _power_event(on: bool) -> EventSpec:
    """``PowerOn`` / ``PowerOff``: the host's power is seen or made so."""
    word = "on" if on else "off"
    return EventSpec("Normal", f"Power{word.capitalize()}", f"host powered {word}")
