"""The review APIs: answered from the authorizer at once, never stored.

Owns :func:`review`: the replies to ``POST`` of

* ``authorization.k8s.io/v1`` SelfSubjectAccessReview (``kubectl auth
  can-i VERB RESOURCE``), SubjectAccessReview and LocalSubjectAccessReview
  (may *someone* do it: needs ``create`` on those, like any request) and
  SelfSubjectRulesReview (``kubectl auth can-i --list``: every rule that
  applies to the caller in a namespace);
* ``authentication.k8s.io/v1`` (and ``v1beta1``, for kubectl 1.27)
  SelfSubjectReview (``kubectl auth whoami``): the caller's user info.

Malformed bodies get a 422 with the field path, as any create.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.rbac.authorizer import PRIVILEGED_GROUP, Authorizer, Subject
from racksmith.apiserver.rbac.rules import Attributes, Rule

Obj = dict[str, Any]

AUTHZ = "authorization.k8s.io"
AUTHN = "authentication.k8s.io"


def _str(spec: Mapping[str, Any], key: str) -> str:
    value = spec.get(key)
    return value if isinstance(value, str) else ""


def _attributes(kind: str, spec: Mapping[str, Any], namespace: str) -> Attributes:
    res = spec.get("resourceAttributes")
    non = spec.get("nonResourceAttributes")
    if isinstance(res, Mapping) and not isinstance(non, Mapping):
        ns = namespace or _str(res, "namespace")
        if kind == "LocalSubjectAccessReview" and _str(res, "namespace") not in ("", namespace):
            raise errors.invalid(kind, "", [Cause(
                "spec.resourceAttributes.namespace",
                f"Invalid value: {_str(res, 'namespace')!r}: must match metadata.namespace")],
                group=AUTHZ)
        return Attributes(verb=_str(res, "verb"), api_group=_str(res, "group"),
                          api_version=_str(res, "version"), resource=_str(res, "resource"),
                          subresource=_str(res, "subresource"), namespace=ns,
                          name=_str(res, "name"))
    if isinstance(non, Mapping) and not isinstance(res, Mapping):
        return Attributes(verb=_str(non, "verb"), resource_request=False,
                          path=_str(non, "path"))
    raise errors.invalid(kind, "", [Cause(
        "spec.resourceAttributes", "Invalid value: exactly one of nonResourceAttributes "
        "and resourceAttributes must be specified")], group=AUTHZ)


def _resource_rules(rules: Sequence[Rule]) -> tuple[list[Obj], list[Obj]]:
    resource: list[Obj] = []
    non_resource: list[Obj] = []
    for rule in rules:
        verbs = list(rule.get("verbs") or [])
        if rule.get("nonResourceURLs"):
            entry = {"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])}
            if entry not in non_resource:
                non_resource.append(entry)
        if rule.get("resources") or rule.get("apiGroups"):
            out: Obj = {"verbs": verbs, "apiGroups": list(rule.get("apiGroups") or []),
                        "resources": list(rule.get("resources") or [])}
            if rule.get("resourceNames"):
                out["resourceNames"] = list(rule["resourceNames"])
            if out not in resource:
                resource.append(out)
    return resource, non_resource


def review(authorizer: Authorizer, info_group: str, version: str, kind: str, namespace: str,
           body: Any, user: Subject, uid: str = "") -> Obj:
    """The reply (status filled in) to a review ``body`` POSTed by ``user``; the
    body's envelope (apiVersion, kind, metadata) was checked by the caller."""
    if not isinstance(body, Mapping):
        raise errors.bad_request(f"the body of a {kind} must be an object")
    out: Obj = {"apiVersion": f"{info_group}/{version}", "kind": kind,
                "metadata": {"creationTimestamp": None, **(
                    {"namespace": namespace} if namespace else {})}}
    spec = body.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if kind == "SelfSubjectReview":
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if uid:
            info["uid"] = uid
        if user.host is not None and user.host.extra():
            info["extra"] = user.host.extra()
        out["status"] = {"userInfo": info}
        return out
    out["spec"] = dict(spec)
    if kind == "SelfSubjectRulesReview":
        ns = _str(spec, "namespace")
        if user.privileged:
            rules: Sequence[Rule] = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                     {"verbs": ["*"], "nonResourceURLs": ["*"]}]
        else:
            rules = authorizer.rules_for(user, ns)
        resource, non_resource = _resource_rules(rules)
        out["status"] = {"resourceRules": resource, "nonResourceRules": non_resource,
                         "incomplete": False}
        return out
    subject = user
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        name = _str(spec, "user")
        groups = spec.get("groups") or []
        if not name and not groups:
            raise errors.invalid(kind, "", [Cause(
                "spec.user", "Invalid value: at least one of user or group must be specified")],
                group=AUTHZ)
        subject = Subject(name, tuple(g for g in groups if isinstance(g, str)))
    attrs = _attributes(kind, spec, namespace)
    allowed = authorizer.authorize(subject, attrs)
    status: Obj = {"allowed": allowed}
    if allowed:
        status["reason"] = ("allowed: member of " + PRIVILEGED_GROUP if subject.privileged
                            else "RBAC: allowed by a binding of the subject")
    out["status"] = status
    return out
