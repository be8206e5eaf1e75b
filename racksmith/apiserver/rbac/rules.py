"""The RBAC rule algebra: pure functions over PolicyRules, no I/O.

Owns :class:`Attributes` (what one request asks: a verb on a resource, or on
a non-resource path), :func:`rule_allows` (kube's ``RuleAllows``: does one
PolicyRule grant it), :func:`covers` (kube's ``Covers``: does a set of rules
grant at least everything another rule grants — the escalation check) and
:func:`subject_matches` (does a binding's subject name this user).

Matching follows kube-apiserver exactly: ``*`` matches any verb, group,
resource or path; a rule resource ``*/status`` matches the ``status``
subresource of every resource; empty ``resourceNames`` matches every name,
a non-empty list matches only requests that name one of them (a list or a
create names nothing, so it never matches); a non-resource rule ``/apis/*``
matches every path under ``/apis/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Rule = Mapping[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request as the authorizer sees it (kube's ``authorizer.Attributes``)."""

    verb: str
    resource_request: bool = True
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _strings(rule: Rule, key: str) -> Sequence[str]:
    value = rule.get(key) or ()
    return [v for v in value if isinstance(v, str)] if isinstance(value, list | tuple) else ()


def _has(values: Sequence[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_matches(rule_resources: Sequence[str], attrs: Attributes) -> bool:
    combined = attrs.combined_resource
    for res in rule_resources:
        if res == "*" or res == combined:
            return True
        if attrs.subresource and res == f"*/{attrs.subresource}":
            return True
    return False


def _path_matches(rule_paths: Sequence[str], path: str) -> bool:
    for p in rule_paths:
        if p == "*" or p == path:
            return True
        if p.endswith("*") and path.startswith(p[:-1]):
            return True
    return False


def rule_allows(rule: Rule, attrs: Attributes) -> bool:
    """Does ``rule`` grant the request ``attrs``?"""
    if not _has(_strings(rule, "verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _path_matches(_strings(rule, "nonResourceURLs"), attrs.path)
    if not _has(_strings(rule, "apiGroups"), attrs.api_group):
        return False
    if not _resource_matches(_strings(rule, "resources"), attrs):
        return False
    names = _strings(rule, "resourceNames")
    return not names or attrs.name in names


def _covers_one(owner: Rule, verb: str, group: str, resource: str, name: str) -> bool:
    """Does ``owner`` grant ``verb`` on ``group/resource`` (named ``name``, or
    every name when empty)? A wildcard asked for is covered only by a wildcard."""
    if not _has(_strings(owner, "verbs"), verb):
        return False
    if not _has(_strings(owner, "apiGroups"), group):
        return False
    resources = _strings(owner, "resources")
    if not _has(resources, resource):
        sub = resource.partition("/")[2]
        if not (sub and f"*/{sub}" in resources):
            return False
    names = _strings(owner, "resourceNames")
    return not names or (bool(name) and name in names)


def _covers_path(owner: Rule, verb: str, path: str) -> bool:
    if not _has(_strings(owner, "verbs"), verb):
        return False
    for p in _strings(owner, "nonResourceURLs"):
        if p == "*" or p == path or (p.endswith("*") and path.startswith(p[:-1])):
            return True
    return False


def uncovered(owner_rules: Sequence[Rule], rule: Rule) -> list[str]:
    """What of ``rule`` no rule of ``owner_rules`` grants (empty: covered), each
    as ``verb group/resource[/name]`` or ``verb path``."""
    missing: list[str] = []
    verbs = _strings(rule, "verbs")
    for verb in verbs:
        for path in _strings(rule, "nonResourceURLs"):
            if not any(_covers_path(o, verb, path) for o in owner_rules):
                missing.append(f"{verb} {path}")
        for group in _strings(rule, "apiGroups"):
            for resource in _strings(rule, "resources"):
                for name in _strings(rule, "resourceNames") or [""]:
                    if not any(_covers_one(o, verb, group, resource, name) for o in owner_rules):
                        what = f"{group}/{resource}" if group else resource
                        missing.append(f"{verb} {what}" + (f" {name!r}" if name else ""))
    return missing


def covers(owner_rules: Sequence[Rule], rules: Iterable[Rule]) -> list[str]:
    """Everything of ``rules`` that ``owner_rules`` do not grant (empty: covered)."""
    out: list[str] = []
    for rule in rules:
        out.extend(uncovered(owner_rules, rule))
    return out


def subject_matches(subject: Mapping[str, Any], user: str, groups: Sequence[str],
                    binding_namespace: str) -> bool:
    """Does a binding's ``subject`` name ``user`` (with ``groups``)?"""
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return bool(ns) and user == f"{SA_PREFIX}{ns}:{name}"
    return False


def describe(attrs: Attributes, user: str) -> str:
    """kube-apiserver's wording of a denial (without the ``... is forbidden:`` head)."""
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    where = (f'in the namespace "{attrs.namespace}"' if attrs.namespace
             else "at the cluster scope")
    return (f'User "{user}" cannot {attrs.verb} resource "{attrs.combined_resource}" '
            f'in API group "{attrs.api_group}" {where}')
