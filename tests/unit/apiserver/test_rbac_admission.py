"""RBAC writes: binding validation (422 with the field) and escalation prevention (403)."""

from __future__ import annotations

from typing import Any

import pytest

from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.rbac.admission import RbacAdmission
from racksmith.apiserver.rbac.authorizer import Authorizer, Subject
from racksmith.apiserver.rbac.bootstrap import bootstrap_objects

Obj = dict[str, Any]
LEAD = Subject("lead", ("system:authenticated",))
G = "rbac.authorization.k8s.io"


def admission() -> RbacAdmission:
    a = Authorizer()
    for obj in bootstrap_objects():
        a.load("clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings", [obj])
    a.observe("rolebindings", "team", "lead-admin", {
        "metadata": {"name": "lead-admin", "namespace": "team"},
        "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "name": "lead"}]})
    return RbacAdmission(a)


def rb(role: str, kind: str = "ClusterRole", subjects: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": "b", "namespace": "team"},
            "roleRef": {"apiGroup": G, "kind": kind, "name": role},
            "subjects": subjects if subjects is not None else [{"kind": "User", "name": "x"}]}


def refused(check: Any, code: int) -> str:
    with pytest.raises(ApiError) as err:
        check()
    assert err.value.code == code
    return str(err.value.to_status()["message"])


def test_bindings_are_validated_for_everyone() -> None:
    adm = admission()
    msg = refused(lambda: adm.check("clusterrolebindings", "ClusterRoleBinding", "",
                                    rb("view", kind="Role"), None, None), 422)
    assert "roleRef.kind" in msg
    msg = refused(lambda: adm.check("rolebindings", "RoleBinding", "team",
                                    rb("view", subjects=[{"kind": "Robot", "name": "r"}]),
                                    None, None), 422)
    assert "subjects[0].kind" in msg
    msg = refused(lambda: adm.check("rolebindings", "RoleBinding", "team", rb("edit"),
                                    rb("view"), None), 422)
    assert "cannot change roleRef" in msg
    msg = refused(lambda: adm.check("clusterrolebindings", "ClusterRoleBinding", "",
                                    rb("view", subjects=[{"kind": "ServiceAccount",
                                                          "name": "ci"}]), None, None), 422)
    assert "subjects[0].namespace" in msg


def test_a_namespace_admin_grants_what_it_holds_and_nothing_more() -> None:
    adm = admission()
    adm.check("rolebindings", "RoleBinding", "team", rb("view"), None, LEAD)
    adm.check("rolebindings", "RoleBinding", "team", rb("no-such-role"), None, LEAD)
    msg = refused(lambda: adm.check("rolebindings", "RoleBinding", "team",
                                    rb("cluster-admin"), None, LEAD), 403)
    assert "is attempting to grant RBAC permissions not currently held" in msg
    wide = {"metadata": {"name": "wide", "namespace": "team"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    refused(lambda: adm.check("roles", "Role", "team", wide, None, LEAD), 403)
    # in another namespace the lead holds nothing
    refused(lambda: adm.check("rolebindings", "RoleBinding", "other", rb("view"), None, LEAD),
            403)


def test_escalate_and_bind_verbs_lift_the_check() -> None:
    adm = admission()
    adm.authorizer.observe("clusterroles", "", "binder", {"metadata": {"name": "binder"},
        "rules": [{"apiGroups": [G], "resources": ["clusterroles"], "verbs": ["bind"],
                   "resourceNames": ["cluster-admin"]}]})
    adm.authorizer.observe("rolebindings", "team", "lead-binder", {
        "metadata": {"name": "lead-binder", "namespace": "team"},
        "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "binder"},
        "subjects": [{"kind": "User", "name": "lead"}]})
    adm.check("rolebindings", "RoleBinding", "team", rb("cluster-admin"), None, LEAD)
    # an aggregationRule needs escalate
    agg = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"a": "b"}}]}}
    refused(lambda: adm.check("clusterroles", "ClusterRole", "", agg, None, LEAD), 403)
