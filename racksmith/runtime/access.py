"""What a component reads and writes, declared once: the source of its ClusterRole.

Owns :class:`Access` (a set of RBAC PolicyRules built from the resources a
component names) and its builders: :func:`watches` (get, list, watch: what
a source or a cached read needs), :func:`reads` (get, list: live reads),
:func:`writes` (the verbs named, on a resource or one of its subresources)
and :func:`tokens_for` (``serviceaccounts/token`` of named ServiceAccounts).
Each controller declares its ``ACCESS`` next to it, the composition root
turns every declaration into a ServiceAccount, a ClusterRole
``racksmith:controller:<name>`` and its binding (``racksmith.app.identities``),
and the controller runs with that identity: a rule it lacks is a 403 from
the API server (its writes and live reads), or a refused
SelfSubjectAccessReview for what it reads from the shared cache
(:class:`racksmith.runtime.client.Client`, ``verify_cached_reads``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from racksmith.runtime.resource import Resource

READ = ("get", "list", "watch")
LIVE_READ = ("get", "list")


@dataclass(frozen=True, order=True)
class Rule:
    """One PolicyRule over one resource (or subresource) of one API group."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Access:
    """The rules one component needs (a union of the builders below)."""

    rules: frozenset[Rule] = frozenset()

    def __add__(self, other: Access) -> Access:
        return Access(self.rules | other.rules)

    def allows(self, verb: str, resource: Resource, subresource: str = "") -> bool:
        """Does a rule grant ``verb`` on ``resource`` (every name)?"""
        plural = f"{resource.plural}/{subresource}" if subresource else resource.plural
        return any(r.group == resource.group and r.resource == plural and verb in r.verbs
                   and not r.names for r in self.rules)

    def watch_rules(self) -> Access:
        """Only list and watch of what this access watches: what a process's
        shared informers need to serve its components."""
        return Access(frozenset(
            Rule(r.group, r.resource, ("list", "watch")) for r in self.rules
            if {"list", "watch"} <= set(r.verbs) and "/" not in r.resource and not r.names))

    def policy_rules(self) -> list[dict[str, list[str]]]:
        """The ClusterRole's ``rules``: one rule per group, resource names and
        verbs, with the resources sharing them together (stable order)."""
        merged: dict[tuple[str, tuple[str, ...], tuple[str, ...]], set[str]] = {}
        verbs_of: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
        for rule in self.rules:
            verbs_of.setdefault((rule.group, rule.resource, rule.names), set()).update(
                rule.verbs)
        for (group, resource, names), verb_set in verbs_of.items():
            merged.setdefault((group, tuple(sorted(verb_set)), names), set()).add(resource)
        out: list[dict[str, list[str]]] = []
        for (group, verbs, names), resources in sorted(merged.items()):
            policy = {"apiGroups": [group], "resources": sorted(resources),
                      "verbs": list(verbs)}
            if names:
                policy["resourceNames"] = list(names)
            out.append(policy)
        return out


def _rules(resources: Iterable[Resource], verbs: tuple[str, ...], sub: str = "",
           names: tuple[str, ...] = ()) -> Access:
    return Access(frozenset(
        Rule(r.group, f"{r.plural}/{sub}" if sub else r.plural, tuple(sorted(verbs)), names)
        for r in resources))


def watches(*resources: Resource) -> Access:
    """List and watch (a source, a shared-cache read), and get."""
    return _rules(resources, READ)


def reads(*resources: Resource) -> Access:
    """Live reads: get and list."""
    return _rules(resources, LIVE_READ)


def writes(resource: Resource, *verbs: str, subresource: str = "") -> Access:
    """``verbs`` (create, update, patch, delete...) on ``resource`` or its ``subresource``."""
    if not verbs:
        raise ValueError("writes() needs at least one verb")
    return _rules([resource], tuple(verbs), subresource)


def tokens_for(service_account: str) -> Access:
    """Create tokens (TokenRequest) for ServiceAccounts named ``service_account``."""
    return Access(frozenset({Rule("", "serviceaccounts/token", ("create",),
                                  (service_account,))}))


EVENTS = Access(frozenset({Rule("", "events", ("create", "patch", "update"))}))
"""What recording Events takes (runtime.events): every controller has it."""
