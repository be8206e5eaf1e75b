"""Host agents may reach only their own machine's objects (kube's Node
authorizer and NodeRestriction admission, for Racksmith's host agents).

Owns :class:`HostRestriction`, a second line behind RBAC in the embedded
API server only. A host agent authenticates with a token of its own
ServiceAccount ``racksmith-host-<machine>``, bound to the machine's
user-data Secret (:mod:`racksmith.hostcreds`; the Machine controller
requests it and writes it into that Secret). Its rights are plain RBAC — a
Role per host with ``resourceNames`` — so a kube-apiserver, which has no
such restriction, gives it exactly its own host's objects too. Here such a
credential is also a *host identity*
(:class:`racksmith.apiserver.pki.HostIdentity`): it is in the group
``racksmith:agents`` (bound to the ClusterRole ``racksmith:agent``: the
node side, for a host whose kubelet has no cluster credentials yet) and,
before RBAC is asked, this restriction narrows every request to the objects
of that one host. The host's Node (and its Lease) has the machine's name, as
the contracts say (docs/design/cluster-contracts.md). The API server's
``host_restriction`` switch turns it off.

May (everything else is refused with a 403 in kube-apiserver's wording,
ending ``no relationship found between the host agent of LCMMachine NS/NAME
and this object``):

* its LCMMachine: ``get``, and ``list``/``watch`` pinned to it
  (``fieldSelector=metadata.name=NAME``); its ``status``: get, patch, update;
* its Node: create, get, patch, update (and ``nodes/status``), ``list``/
  ``watch`` pinned to it; an agent may not change the Node's
  ``node-role.kubernetes.io/*`` labels or its taints (the Machine controller
  owns them), as NodeRestriction keeps kubelets off their role labels;
* its Lease ``kube-node-lease/NODE``;
* the pods and Volumes bound to its Node: ``list``/``watch`` with
  ``fieldSelector=spec.nodeName=NODE``, and by name (get, ``pods/status``,
  Volume annotations) only when ``spec.nodeName`` is its Node;
* StorageClasses (read), its own self reviews, discovery;
* a new token for itself: ``serviceaccounts/token`` of its own
  ServiceAccount, bound to its own user-data Secret (the agent renews its
  token).

A kubelet's client certificate (user ``system:node:NODE`` in group
``system:nodes``, the cluster CA's; ``racksmith.apiserver.x509auth``) is a
*node identity*: a host identity naming its Node and no LCMMachine, bound
through ``system:nodes`` to the ClusterRole ``system:node`` (the node-side
rules of ``racksmith:agent``). It is narrowed exactly as a host agent is to
its Node, its Lease and the pods and Volumes bound to it, and may reach no
LCMMachine and ask for no token (refusals end ``no relationship found
between node 'NODE' and this object``, kube's Node authorizer's words).

The decision about a named pod or Volume reads that object (``lookup``); an
object that does not exist is left to the request (a 404). Creates and
updates are checked again on the object itself (:meth:`admit`), since a
request path does not carry a created object's name or its labels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from racksmith.apiserver.pki import HostIdentity
from racksmith.apiserver.rbac.rules import Attributes
from racksmith.hostcreds import host_service_account, user_data_secret

Obj = Mapping[str, Any]
Lookup = Callable[[str, str, str, str], Awaitable[Obj | None]]
"""Reads one object: (API group, resource, namespace, name) → the object or None."""

AGENT_GROUP = "racksmith:agents"
"""The group of every host identity (bound to ClusterRole ``racksmith:agent``)."""
NODES_GROUP = "system:nodes"
"""The group of every node identity (bound to ClusterRole ``system:node``)."""
NODE_USER_PREFIX = "system:node:"
"""A node identity's user is ``system:node:<node>``."""
LEASE_NAMESPACE = "kube-node-lease"
ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"

_LCM = ("lcm.racksmith.io", "lcmmachines")
_NODES = ("", "nodes")
_LEASES = ("coordination.k8s.io", "leases")
_PODS = ("", "pods")
_VOLUMES = ("storage.racksmith.io", "volumes")
_BY_NODE = frozenset({_PODS, _VOLUMES})
_READ_ANY = frozenset({("storage.k8s.io", "storageclasses")})
_SELF = frozenset({("authorization.k8s.io", "selfsubjectaccessreviews"),
                   ("authorization.k8s.io", "selfsubjectrulesreviews"),
                   ("authentication.k8s.io", "selfsubjectreviews")})
_READS = frozenset({"get", "list", "watch"})


