"""The IPAM controllers and the address-claim protocol.

Owns the Subnet controller (``subnet``: validation, overlaps, usage in
status) and the client-side claim helpers (``claims``: claim an address by
creating its IPaddr, release by deleting it) that the IpamHost and machine
controllers use. Talks to the API only through kubernetes_asyncio; the
address arithmetic is ``racksmith.ipam``.
"""

from racksmith.controllers.ipam.claims import (
    Claimed,
    NotClaimed,
    TakenHint,
    claim_address,
    list_ipaddrs,
    release,
)
from racksmith.controllers.ipam.subnet import SubnetReconciler, subnet_controller

__all__ = [
    "Claimed",
    "NotClaimed",
    "SubnetReconciler",
    "TakenHint",
    "claim_address",
    "list_ipaddrs",
    "release",
    "subnet_controller",
]
