"""A host agent's access to the management API, made through the runtime Client.

Owns :func:`ensure_host_access` (the host's ServiceAccount, Role and
RoleBinding of :mod:`racksmith.hostcreds`: created when missing, the Role's
rules and the binding's subjects put back when they differ) and
:func:`host_agent_token` (a token of that ServiceAccount bound to the
machine's user-data Secret, given its uid). The Machine controller uses
both when it writes a machine's user data; so do the tools and tests that
run a host agent without it (``bench/volumes.py``, the agent's integration
tests), with :func:`issue_host_token`, which also makes the Secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from racksmith.hostcreds import (
    bound_to_user_data,
    host_objects,
    host_service_account,
    user_data_secret,
)
from racksmith.runtime.client import Client
from racksmith.runtime.errors import AlreadyExists
from racksmith.runtime.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS

__all__ = ["ensure_host_access", "host_agent_token", "issue_host_token"]

_RESOURCES = {"ServiceAccount": SERVICE_ACCOUNTS, "Role": ROLES, "RoleBinding": ROLE_BINDINGS}
_COMPARED = {"Role": "rules", "RoleBinding": "subjects"}


async def ensure_host_access(client: Client, namespace: str, machine: str,
                             metadata: Mapping[str, Any] | None = None) -> None:
    """``machine``'s ServiceAccount, Role and RoleBinding as they should be
    (``metadata``: labels and ownerReferences of new ones)."""
    for body in host_objects(namespace, machine, metadata):
        resource = _RESOURCES[body["kind"]]
        try:
            await client.create(resource, body)
            continue
        except AlreadyExists:
            pass
        compared = _COMPARED.get(body["kind"])
        if compared is None:
            continue
        live = await client.get(resource, namespace, body["metadata"]["name"], live=True)
        if live is not None and live.get(compared) != body[compared]:
            await client.update(resource, {**live, compared: body[compared]})


async def host_agent_token(client: Client, namespace: str, machine: str, secret_uid: str,
                           *, seconds: int | None = None) -> str:
    """A new token of ``machine``'s host agent, bound to its user-data Secret."""
    return await client.request_token(namespace, host_service_account(machine),
                                      seconds=seconds,
                                      bound=bound_to_user_data(machine, secret_uid))


async def issue_host_token(client: Client, namespace: str, machine: str, *,
                           seconds: int | None = None) -> str:
    """Everything a host agent's token needs, then the token: its access
    (:func:`ensure_host_access`), its user-data Secret (empty when made
    here) and a token bound to it."""
    await ensure_host_access(client, namespace, machine)
    name = user_data_secret(machine)
    secret = await client.get(SECRETS, namespace, name, live=True)
    if secret is None:
        secret = await client.create(SECRETS, {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace}})
    return await host_agent_token(client, namespace, machine,
                                  str(secret["metadata"]["uid"]), seconds=seconds)
