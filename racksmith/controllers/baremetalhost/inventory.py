"""The host's BareMetalHostInventory: created owned by its host, status written.

Owns ``upsert_inventory``, the committer's one write of a
BareMetalHostInventory (same name and namespace as its host, controller
owner reference to it, ``spec.hostRef``; the hardware in its status),
through the runtime ``Client``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racksmith.kinds.metal import GROUP, BareMetalHost
from racksmith.runtime.client import Client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.resources import INVENTORIES

VERSION = BareMetalHost.info.version


async def upsert_inventory(
    client: Client, host: dict[str, Any], hardware: dict[str, Any], inspected_at: datetime,
    source: str,
) -> None:
    """Create or update the inventory of ``host`` (as read) with ``hardware``.

    May be called repeatedly: the name is the host's, so a second create
    answers ``AlreadyExists`` and the existing object is read (live: the
    cache may not have seen the first create yet) and updated. The status
    write carries the resourceVersion read (``Conflict`` escapes: the
    reconcile is retried); an inventory deleted meanwhile is left alone.
    """
    meta = host["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = {"hardware": hardware, "inspectedAt": _time(inspected_at), "source": source}
    current = await client.get(INVENTORIES, namespace, name)
    if current is None:
        try:
            current = await client.create(INVENTORIES, _body(namespace, name, meta["uid"]))
        except AlreadyExists:
            current = await client.get(INVENTORIES, namespace, name, live=True)
            if current is None:
                return
    current["status"] = status
    try:
        await client.update_status(INVENTORIES, current)
    except NotFound:
        return


def _body(namespace: str, name: str, uid: str) -> dict[str, Any]:
    api_version = f"{GROUP}/{VERSION}"
    return {
        "apiVersion": api_version,
        "kind": "BareMetalHostInventory",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{
                "apiVersion": api_version, "kind": "BareMetalHost",
                "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": {"hostRef": {"name": name}},
    }


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
