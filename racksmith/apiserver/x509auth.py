"""Client certificates as kube-apiserver's x509 authenticator reads them.

Owns :func:`user_of` (the user a verified certificate names: the
subject's CN is the user, each O a group, plus ``system:authenticated``).
The serving TLS context that asks for a client certificate and verifies it
against ``--client-ca-file`` is ``pki.server_ssl_context``. Only a
certificate the TLS layer verified against the client CA reaches
:func:`user_of`: a certificate from another
CA fails the handshake, as on kube-apiserver.

This is what lets ``racksmith apiserver`` stand in for a cluster's
kube-apiserver with the cluster's PKI (``--client-ca-file``,
``--tls-cert-file``, ``--tls-private-key-file``): the cluster's admin
kubeconfig (a client certificate in ``system:masters``) and the
management plane's controllers (certificates of their own) work against it
unchanged.

A kubelet's certificate (CN ``system:node:<node>``, O ``system:nodes``, as
kubeadm issues ``kubelet-client-current.pem``) is also a *node identity*
(``user.host``, :meth:`racksmith.apiserver.pki.HostIdentity.of_node`): the
ClusterRole ``system:node`` (bound to ``system:nodes``) names its kinds and
verbs, and the host restriction narrows it to its own Node, Lease, pods and
Volumes, as kube's Node authorizer and NodeRestriction do for kubelets.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver.pki import HostIdentity, User
from racksmith.apiserver.rbac.hostrestriction import NODE_USER_PREFIX, NODES_GROUP

AUTHENTICATED = "system:authenticated"


def node_of(name: str, groups: tuple[str, ...] | list[str]) -> str | None:
    """The node a user named ``name`` in ``groups`` is the kubelet of (None:
    not a node identity): both the ``system:node:`` prefix and the group
    ``system:nodes`` are needed, as kube's Node authorizer requires."""
    node = name.removeprefix(NODE_USER_PREFIX)
    if node != name and node and NODES_GROUP in groups:
        return node
    return None


def user_of(peercert: Any) -> User | None:
    """The user of a verified client certificate (``SSLSocket.getpeercert()``
    form); None when there is none or it names no CN."""
    if not isinstance(peercert, dict) or not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName" and not name:
                name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    if not name:
        return None
    serial = str(peercert.get("serialNumber", ""))
    node = node_of(name, groups)
    return User(name=name, uid="", groups=(*groups, AUTHENTICATED),
                host=HostIdentity.of_node(node) if node is not None else None,
                credential_id=f"X509SHA256={serial}" if serial else "")
