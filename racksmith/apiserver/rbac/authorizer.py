"""The RBAC authorizer: Roles, ClusterRoles and bindings in memory, and the decision.

Owns :class:`Authorizer`: an index of the four rbac.authorization.k8s.io
kinds, loaded from the store at start and kept current by the service's
write hook (:meth:`Authorizer.observe`), which answers

* :meth:`authorize`: may ``user`` do ``attrs``? Members of ``system:masters``
  may do everything (kube-apiserver's privileged group); everyone else gets
  what the rules of their bindings grant: every ClusterRoleBinding naming
  them, and the RoleBindings of the request's namespace naming them (a
  RoleBinding may refer to a ClusterRole: its rules then apply in that
  namespace only). Nothing is denied explicitly: no rule, no access.
* :meth:`rules_for`: every rule that applies to ``user`` in ``namespace``
  (SelfSubjectRulesReview, the escalation check).

ClusterRoles with an ``aggregationRule`` are the union of the rules of the
ClusterRoles their selectors pick (transitively), computed here on read
rather than written back into the object by a controller: ``kubectl get
clusterrole admin -o yaml`` shows the selectors, ``kubectl auth can-i
--list`` the rules. A binding to a role that does not exist grants nothing.

Answers are cached per (user, groups, namespace) and dropped on any RBAC
write, so a request costs a dictionary look-up and a scan of its rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from racksmith.apiserver.pki import HostIdentity
from racksmith.apiserver.rbac.rules import Attributes, Rule, rule_allows, subject_matches
from racksmith.apiserver.selectors import LabelSelector, SelectorError

Obj = Mapping[str, Any]

PRIVILEGED_GROUP = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"

ROLES, CLUSTER_ROLES = "roles", "clusterroles"
ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS = "rolebindings", "clusterrolebindings"
KINDS = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)


@dataclass(frozen=True, slots=True)
class Subject:
    """Who asks: a user name and its groups (``host``: the host a host agent's
    credential is bound to, for the host restriction's admission check)."""

    name: str
    groups: tuple[str, ...] = ()
    host: HostIdentity | None = None

    @property
    def privileged(self) -> bool:
        return PRIVILEGED_GROUP in self.groups


def _rules_of(obj: Obj | None) -> list[Rule]:
    rules = (obj or {}).get("rules") or []
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


class Authorizer:
    """The RBAC index and decisions (see the module docstring)."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in KINDS}
        self._cache: dict[tuple[str, tuple[str, ...], str], tuple[Rule, ...]] = {}
        self.generation = 0

    # ---- the index ---------------------------------------------------------------

    def observe(self, plural: str, namespace: str, name: str, obj: Obj | None) -> None:
        """Record a write: ``obj`` is the object as stored now (None: deleted)."""
        table = self._objects.get(plural)
        if table is None:
            return
        if obj is None:
            table.pop((namespace, name), None)
        else:
            table[(namespace, name)] = obj
        self._cache.clear()
        self.generation += 1

    def replace(self, plural: str, objs: Iterable[Obj]) -> None:
        """Index exactly ``objs`` for ``plural`` (what was indexed before and
        is not among them is dropped): a reload from the store."""
        table = self._objects.get(plural)
        if table is not None:
            table.clear()
            self._cache.clear()
            self.generation += 1
        self.load(plural, objs)

    def load(self, plural: str, objs: Iterable[Obj]) -> None:
        for obj in objs:
            meta = obj.get("metadata") or {}
            self.observe(plural, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                         obj)

    def cluster_role(self, name: str) -> Obj | None:
        return self._objects[CLUSTER_ROLES].get(("", name))

    def cluster_role_rules(self, name: str) -> list[Rule]:
        """The rules of ClusterRole ``name``, aggregation resolved."""
        return self._cluster_role_rules(name, set())

    def _cluster_role_rules(self, name: str, seen: set[str]) -> list[Rule]:
        if name in seen:
            return []
        seen.add(name)
        role = self.cluster_role(name)
        if role is None:
            return []
        aggregation = role.get("aggregationRule")
        if not isinstance(aggregation, Mapping):
            return _rules_of(role)
        selectors: list[LabelSelector] = []
        for raw in aggregation.get("clusterRoleSelectors") or []:
            try:
                sel = LabelSelector.from_dict(raw if isinstance(raw, dict) else None)
            except SelectorError:
                continue
            if not sel.is_null and not sel.is_empty:
                selectors.append(sel)
        rules: list[Rule] = []
        for (_, other), obj in sorted(self._objects[CLUSTER_ROLES].items()):
            if other == name:
                continue
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if any(s.matches(labels) for s in selectors):
                for rule in self._cluster_role_rules(other, seen):
                    if rule not in rules:
                        rules.append(rule)
        return rules

    def role_rules(self, kind: str, name: str, namespace: str) -> list[Rule]:
        """The rules a roleRef of ``kind`` (Role or ClusterRole) names."""
        if kind == "ClusterRole":
            return self.cluster_role_rules(name)
        if kind == "Role" and namespace:
            return _rules_of(self._objects[ROLES].get((namespace, name)))
        return []

    # ---- decisions ---------------------------------------------------------------

    def rules_for(self, subject: Subject, namespace: str) -> tuple[Rule, ...]:
        """Every rule granted to ``subject`` in ``namespace`` ("" = cluster-wide only)."""
        key = (subject.name, subject.groups, namespace)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rules: list[Rule] = []
        for (_, _name), binding in self._objects[CLUSTER_ROLE_BINDINGS].items():
            if self._binds(binding, subject, ""):
                ref = binding.get("roleRef") or {}
                if ref.get("kind") == "ClusterRole":
                    rules.extend(self.cluster_role_rules(str(ref.get("name") or "")))
        if namespace:
            for (ns, _name), binding in self._objects[ROLE_BINDINGS].items():
                if ns == namespace and self._binds(binding, subject, ns):
                    ref = binding.get("roleRef") or {}
                    rules.extend(self.role_rules(str(ref.get("kind") or ""),
                                                 str(ref.get("name") or ""), ns))
        out = tuple(rules)
        self._cache[key] = out
        return out

    @staticmethod
    def _binds(binding: Obj, subject: Subject, namespace: str) -> bool:
        subjects = binding.get("subjects") or []
        return isinstance(subjects, list) and any(
            isinstance(s, Mapping) and subject_matches(s, subject.name, subject.groups, namespace)
            for s in subjects)

    def authorize(self, subject: Subject, attrs: Attributes) -> bool:
        """May ``subject`` do ``attrs``?"""
        if subject.privileged:
            return True
        return any(rule_allows(r, attrs) for r in self.rules_for(subject, attrs.namespace))
