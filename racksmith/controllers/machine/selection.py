"""Which BareMetalHost a Machine uses: label selectors and host eligibility.

Owns the pure rules of step 1 of the contracts: a host already naming the
Machine in ``spec.consumerRef`` (uid match) is its host; otherwise a host
is a candidate when it matches ``hostSelector`` (empty matches all), is
``available``, has no consumer, is neither paused nor detached nor being
deleted. Candidates are tried in name order. Called by the planner and,
on the fresh read before a claim, by the executor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from racksmith.kinds.cluster import Machine
from racksmith.kinds.common import LabelSelector, LabelSelectorOperator, ObjectReference
from racksmith.kinds.hostannotations import is_detached, is_paused
from racksmith.kinds.metal import BareMetalHost, ProvisioningState


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``labels`` satisfy every requirement of ``selector`` (None/empty: always)."""
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        value = labels.get(req.key)
        if req.operator is LabelSelectorOperator.IN and not (present and value in req.values):
            return False
        if req.operator is LabelSelectorOperator.NOT_IN and present and value in req.values:
            return False
        if req.operator is LabelSelectorOperator.EXISTS and not present:
            return False
        if req.operator is LabelSelectorOperator.DOES_NOT_EXIST and present:
            return False
    return True


def describe_selector(selector: LabelSelector | None) -> str:
    """``selector`` in kubectl's ``-l`` syntax (``everything`` when empty)."""
    if selector is None:
        return "everything"
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        op = req.operator
        if op is LabelSelectorOperator.EXISTS:
            parts.append(req.key)
        elif op is LabelSelectorOperator.DOES_NOT_EXIST:
            parts.append(f"!{req.key}")
        else:
            word = "in" if op is LabelSelectorOperator.IN else "notin"
            parts.append(f"{req.key} {word} ({','.join(req.values)})")
    return ",".join(parts) or "everything"


def state_of(host: BareMetalHost) -> ProvisioningState | None:
    """The host's provisioning state, if it has one."""
    prov = host.status.provisioning if host.status else None
    return prov.state if prov else None


def is_consumed_by(host: BareMetalHost, machine: Machine) -> bool:
    """``host.spec.consumerRef`` names ``machine`` (kind, namespace, name and uid)."""
    ref = host.spec.consumer_ref
    meta = machine.metadata
    return (
        ref is not None
        and ref.kind == "Machine"
        and ref.name == meta.name
        and ref.namespace in (None, "", meta.namespace)
        and bool(ref.uid)
        and ref.uid == meta.uid
    )


def is_candidate(host: BareMetalHost, machine: Machine) -> bool:
    """``host`` may be claimed by ``machine`` now."""
    meta = host.metadata
    return (
        host.spec.consumer_ref is None
        and meta.deletion_timestamp is None
        and state_of(host) is ProvisioningState.AVAILABLE
        and not is_paused(meta.annotations)
        and not is_detached(meta.annotations)
        and not host.spec.externally_provisioned
        and selector_matches(machine.spec.host_selector, meta.labels)
    )


def may_be_candidate(raw: Mapping[str, Any]) -> bool:
    """A cheap look at a raw BareMetalHost: unclaimed, ``available`` and not
    being deleted — a host that fails this is no candidate for any Machine
    (:func:`is_candidate` decides for the ones that pass)."""
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    return (not (raw.get("spec") or {}).get("consumerRef")
            and not meta.get("deletionTimestamp")
            and ((status.get("provisioning") or {}).get("state")) == "available")


def claimed_host(hosts: Iterable[BareMetalHost], machine: Machine) -> BareMetalHost | None:
    """The host whose consumerRef names ``machine`` (the first by name if, by
    some outside hand, there are several)."""
    mine = sorted((h for h in hosts if is_consumed_by(h, machine)),
                  key=lambda h: h.metadata.name or "")
    return mine[0] if mine else None


def candidates(hosts: Iterable[BareMetalHost], machine: Machine) -> list[str]:
    """Names of the hosts ``machine`` may claim, in the order to try them."""
    return sorted(h.metadata.name or "" for h in hosts if is_candidate(h, machine))


def consumer_ref(machine: Machine) -> ObjectReference:
    """The ``spec.consumerRef`` a claimed host carries."""
    meta = machine.metadata
    return ObjectReference(api_version=Machine.info.api_version, kind="Machine",
                           name=meta.name or "", namespace=meta.namespace, uid=meta.uid)
