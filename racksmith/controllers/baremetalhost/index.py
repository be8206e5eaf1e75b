"""Which hosts reference which Secrets and profiles, for the secondary watches.

Owns two indexes of the shared BareMetalHost informer (``SECRET_INDEX``:
the credentials and user/network/meta data Secrets a host names,
``PROFILE_INDEX``: its profile annotation; values ``namespace/name``) and the
mappers the Secret and BareMetalHostProfile sources use to enqueue the
hosts that reference a changed object. The informer keeps the indexes in
step with every host it sees, reconciled or not; the mappers read them
synchronously (``Client.indexed``) and answer nothing until it has synced,
when the initial list of hosts reconciles every host anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from racksmith.kinds import hostannotations as ann
from racksmith.runtime.client import Client
from racksmith.runtime.keys import ObjectKey, key_of
from racksmith.runtime.resources import HOSTS

SECRET_INDEX = "baremetalhost:secrets"
PROFILE_INDEX = "baremetalhost:profile"


def ref(namespace: str, name: str) -> str:
    """The index value of the object ``namespace/name``."""
    return f"{namespace}/{name}"


def secret_refs(obj: Mapping[str, Any]) -> list[str]:
    """Index values of a host: the Secrets it references (BMC credentials in
    its own namespace; user/network/meta data where their reference says)."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    spec = obj.get("spec") or {}
    refs: set[str] = set()
    bmc = spec.get("bmc")
    if isinstance(bmc, Mapping) and bmc.get("credentialsName"):
        refs.add(ref(namespace, str(bmc["credentialsName"])))
    for field in ("userData", "networkData", "metaData"):
        secret = spec.get(field)
        if isinstance(secret, Mapping) and secret.get("name"):
            refs.add(ref(str(secret.get("namespace") or namespace), str(secret["name"])))
    return sorted(refs)


def profile_refs(obj: Mapping[str, Any]) -> list[str]:
    """Index values of a host: the BareMetalHostProfile it names, if any."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    profile = ((obj.get("metadata") or {}).get("annotations") or {}).get(ann.PROFILE)
    return [ref(namespace, str(profile))] if profile else []


class HostReferences:
    """The indexes and mappers (see the module docstring) over ``client``'s
    host informer for ``namespace`` (None: all namespaces)."""

    def __init__(self, client: Client, namespace: str | None = None) -> None:
        self.client = client
        self.namespace = namespace or None
        # The index goes on the informer the controller's host source runs
        # and on the cluster-wide one, which answers lookups when it serves.
        for scope in {None, self.namespace}:
            client.add_index(HOSTS, SECRET_INDEX, secret_refs, namespace=scope)
            client.add_index(HOSTS, PROFILE_INDEX, profile_refs, namespace=scope)

    def secret_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for Secrets: the hosts that reference this one."""
        return self._hosts(SECRET_INDEX, obj)

    def profile_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Mapper for BareMetalHostProfiles: the hosts that use this one."""
        return self._hosts(PROFILE_INDEX, obj)

    def _hosts(self, index: str, obj: Mapping[str, Any]) -> list[ObjectKey]:
        key = key_of(obj)
        found = self.client.indexed(HOSTS, index, ref(key.namespace, key.name), self.namespace)
        return sorted(key_of(host) for host in found)
