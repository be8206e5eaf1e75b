"""The address-claim protocol: claiming and releasing IPaddrs through the API.

Owns the client side of IPAM that more than one controller uses: ``claims``
(claim an address by creating its IPaddr, release it by deleting it, list
the IPaddrs of a subnet or an owner) and ``names`` (IPAM's field manager,
the IPaddr labels and naming rule, the Subnet's Ready reasons). The Subnet
controller (``racksmith.controllers.ipam``) and the IpamHost controller
(``racksmith.controllers.ipamhost``) both import it; it imports no
controller. Talks to the API only through the runtime's Client
(``racksmith.runtime.client``: reads from the shared informers where a
stale read is harmless, live where it is not; one error model); the address
arithmetic is ``racksmith.ipam`` (pure), the resources are
``racksmith.runtime.resources``.
"""

from racksmith.ipamclaims.claims import (
    Claimed,
    NotClaimed,
    TakenHint,
    claim_address,
    list_ipaddrs,
    release,
)

__all__ = [
    "Claimed",
    "NotClaimed",
    "TakenHint",
    "claim_address",
    "list_ipaddrs",
    "release",
]
