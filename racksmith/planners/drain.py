"""The one drain rule: which pods a drain evicts. Pure.

Owns ``is_evictable`` (from a pod's owner kinds, annotations and whether it
is terminating) and ``pod_is_evictable`` (the same from a raw pod), as
``kubectl drain --ignore-daemonsets`` decides: a pod owned by a DaemonSet
(its controller would put it straight back), a mirror pod (the kubelet's
static pod, annotated ``kubernetes.io/config.mirror``; evicting it does
nothing) and a pod already terminating are left alone; every other pod is
evicted through the Eviction API, so PodDisruptionBudgets apply. Used by
both drains: the Machine controller's (a Machine being deleted) and the
node maintenance flow's (updates and graceful reboots).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DAEMONSET_KIND = "DaemonSet"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_evictable(owner_kinds: tuple[str, ...], annotations: Mapping[str, str],
                 terminating: bool) -> bool:
    """A pod the drain evicts: not DaemonSet-owned, not a mirror pod, not terminating."""
    return not (terminating or DAEMONSET_KIND in owner_kinds
                or MIRROR_ANNOTATION in annotations)


def owner_kinds(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The kinds of a raw pod's owners."""
    meta = pod.get("metadata") or {}
    return tuple(str(r.get("kind") or "") for r in meta.get("ownerReferences") or []
                 if isinstance(r, Mapping))


def pod_is_evictable(pod: Mapping[str, Any]) -> bool:
    """``is_evictable`` of a raw pod."""
    meta = pod.get("metadata") or {}
    return is_evictable(owner_kinds(pod), meta.get("annotations") or {},
                        bool(meta.get("deletionTimestamp")))
