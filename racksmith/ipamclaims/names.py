"""Names of the address-claim protocol, shared by the Subnet controller, the
claim helpers and the controllers that claim addresses.

Owns IPAM's field manager, the labels that tie an IPaddr to its Subnet and
to its holder, the IPaddr naming rule (subnet + address, so the API
server's unique names make a claim atomic) and the Subnet's Ready condition
reasons (which the claim helpers read to refuse a subnet). The Subnet and
IPaddr resources are in ``racksmith.runtime.resources``. Pure.
"""

from __future__ import annotations

FIELD_MANAGER = "racksmith-ipam"

SUBNET_LABEL = "ipam.racksmith.io/subnet"
"""On every IPaddr: the name of its Subnet (same namespace)."""
OWNER_KIND_LABEL = "ipam.racksmith.io/owner-kind"
OWNER_NAME_LABEL = "ipam.racksmith.io/owner-name"
"""On an IPaddr: kind and name of its holder (when they fit in a label value)."""

READY = "Ready"
REASON_READY = "Ready"
REASON_INVALID = "InvalidSpec"
REASON_OVERLAPPING = "Overlapping"
REASON_EXHAUSTED = "Exhausted"
REASON_NOT_VALIDATED = "NotValidated"
"""Not a condition reason: a claim refused because no controller has judged
the subnet's current spec yet."""


def ipaddr_name(subnet: str, address: str) -> str:
    """The IPaddr name for ``address`` of ``subnet``: ``<subnet>-10-0-0-5``
    (IPv6: ``<subnet>-fd00--5``). One name per (subnet, address)."""
    return f"{subnet}-{address.lower().replace('.', '-').replace(':', '-')}"


def label_value(text: str) -> str | None:
    """``text`` if it is a valid label value, else None."""
    if len(text) > 63:
        return None
    ok = all(c.isalnum() or c in "-_." for c in text)
    edges = not text or (text[0].isalnum() and text[-1].isalnum())
    return text if ok and edges else None
