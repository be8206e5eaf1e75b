"""Kubernetes RBAC for the embedded API server.

Owns authorization: what a request asks (``requestinfo``), the rule algebra
(``rules``: does a PolicyRule allow a request, does one set of rules cover
another), the in-memory index of Roles, ClusterRoles and their bindings that
answers "may this user do this" (``authorizer``), the built-in roles
(``bootstrap``) and the review APIs (``reviews``: SelfSubjectAccessReview,
SubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview). The
semantics are kube-apiserver's RBAC authorizer's; see docs/access.md.
"""
