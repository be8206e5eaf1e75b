"""Which L2Template an IpamHost renders, and whether a template change may
reach it: the pure decisions of the IpamHost and L2Template controllers.

Owns :func:`choose_template` (``spec.l2TemplateRef``; else the Machine's
``l2TemplateSelector``, which must match exactly one template; else the
cluster's default template), :func:`matches` (Kubernetes label-selector
semantics) and the template-change confirmation rule
(:func:`awaits_confirmation`): a host rendered from an older generation of
the template it still uses is re-rendered only once the template carries
``ipam.racksmith.io/confirm-generation: "<its generation>"``. Pure: the
callers read the objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from racksmith.controllers.ipamhost.names import (
    CONFIRM_GENERATION,
    REASON_AMBIGUOUS_TEMPLATE,
    REASON_NO_TEMPLATE,
    REASON_TEMPLATE_NOT_FOUND,
    RENDERED_GENERATION,
)
from racksmith.kinds.cluster import Machine
from racksmith.kinds.common import LabelSelector, LabelSelectorOperator
from racksmith.kinds.ipam import IpamHost, IpamHostState, L2Template


@dataclass(frozen=True)
class NoTemplate:
    """No template can be chosen: the host's state, condition reason and message."""

    state: IpamHostState
    reason: str
    message: str


def matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (an empty selector matches all)."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        value = labels.get(req.key)
        if req.operator == LabelSelectorOperator.IN and not (present and value in req.values):
            return False
        if req.operator == LabelSelectorOperator.NOT_IN and present and value in req.values:
            return False
        if req.operator == LabelSelectorOperator.EXISTS and not present:
            return False
        if req.operator == LabelSelectorOperator.DOES_NOT_EXIST and present:
            return False
    return True


def is_empty(selector: LabelSelector | None) -> bool:
    """True when ``selector`` is absent or selects nothing in particular."""
    return selector is None or (not selector.match_labels and not selector.match_expressions)


def describe(selector: LabelSelector) -> str:
    """``selector`` in kubectl's ``-l`` syntax, for messages."""
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        if req.operator in (LabelSelectorOperator.IN, LabelSelectorOperator.NOT_IN):
            word = "in" if req.operator == LabelSelectorOperator.IN else "notin"
            parts.append(f"{req.key} {word} ({','.join(req.values)})")
        elif req.operator == LabelSelectorOperator.EXISTS:
            parts.append(req.key)
        else:
            parts.append(f"!{req.key}")
    return ",".join(parts)


def choose_template(
    host: IpamHost, machine: Machine | None, templates: Sequence[L2Template]
) -> L2Template | NoTemplate:
    """The template ``host`` renders, from ``templates`` (all of its namespace).

    ``machine`` is the host's Machine (None when it is missing: then only
    ``spec.l2TemplateRef`` or a default template without ``clusterRef`` can
    apply). Several defaults for one cluster: one with that exact
    ``clusterRef`` wins over one without; a tie is an error.
    """
    by_name = {t.metadata.name: t for t in templates}
    ref = host.spec.l2_template_ref
    if ref:
        found = by_name.get(ref)
        if found is None:
            return NoTemplate(IpamHostState.PENDING, REASON_TEMPLATE_NOT_FOUND,
                              f"L2Template {ref} (spec.l2TemplateRef) was not found")
        return found
    selector = machine.spec.l2_template_selector if machine is not None else None
    if selector is not None and not is_empty(selector):
        picked = sorted((t for t in templates if matches(selector, t.metadata.labels or {})),
                        key=lambda t: t.metadata.name or "")
        if len(picked) == 1:
            return picked[0]
        text = describe(selector)
        if not picked:
            return NoTemplate(IpamHostState.ERROR, REASON_TEMPLATE_NOT_FOUND,
                              f"no L2Template matches the Machine's l2TemplateSelector {text}")
        names = ", ".join(t.metadata.name or "" for t in picked)
        return NoTemplate(IpamHostState.ERROR, REASON_AMBIGUOUS_TEMPLATE,
                          f"{len(picked)} L2Templates match the Machine's "
                          f"l2TemplateSelector {text}: {names}; exactly one must")
    cluster = machine.spec.cluster_name if machine is not None else None
    defaults = [t for t in templates
                if t.spec.default and t.spec.cluster_ref in (None, "", cluster)]
    exact = [t for t in defaults if cluster and t.spec.cluster_ref == cluster]
    candidates = sorted(exact or defaults, key=lambda t: t.metadata.name or "")
    if len(candidates) == 1:
        return candidates[0]
    where = f"cluster {cluster}" if cluster else "machines without a cluster"
    if not candidates:
        return NoTemplate(IpamHostState.PENDING, REASON_NO_TEMPLATE,
                          f"no L2Template to render: no spec.l2TemplateRef, no "
                          f"l2TemplateSelector on the Machine and no default template for {where}")
    names = ", ".join(t.metadata.name or "" for t in candidates)
    return NoTemplate(IpamHostState.ERROR, REASON_AMBIGUOUS_TEMPLATE,
                      f"several default L2Templates for {where}: {names}; keep one")


def rendered_generation(host: IpamHost) -> int | None:
    """The template generation ``host`` was last rendered from (its annotation)."""
    text = (host.metadata.annotations or {}).get(RENDERED_GENERATION)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def is_confirmed(template: L2Template) -> bool:
    """The template carries the confirmation for its current generation."""
    confirm = (template.metadata.annotations or {}).get(CONFIRM_GENERATION)
    return confirm is not None and confirm.strip() == str(template.metadata.generation)


def is_outdated(host: IpamHost, template: L2Template) -> bool:
    """``host`` was rendered from an older generation of ``template``.

    A host never rendered, or rendered from another template, is not
    outdated: its first render of this template needs no confirmation.
    """
    status = host.status
    generation = rendered_generation(host)
    if generation is None or status is None or status.l2_template_ref != template.metadata.name:
        return False
    return generation != template.metadata.generation


def awaits_confirmation(host: IpamHost, template: L2Template) -> bool:
    """``host`` must keep its old render until the change of ``template`` is confirmed."""
    return is_outdated(host, template) and not is_confirmed(template)


def confirmation_hint(template: L2Template) -> str:
    """The exact annotation that confirms ``template``'s current generation."""
    return f'{CONFIRM_GENERATION}: "{template.metadata.generation}"'
