"""Judging a Subnet: the Subnet controller's pure core.

Owns :func:`judge`: from a Subnet, every subnet in the cluster (for
overlaps) and the addresses of its IPaddr objects, the status it should
show — capacity, allocatable, allocated, messages and the Ready condition
with reason InvalidSpec, Overlapping, Exhausted or Ready — and
:func:`apply_verdict`, which puts it into a status keeping the condition's
transition time when its status is unchanged. Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from racksmith.ipam.overlap import SubnetCidr, overlapping
from racksmith.ipam.ranges import InvalidSubnet, parse_pool
from racksmith.ipamclaims.names import (
    READY,
    REASON_EXHAUSTED,
    REASON_INVALID,
    REASON_OVERLAPPING,
    REASON_READY,
)
from racksmith.kinds.common import Condition, ConditionStatus
from racksmith.kinds.ipam import Subnet, SubnetStatus


@dataclass(frozen=True)
class Verdict:
    """What a Subnet's status should say."""

    ready: bool
    reason: str
    message: str
    capacity: int | None = None
    allocated: int = 0
    allocatable: int | None = None
    messages: list[str] = field(default_factory=list)


def subnet_cidr(subnet: Subnet) -> SubnetCidr:
    """``subnet`` as the overlap check sees it."""
    meta = subnet.metadata
    created = meta.creation_timestamp.isoformat() if meta.creation_timestamp else ""
    spec = subnet.spec
    try:
        parse_pool(spec.cidr, spec.gateway, spec.include_ranges, spec.exclude_ranges)
        valid = True
    except InvalidSubnet:
        valid = False
    return SubnetCidr(meta.namespace or "", meta.name or "", created, spec.cidr, valid)


def judge(subnet: Subnet, everyone: Sequence[SubnetCidr], addresses: Sequence[str]) -> Verdict:
    """The verdict on ``subnet``; ``everyone``: all subnets (it may be among
    them); ``addresses``: of the IPaddr objects of this subnet."""
    spec = subnet.spec
    try:
        pool = parse_pool(spec.cidr, spec.gateway, spec.include_ranges, spec.exclude_ranges)
    except InvalidSubnet as exc:
        problems = [str(p) for p in exc.problems]
        return Verdict(False, REASON_INVALID, "; ".join(problems), allocated=len(addresses),
                       messages=problems)
    inside = {a for a in addresses if pool.contains(a)}
    strays = sorted(set(addresses) - inside)
    messages = []
    if strays:
        shown = ", ".join(strays[:5]) + (" ..." if len(strays) > 5 else "")
        messages.append(f"{len(strays)} IPaddr objects hold addresses outside the "
                        f"allocatable ranges: {shown}")
    capacity = pool.capacity
    older = overlapping(subnet_cidr(subnet), everyone)
    if older:
        names = ", ".join(str(o) for o in older)
        message = (f"spec.cidr {spec.cidr} overlaps the older subnet {names}; "
                   "this subnet is not used for allocation")
        return Verdict(False, REASON_OVERLAPPING, message, capacity, len(inside), 0,
                       [message, *messages])
    free = capacity - len(inside)
    if free <= 0:
        message = f"all {capacity} addresses are allocated"
        return Verdict(False, REASON_EXHAUSTED, message, capacity, len(inside), 0,
                       [message, *messages])
    return Verdict(True, REASON_READY, f"{free} of {capacity} addresses free", capacity,
                   len(inside), free, messages)


def apply_verdict(status: SubnetStatus | None, verdict: Verdict, now: datetime,
                  generation: int | None) -> SubnetStatus:
    """The status showing ``verdict``."""
    previous = next((c for c in (status.conditions if status else []) if c.type == READY), None)
    cond_status = ConditionStatus.TRUE if verdict.ready else ConditionStatus.FALSE
    since = previous.last_transition_time if previous is not None \
        and previous.status == cond_status else now
    ready = Condition(type=READY, status=cond_status, reason=verdict.reason,
                      message=verdict.message, last_transition_time=since,
                      observed_generation=generation)
    others = [c for c in (status.conditions if status else []) if c.type != READY]
    return SubnetStatus(capacity=verdict.capacity, allocatable=verdict.allocatable,
                        allocated=verdict.allocated, messages=verdict.messages,
                        observed_generation=generation, conditions=[*others, ready])