def no_relationship(host: HostIdentity) -> str:
    """The end of a refusal (kube's Node authorizer says the same of nodes)."""
    if host.kubelet:
        return f"no relationship found between node '{host.node}' and this object"
    return (f"no relationship found between the host agent of LCMMachine "
            f"{host.namespace}/{host.lcm_machine} and this object")


def _who(host: HostIdentity) -> str:
    return "a node" if host.kubelet else "a host agent"


def _pins(field_selector: str, field: str, value: str) -> bool:
    """Does ``field_selector`` require ``field`` to equal ``value``?"""
    for term in field_selector.split(","):
        key, op, rest = term.partition("=")
        if op and key.strip() == field and rest.removeprefix("=").strip() == value:
            return True
    return False


def _node_name(obj: Obj | None) -> str | None:
    spec = (obj or {}).get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, Mapping) else ""


class HostRestriction:
    """The decisions for host identities (see the module docstring)."""

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup

    async def allows(self, host: HostIdentity, attrs: Attributes, field_selector: str) -> bool:
        """May the host agent make this request (RBAC is asked after)?"""
        if not attrs.resource_request:
            return True
        what = (attrs.api_group, attrs.resource)
        verb, sub, name = attrs.verb, attrs.subresource, attrs.name
        if what in _SELF:
            return True
        if what in _READ_ANY:
            return verb in _READS
        if what == _LCM:
            if host.kubelet:
                return False
            return attrs.namespace == host.namespace and name == host.lcm_machine and (
                (sub == "" and verb in _READS) or
                (sub == "status" and verb in ("get", "patch", "update")))
        if what == _NODES:
            if verb == "create" and not name and not sub:
                return True  # its name is checked by admit()
            return name == host.node and sub in ("", "status") and verb in (
                "get", "list", "watch", "patch", "update")
        if what == _LEASES:
            if attrs.namespace != LEASE_NAMESPACE or sub:
                return False
            if verb == "create" and not name:
                return True  # its name is checked by admit()
            return name == host.node and verb in ("get", "patch", "update")
        if what in _BY_NODE:
            if verb in ("list", "watch") and not name:
                return _pins(field_selector, "spec.nodeName", host.node)
            if not name:
                return False
            allowed = {"": ("get", "patch")} if what == _VOLUMES else \
                {"": ("get",), "status": ("get", "patch", "update")}
            if verb not in allowed.get(sub, ()):
                return False
            obj = await self.lookup(what[0], what[1], attrs.namespace, name)
            return obj is None or _node_name(obj) == host.node
        if what == ("", "serviceaccounts"):
            return (not host.kubelet and sub == "token" and verb == "create"
                    and attrs.namespace == host.namespace
                    and name == host_service_account(host.lcm_machine))
        return False

    @staticmethod
    def admit(host: HostIdentity, group: str, plural: str, namespace: str, obj: Obj,
              old: Obj | None) -> str | None:
        """Why the host agent (or node) may not write ``obj`` (None: it may)."""
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        name = str(meta.get("name") or "")
        if (group, plural) == _LEASES and (namespace != LEASE_NAMESPACE or name != host.node):
            return f"{_who(host)} may only write its own Lease {LEASE_NAMESPACE}/{host.node}"
        if (group, plural) != _NODES:
            return None
        if name != host.node:
            return f"{_who(host)} may only write its own Node {host.node}"
        if _roles(obj) != _roles(old) or _taints(obj) != _taints(old):
            return (f"{_who(host)} may not change the {ROLE_LABEL_PREFIX}* labels or the "
                    f"taints of its Node (the Machine controller sets them)")
        return None


def _roles(obj: Obj | None) -> dict[str, Any]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in labels.items() if str(k).startswith(ROLE_LABEL_PREFIX)} \
        if isinstance(labels, Mapping) else {}


def _taints(obj: Obj | None) -> Any:
    spec = (obj or {}).get("spec")
    return (spec.get("taints") or []) if isinstance(spec, Mapping) else []


def bound_token_check(host: HostIdentity, body: Obj) -> str | None:
    """Why a host agent may not ask for this TokenRequest (None: it may): only
    a token bound to its own user-data Secret."""
    spec = body.get("spec") if isinstance(body.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    ref = spec.get("boundObjectRef")
    if host.kubelet:
        return "a node may not request ServiceAccount tokens"
    secret = user_data_secret(host.lcm_machine)
    if not isinstance(ref, Mapping) or ref.get("kind") != "Secret" or \
            ref.get("name") != secret or ref.get("uid") not in (None, "", host.uid):
        return (f"a host agent may only request tokens bound to its own user-data Secret "
                f"{host.namespace}/{secret}")
    return None
