"""The IPAM (Subnet) controller.

Owns the Subnet controller (``subnet``: validation, overlaps, usage in
status; its pure core is ``verdict``, the Events a change of verdict is
worth ``events``). The claim protocol it shares with the
IpamHost controller (claim an address by creating its IPaddr, release by
deleting it) is ``racksmith.ipamclaims``; the address arithmetic is
``racksmith.ipam``.
"""

from racksmith.controllers.ipam.subnet import SubnetReconciler, subnet_controller

__all__ = [
    "SubnetReconciler",
    "subnet_controller",
]
