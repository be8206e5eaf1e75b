"""Handlers of the states before a host is available: none, unmanaged,
registering, inspecting, preparing.

Each looks at the host and the provisioner's answers and returns a
``Proposal``; none writes anything. Dispatched by ``handlers``.
"""

from __future__ import annotations

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.controllers.baremetalhost.provisioning import hardware_summary
from racksmith.controllers.baremetalhost.states import DELETION_TARGET
from racksmith.controllers.baremetalhost.steps import ensure_registered, failed, waiting
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.hardware import HardwareDetails
from racksmith.kinds.hostannotations import (
    DEPLOYED_AFTER_BACKUP,
    DETACHED,
    RECORD_MATCHES_HARDWARE,
)
from racksmith.kinds.metal import ErrorType, InspectionMode, OperationalStatus
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.runtime.conditions import ConditionSpec, EventSpec

DELETE_DELAYED = "DeletionAllowed"
"""Condition False while a detached host's deletion waits (``deleteAction: delay``)."""


def deletion(ctx: HostContext) -> Proposal:
    """Leave the current state for the deletion path."""
    return Proposal(next_state=DELETION_TARGET[ctx.state], clear_error=True)


async def handle_new(ctx: HostContext) -> Proposal:
    """No status yet: start managing (or wait for BMC details)."""
    if ctx.deleting:
        return deletion(ctx)
    if ctx.host.spec.bmc is None:
        return Proposal(next_state=S.UNMANAGED, detail="no BMC details")
    return Proposal(next_state=S.REGISTERING)


async def handle_unmanaged(ctx: HostContext) -> Proposal:
    """Wait for ``spec.bmc``."""
    if ctx.deleting:
        return deletion(ctx)
    if ctx.host.spec.bmc is not None:
        return Proposal(next_state=S.REGISTERING)
    return Proposal(clear_error=True)


async def handle_registering(ctx: HostContext) -> Proposal:
    """Enrol the host and verify BMC access; then inspect (or skip it)."""
    if ctx.deleting:
        return deletion(ctx)
    if ctx.host.spec.bmc is None:
        return Proposal(next_state=S.UNMANAGED, clear_error=True, detail="BMC details removed")
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    given = _given_hardware(ctx)
    if ctx.host.spec.externally_provisioned:
        nxt = S.EXTERNALLY_PROVISIONED
    elif inspection_disabled(ctx) or ctx.status.hardware is not None \
            or given.hardware is not None:
        nxt = S.PREPARING
    else:
        nxt = S.INSPECTING
    return proposal.merged(given).merged(Proposal(next_state=nxt, clear_error=True))


def inspection_disabled(ctx: HostContext) -> bool:
    """``inspect.metal3.io: disabled`` or ``spec.inspectionMode: disabled``."""
    return ann.is_inspection_disabled(ctx.annotations) \
        or ctx.host.spec.inspection_mode is InspectionMode.DISABLED


def _given_hardware(ctx: HostContext) -> Proposal:
    """Hardware known without inspection, as Metal3 takes it: the HardwareData
    of the host's name (applied with the host), else the
    ``inspect.metal3.io/hardwaredetails`` annotation when inspection is
    disabled. The annotation is removed either way."""
    value = ctx.annotations.get(ann.HARDWARE_DETAILS)
    out = Proposal(remove_annotations=(ann.HARDWARE_DETAILS,)) if value is not None \
        else Proposal()
    if ctx.status.hardware is None and ctx.hardware_data is not None:
        out.hardware = hardware_summary(ctx.hardware_data)
        out.inventory = ctx.hardware_data
        out.events.append(EventSpec("Normal", "UpdateHardwareDetails",
                                    "hardware details from the host's HardwareData"))
        return out
    if value is None or not inspection_disabled(ctx) or not value.strip():
        return out
    try:
        details = HardwareDetails.model_validate_json(value)
    except ValueError:
        return out  # refused at admission; only a host stored before gets here
    out.hardware = hardware_summary(details)
    out.inventory = details
    out.events.append(EventSpec("Normal", "UpdateHardwareDetails",
                                f"hardware details from the {ann.HARDWARE_DETAILS} annotation"))
    return out


async def handle_inspecting(ctx: HostContext) -> Proposal:
    """Collect hardware details: summary in status, full report in the inventory."""
    if ctx.deleting:
        return deletion(ctx)
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    # After an inspection error (and its back-off) inspect again, as Metal3
    # does: Ironic leaves the node in "inspect failed" until told to retry.
    out = await ctx.calls.inspect(force=ctx.status.error_type is ErrorType.INSPECTION)
    if out.result.error:
        return failed(ctx, out.result, ErrorType.INSPECTION)
    if not out.result.done or out.hardware is None:
        return waiting(ctx, out.result)
    done = Proposal(
        next_state=S.PREPARING,
        clear_error=True,
        hardware=hardware_summary(out.hardware),
        inventory=out.hardware,
        detail=_describe(out.hardware.cpu.count if out.hardware.cpu else None,
                         out.hardware.ram_mebibytes, len(out.hardware.storage)),
    )
    return proposal.merged(done)


def _describe(cpus: int | None, ram: int | None, disks: int) -> str:
    return f"{cpus or '?'} CPUs, {ram or '?'} MiB RAM, {disks} disks"


async def handle_preparing(ctx: HostContext) -> Proposal:
    """Clean and configure the host; then it is available."""
    if ctx.deleting:
        return deletion(ctx)
    proposal, registered = await ensure_registered(ctx)
    if not registered:
        return proposal
    result = await ctx.calls.prepare()
    if result.error:
        return failed(ctx, result, ErrorType.PREPARATION)
    if not result.done:
        return waiting(ctx, result)
    return proposal.merged(Proposal(next_state=S.AVAILABLE, clear_error=True))


async def handle_detached(ctx: HostContext) -> Proposal:
    """The detached annotation: release the host from the backend without touching
    the server; once released, a deletion only drops the finalizer. A host a
    restore found deployed after the backup says so in a condition."""
    mismatch = ctx.annotations.get(DEPLOYED_AFTER_BACKUP)
    conditions = [ConditionSpec.false(
        RECORD_MATCHES_HARDWARE, "DeployedAfterBackup",
        f"the server was deployed after the restored backup was taken ({mismatch}); it "
        "was detached so that nothing deploys over it: check it, then remove the "
        f"{DETACHED} and {DEPLOYED_AFTER_BACKUP} annotations")] if mismatch else []
    args = ann.detach_arguments(ctx.annotations.get(DETACHED, "")) or ann.DetachArguments()
    delay = ctx.deleting and args.delete_action == "delay"
    if delay:
        conditions.append(ConditionSpec.false(
            DELETE_DELAYED, "DetachedDeleteDelayed",
            f"deleted while detached with deleteAction delay: the host waits until the "
            f"{DETACHED} annotation is removed (then it is attached again and deleted)"))
    if ctx.status.operational_status is OperationalStatus.DETACHED:
        return Proposal(remove_finalizer=ctx.deleting and not delay, conditions=conditions)
    result = await ctx.calls.detach()
    if result.error:
        return failed(ctx, result, ErrorType.DETACH)
    if not result.done:
        return waiting(ctx, result)
    return Proposal(
        operational_status=OperationalStatus.DETACHED,
        forget_registration=True,
        clear_error=True,
        remove_finalizer=ctx.deleting and not delay,
        conditions=conditions,
        events=[EventSpec("Normal", "Detached",
                          "released from the provisioner; the server was not touched"),
                *([EventSpec("Warning", "DeployedAfterBackup", conditions[0].message or "")]
                  if conditions else [])],
    )
