"""The host's hardware records: its BareMetalHostInventory (Racksmith's) and
its HardwareData (Metal3's), both named as the host and owned by it.

Owns ``upsert_inventory`` (the hardware in the inventory's status, with
``spec.hostRef``) and ``upsert_hardware_data`` (the hardware in the
HardwareData's spec, as Metal3 writes it), through the runtime ``Client``.
Linked to the host by name; the owner reference (controller, the host's
UID) only lets the host's deletion take them along.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racksmith.kinds.metal import GROUP, METAL3_GROUP, BareMetalHost, HardwareData
from racksmith.runtime.client import Client
from racksmith.runtime.errors import AlreadyExists, NotFound
from racksmith.runtime.resources import HARDWARE_DATA, INVENTORIES

VERSION = BareMetalHost.info.version
HOST_API_VERSION = f"{METAL3_GROUP}/{VERSION}"


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


async def upsert_hardware_data(client: Client, host: dict[str, Any],
                               hardware: dict[str, Any]) -> bool:
    """Create the HardwareData of ``host`` (as read) with ``hardware``, or
    update it when it holds other details. True when something was written.
    Repeatable, as ``upsert_inventory``; ``Conflict`` escapes."""
    meta = host["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    current = await client.get(HARDWARE_DATA, namespace, name)
    if current is None:
        try:
            await client.create(HARDWARE_DATA, {
                "apiVersion": HardwareData.info.api_version, "kind": "HardwareData",
                "metadata": {"name": name, "namespace": namespace,
                             "ownerReferences": [_owner(name, meta["uid"])]},
                "spec": {"hardware": hardware}})
            return True
        except AlreadyExists:
            current = await client.get(HARDWARE_DATA, namespace, name, live=True)
            if current is None:
                return False
    if (current.get("spec") or {}).get("hardware") == hardware:
        return False
    current["spec"] = {**(current.get("spec") or {}), "hardware": hardware}
    try:
        await client.update(HARDWARE_DATA, current)
    except NotFound:
        return False
    return True


def _owner(name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": HOST_API_VERSION, "kind": "BareMetalHost", "name": name, "uid": uid,
            "controller": True, "blockOwnerDeletion": True}


def _body(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BareMetalHostInventory",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [_owner(name, uid)],
        },
        "spec": {"hostRef": {"name": name}},
    }


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
