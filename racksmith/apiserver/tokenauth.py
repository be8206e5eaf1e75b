"""Who a ServiceAccount token is: the authenticator behind every request that
offers one.

Owns :class:`ServiceAccountAuthenticator`. A token is accepted when
:class:`racksmith.apiserver.satokens.TokenIssuer` verifies it (ours, in its
time window, for our audience), its ServiceAccount exists with the uid the
token names and, for a bound token, the object it is bound to exists with
the uid the token names (deleting either revokes the token). The user is
``system:serviceaccount:NS:NAME`` in ``system:serviceaccounts``,
``system:serviceaccounts:NS`` and ``system:authenticated``. A host agent's
token — ServiceAccount ``racksmith-host-<machine>``, bound to the Secret
``<machine>-user-data`` (:mod:`racksmith.hostcreds`) — is also a host
identity (``user.host``) in the group ``racksmith:agents``, what
kube-apiserver does for kubelets with ``system:nodes``, narrowed by
:mod:`racksmith.apiserver.rbac.hostrestriction` (a second line: its RBAC is
a Role of its own). With ``host_identities`` False (the server's host
restriction switched off) it is a plain ServiceAccount, as on kube.

The existence checks are answered from memory: the uids of the objects
looked at are remembered, and every write of a ServiceAccount, Secret, Pod
or LCMMachine (the service's write hook, :meth:`observe`) updates what is
remembered, so a deletion revokes at once without a store read per request.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.pki import HostIdentity, User
from racksmith.apiserver.rbac.hostrestriction import AGENT_GROUP
from racksmith.apiserver.registry import Registry, ResourceInfo
from racksmith.apiserver.satokens import BOUND_KINDS, TokenIssuer
from racksmith.apiserver.service import ResourceService
from racksmith.apiserver.store.base import Key
from racksmith.hostcreds import machine_of, user_data_secret

Obj = dict[str, Any]
_Ref = tuple[str, str, str, str]  # group, plural, namespace, name
_KINDS = frozenset({("", "serviceaccounts"), *((k.group, k.plural) for k in BOUND_KINDS.values())})
CACHE_SIZE = 8192


class ServiceAccountAuthenticator:
    """See the module docstring."""

    def __init__(self, issuer: TokenIssuer, service: ResourceService,
                 registry: Registry, *, host_identities: bool = True) -> None:
        self.issuer = issuer
        self.host_identities = host_identities
        self.service = service
        self.registry = registry
        self._uids: OrderedDict[_Ref, str | None] = OrderedDict()
        self._writes = 0

    def forget(self) -> None:
        """Drop every remembered uid (the store's history was lost: re-read)."""
        self._uids.clear()

    async def user(self, token: str) -> User | None:
        """The user of ``token``, or None when it is not a valid one."""
        claims = self.issuer.verify(token)
        if claims is None:
            return None
        if await self._uid("", "serviceaccounts", claims.namespace, claims.name) != claims.uid:
            return None
        groups = claims.groups
        host: HostIdentity | None = None
        bound = claims.bound
        if bound is not None:
            kind = bound.kind
            if await self._uid(kind.group, kind.plural,
                               claims.namespace if kind.namespaced else "", bound.name) \
                    != bound.uid:
                return None
            machine = machine_of(claims.name)
            if self.host_identities and machine is not None and kind.kind == "Secret" \
                    and bound.name == user_data_secret(machine):
                host = HostIdentity(claims.namespace, machine, bound.uid)
                groups = (*groups[:-1], AGENT_GROUP, groups[-1])
        return User(name=claims.username, uid=claims.uid, groups=groups, host=host,
                    credential_id=claims.credential_id)

    async def _uid(self, group: str, plural: str, namespace: str, name: str) -> str | None:
        ref = (group, plural, namespace, name)
        if ref in self._uids:
            self._uids.move_to_end(ref)
            return self._uids[ref]
        info = self.registry.resource(group, plural)
        if info is None:
            return None
        writes = self._writes
        try:
            obj = await self.service.get(info, namespace, name)
        except errors.ApiError:
            obj = None
        uid = _live_uid(obj)
        if writes == self._writes:  # no write of these kinds raced the read
            self._remember(ref, uid)
        return uid

    def _remember(self, ref: _Ref, uid: str | None) -> None:
        self._uids[ref] = uid
        self._uids.move_to_end(ref)
        if len(self._uids) > CACHE_SIZE:
            self._uids.popitem(last=False)

    async def observe(self, info: ResourceInfo, key: Key, _old: Obj | None,
                      new: Obj | None) -> None:
        """The service's write hook: keep the remembered uids current."""
        if (info.group, info.plural) not in _KINDS:
            return
        self._writes += 1
        ref = (info.group, info.plural, key.namespace, key.name)
        if ref in self._uids:
            self._uids[ref] = _live_uid(new)


def _live_uid(obj: Obj | None) -> str | None:
    """The uid of ``obj``; None when it is absent or being deleted (a token
    bound to an object whose deletion has begun is revoked)."""
    meta = (obj or {}).get("metadata") or {}
    if obj is None or meta.get("deletionTimestamp"):
        return None
    return str(meta.get("uid") or "")
