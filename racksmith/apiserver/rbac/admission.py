"""What the API server checks before it stores an RBAC object.

Owns :class:`RbacAdmission`, called by the resource service before every
create and update of a Role, ClusterRole, RoleBinding or ClusterRoleBinding:

* **validation** (422 with the field path): a binding's ``roleRef`` names
  a ``Role`` or ``ClusterRole`` (a ClusterRoleBinding only a ClusterRole) of
  ``rbac.authorization.k8s.io`` and never changes on update; subjects are
  ``User``, ``Group`` or ``ServiceAccount`` (a ServiceAccount of a
  ClusterRoleBinding names its namespace);
* **escalation prevention** (403, as kube-apiserver): a role may only grant
  what its author holds (in the role's namespace, or cluster-wide for a
  ClusterRole) unless the author may ``escalate`` it; a ClusterRole's
  ``aggregationRule`` needs ``escalate``; a binding may only grant a role
  whose rules the author holds unless the author may ``bind`` it. Members of
  ``system:masters`` and the server itself (no user: bootstrap) pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.rbac.authorizer import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    Authorizer,
    Subject,
)
from racksmith.apiserver.rbac.rules import RBAC_GROUP, Attributes, Rule, covers

Obj = Mapping[str, Any]
_SUBJECT_KINDS = ("User", "Group", "ServiceAccount")


def _validate_binding(plural: str, obj: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), Mapping) else {}
    assert isinstance(ref, Mapping)
    allowed = ("ClusterRole",) if plural == CLUSTER_ROLE_BINDINGS else ("Role", "ClusterRole")
    if ref.get("kind") not in allowed:
        causes.append(Cause("roleRef.kind", f"Unsupported value: {ref.get('kind')!r}: "
                            f"supported values: {', '.join(repr(a) for a in allowed)}",
                            "FieldValueNotSupported"))
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(Cause("roleRef.apiGroup", f"Unsupported value: {ref.get('apiGroup')!r}: "
                            f"supported values: {RBAC_GROUP!r}", "FieldValueNotSupported"))
    if not ref.get("name"):
        causes.append(Cause("roleRef.name", "Required value", "FieldValueRequired"))
    if old is not None and old.get("roleRef") != obj.get("roleRef"):
        causes.append(Cause("roleRef", "Invalid value: cannot change roleRef"))
    for i, subject in enumerate(obj.get("subjects") or []):
        where = f"subjects[{i}]"
        if not isinstance(subject, Mapping):
            continue
        if subject.get("kind") not in _SUBJECT_KINDS:
            causes.append(Cause(f"{where}.kind", f"Unsupported value: {subject.get('kind')!r}: "
                                'supported values: "User", "Group", "ServiceAccount"',
                                "FieldValueNotSupported"))
        if (subject.get("kind") == "ServiceAccount" and plural == CLUSTER_ROLE_BINDINGS
                and not subject.get("namespace")):
            causes.append(Cause(f"{where}.namespace", "Required value", "FieldValueRequired"))
    return causes


def _rules(obj: Obj) -> list[Rule]:
    rules = obj.get("rules") or []
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


class RbacAdmission:
    """Validation and escalation checks of RBAC writes (see the module docstring)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def check(self, plural: str, kind: str, namespace: str, obj: Obj, old: Obj | None,
              user: Subject | None) -> None:
        """Raise a 422 or 403 ApiError if ``obj`` may not be stored."""
        if plural not in (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
            return
        name = str((obj.get("metadata") or {}).get("name") or "")
        if plural in (ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
            causes = _validate_binding(plural, obj, old)
            if causes:
                raise errors.invalid(kind, name, causes, group=RBAC_GROUP)
        if user is None or user.privileged:
            return
        if plural in (ROLES, CLUSTER_ROLES):
            self._check_role(plural, namespace, name, obj, user)
        else:
            self._check_binding(plural, namespace, name, obj, user)

    def _may(self, user: Subject, verb: str, resource: str, namespace: str, name: str) -> bool:
        return self.authorizer.authorize(user, Attributes(
            verb=verb, api_group=RBAC_GROUP, api_version="v1", resource=resource,
            namespace=namespace, name=name))

    def _check_role(self, plural: str, namespace: str, name: str, obj: Obj,
                    user: Subject) -> None:
        if self._may(user, "escalate", plural, namespace, name):
            return
        if plural == CLUSTER_ROLES and obj.get("aggregationRule"):
            self._forbid(plural, name, user, ["an aggregationRule (needs escalate)"])
        missing = covers(self.authorizer.rules_for(user, namespace), _rules(obj))
        if missing:
            self._forbid(plural, name, user, missing)

    def _check_binding(self, plural: str, namespace: str, name: str, obj: Obj,
                       user: Subject) -> None:
        ref = obj.get("roleRef") or {}
        ref_kind, ref_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        ref_plural = CLUSTER_ROLES if ref_kind == "ClusterRole" else ROLES
        # asked in the binding's namespace (cluster scope for a ClusterRoleBinding), as
        # kube-apiserver does: a RoleBinding may grant `bind` on a ClusterRole in one namespace
        if self._may(user, "bind", ref_plural, namespace, ref_name):
            return
        rules = self.authorizer.role_rules(ref_kind, ref_name, namespace)
        missing = covers(self.authorizer.rules_for(user, namespace), rules)
        if missing:
            self._forbid(plural, name, user, missing)

    @staticmethod
    def _forbid(plural: str, name: str, user: Subject, missing: Sequence[str]) -> None:
        shown = "; ".join(missing[:20]) + (f"; and {len(missing) - 20} more"
                                             if len(missing) > 20 else "")
        raise errors.forbidden(
            f'{plural}.{RBAC_GROUP} "{name}" is forbidden: user "{user.name}" (groups='
            f'{list(user.groups)}) is attempting to grant RBAC permissions not currently '
            f"held: {shown}", kind=plural, name=name, group=RBAC_GROUP)
