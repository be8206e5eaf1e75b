"""Which hosts reference which Secrets and profiles, for the secondary watches.

Owns an in-memory reverse index filled by the reconciler on every reconcile
(credentials, user/network/meta data Secrets, ``spec.profile``) and the
mappers the Secret and BareMetalHostProfile sources use to enqueue the
hosts that reference a changed object. A host not yet reconciled is
missing from the index, but the initial list of hosts reconciles it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from racksmith.kinds.metal import BareMetalHost
from racksmith.runtime.keys import ObjectKey, key_of

_Ref = tuple[str, str]  # (namespace, name)


class ReferenceIndex:
    """Secret and profile → hosts (see the module docstring)."""

    def __init__(self) -> None:
        self._secrets = _Reverse()
        self._profiles = _Reverse()

    def record(self, key: ObjectKey, host: BareMetalHost) -> None:
        spec = host.spec
        secrets: set[_Ref] = set()
        if spec.bmc is not None:
            secrets.add((key.namespace, spec.bmc.credentials_name))
        for ref in (spec.user_data, spec.network_data, spec.meta_data):
            if ref is not None:
                secrets.add((ref.namespace or key.namespace, ref.name))
        self._secrets.set(key, secrets)
        self._profiles.set(key, {(key.namespace, spec.profile)} if spec.profile else set())

    def forget(self, key: ObjectKey) -> None:
        self._secrets.set(key, set())
        self._profiles.set(key, set())

    def secret_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for Secrets: the hosts that reference this one."""
        return self._secrets.lookup(key_of(obj))

    def profile_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for BareMetalHostProfiles: the hosts that use this one."""
        return self._profiles.lookup(key_of(obj))


class _Reverse:
    """host → references, and reference → hosts, kept in step."""

    def __init__(self) -> None:
        self._forward: dict[ObjectKey, set[_Ref]] = {}
        self._reverse: dict[_Ref, set[ObjectKey]] = {}

    def set(self, key: ObjectKey, refs: set[_Ref]) -> None:
        for ref in self._forward.pop(key, set()) - refs:
            hosts = self._reverse.get(ref)
            if hosts is not None:
                hosts.discard(key)
                if not hosts:
                    del self._reverse[ref]
        if refs:
            self._forward[key] = refs
        for ref in refs:
            self._reverse.setdefault(ref, set()).add(key)

    def lookup(self, ref: ObjectKey) -> list[ObjectKey]:
        found: Iterable[ObjectKey] = self._reverse.get((ref.namespace, ref.name), ())
        return sorted(found)
