"""One handler per provisioning state, and the choice of which one runs.

Owns ``HANDLERS`` (state → handler) and ``decide``, the single entry point
the reconciler calls: the detached annotation first (release without
touching the server), then the handler of the host's state. Handlers only
propose; ``committer`` applies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from racksmith.controllers.baremetalhost.context import HostContext
from racksmith.controllers.baremetalhost.handlers_provision import (
    handle_available,
    handle_externally_provisioned,
    handle_provisioned,
    handle_provisioning,
    handle_servicing,
)
from racksmith.controllers.baremetalhost.handlers_setup import (
    handle_detached,
    handle_inspecting,
    handle_new,
    handle_preparing,
    handle_registering,
    handle_unmanaged,
)
from racksmith.controllers.baremetalhost.handlers_teardown import (
    handle_deleting,
    handle_deprovisioning,
    handle_powering_off,
)
from racksmith.controllers.baremetalhost.proposal import Proposal
from racksmith.kinds import hostannotations as ann
from racksmith.kinds.hostannotations import RECORD_MATCHES_HARDWARE
from racksmith.kinds.metal import OperationalStatus
from racksmith.kinds.metal import ProvisioningState as S
from racksmith.runtime.conditions import ConditionSpec, EventSpec

Handler = Callable[[HostContext], Awaitable[Proposal]]

HANDLERS: dict[S | None, Handler] = {
    None: handle_new,
    S.UNMANAGED: handle_unmanaged,
    S.REGISTERING: handle_registering,
    S.INSPECTING: handle_inspecting,
    S.PREPARING: handle_preparing,
    S.AVAILABLE: handle_available,
    S.PROVISIONING: handle_provisioning,
    S.PROVISIONED: handle_provisioned,
    S.SERVICING: handle_servicing,
    S.EXTERNALLY_PROVISIONED: handle_externally_provisioned,
    S.DEPROVISIONING: handle_deprovisioning,
    S.POWERING_OFF_BEFORE_DELETE: handle_powering_off,
    S.DELETING: handle_deleting,
}


DETACHABLE = frozenset({S.AVAILABLE, S.PROVISIONED, S.EXTERNALLY_PROVISIONED})
"""States a host is detached from at once; in the others (an operation under
way) only with ``{"force": true}``, as Metal3 does: otherwise the
operation finishes first."""


def _detach_now(ctx: HostContext) -> bool:
    if not ctx.detached:
        return False
    if ctx.status.operational_status is OperationalStatus.DETACHED \
            or ctx.state in DETACHABLE or ctx.state is None:
        return True
    args = ann.detach_arguments(ctx.annotations.get(ann.DETACHED, ""))
    return args is not None and args.force


async def decide(ctx: HostContext) -> Proposal:
    """The proposal for this reconcile of ``ctx.host``."""
    if _detach_now(ctx):
        return await handle_detached(ctx)
    if ctx.status.operational_status is OperationalStatus.DETACHED:
        # Re-attached: the backend forgot the host, so the state's handler
        # registers it again (and adopts it if it was provisioned).
        checked = [ConditionSpec.true(RECORD_MATCHES_HARDWARE, "Attached",
                                      "attached again by the operator")] \
            if any(c.type == RECORD_MATCHES_HARDWARE for c in ctx.status.conditions) else []
        return Proposal(
            clear_detached=True,
            requeue_after=0.0,
            conditions=checked,
            events=[EventSpec("Normal", "Attached", "managed by the provisioner again")],
        )
    return await HANDLERS[ctx.state](ctx)
