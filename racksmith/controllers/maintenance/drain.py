"""Evicting a node's pods: which pods, when to try again, which budget said no.

Owns ``Drainer``: the eviction back-off bookkeeping per pod
(``MaintenanceTimings``: by default 2 s doubling to 30 s after each 429;
forgotten once the pod is gone or evicted), the pods it evicted (by uid:
one the caches still show as running after its eviction — a watch that
has not caught up, say after an API server restart — is not evicted a
second time; forgotten once the pod is gone), the views of a node's
evictable pods for the planner (with their last refusal and the instant of their next
attempt), and naming the PodDisruptionBudget behind a refusal: from the
429's ``DisruptionBudget`` cause ("The disruption budget <name> needs
..."), else by matching the selectors of the PDBs in the pod's namespace
against the pod's labels. The bookkeeping is in memory: a fresh ``Drainer``
(a restarted controller) simply tries every pod again at once. Each attempt
is an Event about the Node (when given a recorder): ``Evicted`` (Normal) or
``EvictionRefused`` (Warning; a refusal repeated with the same answer only
bumps its count).
Called by ``flow.NodeMaintenance``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from racksmith.controllers.maintenance.events import EVICTED, EVICTION_REFUSED, node_ref
from racksmith.planners.drain import pod_is_evictable
from racksmith.planners.maintenance import (
    MaintenanceTimings,
    PodView,
    Refusal,
    eviction_backoff,
)
from racksmith.runtime.client import Client
from racksmith.runtime.errors import TooManyRequests
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.resources import PDBS, PODS

_BUDGET_NAME = re.compile(r"disruption budget (\S+?)[,:]?\s")


@dataclass
class _Attempts:
    node: str
    count: int
    retry_at: datetime
    refusal: Refusal


class Drainer:
    """Evicts pods with back-off and remembers why they were refused."""

    def __init__(self, timings: MaintenanceTimings,
                 recorder: EventRecorder | None = None) -> None:
        self.timings = timings
        self.recorder = recorder
        self._attempts: dict[tuple[str, str], _Attempts] = {}
        self._uids: dict[tuple[str, str], tuple[str, str]] = {}
        """(node, uid) of each pod as the last ``views`` of its node saw it."""
        self._evicted: dict[tuple[str, str], tuple[str, str]] = {}
        """Pods evicted and not yet gone: key → (node, uid)."""

    def views(self, node: str, pods: Iterable[Mapping[str, Any]]) -> tuple[PodView, ...]:
        """The evictable pods among ``pods`` (raw, all of ``node``), with their back-off
        state; forgets the bookkeeping of the node's pods that are gone."""
        out: list[PodView] = []
        pods = list(pods)
        for pod in pods:
            meta = pod.get("metadata") or {}
            if not pod_is_evictable(pod):
                continue
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            uid = str(meta.get("uid") or "")
            self._uids[key] = (node, uid)
            if key in self._evicted and self._evicted[key][1] == uid:
                continue  # evicted already: its deletion is on the way
            seen = self._attempts.get(key)
            out.append(PodView(key[0], key[1],
                               refusal=seen.refusal if seen else None,
                               retry_at=seen.retry_at if seen else None))
        present = {(p.namespace, p.name) for p in out}
        for key in [k for k, a in self._attempts.items() if a.node == node]:
            if key not in present:
                del self._attempts[key]
        listed = {(str((p.get("metadata") or {}).get("namespace") or ""),
                   str((p.get("metadata") or {}).get("name") or "")) for p in pods}
        for table in (self._evicted, self._uids):
            for key in [k for k, (n, _u) in table.items() if n == node and k not in listed]:
                del table[key]
        return tuple(sorted(out, key=lambda p: (p.namespace, p.name)))

    async def evict(self, client: Client, node: str, pods: Iterable[PodView],
                    now: datetime, recorder: EventRecorder | None = None) -> list[str]:
        """Evict each pod once through ``client`` (inside the node's cluster),
        recording the Events about the Node with ``recorder`` (None: the
        drainer's); returns a line per pod for the log."""
        recorder = recorder if recorder is not None else self.recorder
        done: list[str] = []
        for pod in pods:
            key = (pod.namespace, pod.name)
            refused = await client.evict(pod.namespace, pod.name)
            if refused is None:
                self._attempts.pop(key, None)
                self._evicted[key] = (node, self._uids.get(key, (node, ""))[1])
                done.append(f"evicted {pod.namespace}/{pod.name}")
                await _event(recorder, node, "Normal", EVICTED,
                                  f"evicted pod {pod.namespace}/{pod.name}")
                continue
            refusal = await self.name_budget(client, pod.namespace, pod.name, refused)
            count = (self._attempts[key].count if key in self._attempts else 0) + 1
            retry_at = now + timedelta(seconds=eviction_backoff(count, self.timings))
            self._attempts[key] = _Attempts(node, count, retry_at, refusal)
            done.append(f"eviction of {pod.namespace}/{pod.name} refused: {refusal.reason}")
            budget = f" (PodDisruptionBudget {pod.namespace}/{refusal.pdb})" if refusal.pdb else ""
            await _event(recorder, node, "Warning", EVICTION_REFUSED,
                              f"eviction of pod {pod.namespace}/{pod.name} refused{budget}: "
                              f"{refusal.reason}")
        return done

    async def name_budget(self, client: Client, namespace: str, pod: str,
                          refused: TooManyRequests) -> Refusal:
        """The refusal with the PodDisruptionBudget named when it can be found."""
        budget_causes = [c.message for c in refused.causes
                         if c.reason == "DisruptionBudget" and c.message]
        reason = budget_causes[0] if budget_causes else (
            next((c.message for c in refused.causes if c.message), None)
            or refused.message or refused.reason or str(refused.status))
        for text in (*budget_causes, refused.message):
            found = _BUDGET_NAME.search(text + " ")
            if found:
                return Refusal(reason, found.group(1))
        raw = await client.get(PODS, namespace, pod)
        labels = ((raw or {}).get("metadata") or {}).get("labels") or {}
        for pdb in await client.list(PDBS, namespace):
            selector = (pdb.get("spec") or {}).get("selector")
            if selector and selector_matches(selector, labels):
                return Refusal(reason, str((pdb.get("metadata") or {}).get("name")))
        return Refusal(reason)


async def _event(recorder: EventRecorder | None, node: str, type_: str, reason: str,
                 message: str) -> None:
    if recorder is not None:
        await recorder.record(node_ref(node), type_, reason, message)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A (non-empty) label selector matches ``labels``; an empty one matches nothing,
    as for PodDisruptionBudgets."""
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for expr in expressions:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
