"""What an HTTP request asks for, in RBAC's terms: pure, no registry.

Owns :func:`request_attributes`, kube-apiserver's ``RequestInfoFactory``:
``/api/v1/...`` and ``/apis/<group>/<version>/...`` paths with at least a
resource are resource requests (verb from the method: GET of a name →
``get``, of a collection → ``list``, or ``watch`` with ``watch=true``;
POST → ``create``; PUT → ``update``; PATCH → ``patch``; DELETE of a name →
``delete``, of a collection → ``deletecollection``); everything else
(``/api``, ``/apis/<group>``, ``/version``, ``/metrics``...) is a
non-resource request with the lower-cased method's verb (``get``, ``post``...).
"""

from __future__ import annotations

from collections.abc import Mapping

from racksmith.apiserver.rbac.rules import Attributes

_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
                 "PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The RBAC attributes of ``method path?query``."""
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    non_resource = Attributes(verb=method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method, method.lower())
    if rest and rest[0] == "watch":  # the deprecated /watch/ path form
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    # /api/v1/namespaces/<ns>[/status]: the Namespace itself, "in" its own
    # namespace (as kube-apiserver sees it)
    if not name:
        if verb == "get":
            verb = "watch" if query.get("watch", "") in _TRUE else "list"
            selector = query.get("fieldSelector", "")
            for term in selector.split(","):
                key, _, value = term.partition("=")
                if key.strip() == "metadata.name" and value and not value.startswith("="):
                    name = value.strip()
        elif verb == "delete":
            verb = "deletecollection"
    return Attributes(verb=verb, api_group=group, api_version=version, resource=resource,
                      subresource=subresource, namespace=namespace, name=name, path=path)
