"""Pure IP address management: pools, allocation and overlap.

Owns the arithmetic behind Subnets: parsing and validating a Subnet's cidr,
gateway and include/exclude ranges into a :class:`~racksmith.ipam.ranges.Pool`
(``ranges``), choosing the next free address of a pool (``allocator``) and
finding overlapping subnets (``overlap``). No I/O and no Kubernetes: the
Subnet controller and the claim helpers in ``racksmith.controllers.ipam``
call it with plain values.
"""

from racksmith.ipam.allocator import (
    Allocated,
    Allocator,
    Exhausted,
    free_addresses,
    free_values,
    next_free,
)
from racksmith.ipam.overlap import SubnetCidr, overlapping
from racksmith.ipam.ranges import AddressRange, InvalidSubnet, Pool, Problem, parse_pool

__all__ = [
    "AddressRange",
    "Allocated",
    "Allocator",
    "Exhausted",
    "InvalidSubnet",
    "Pool",
    "Problem",
    "SubnetCidr",
    "free_addresses",
    "free_values",
    "next_free",
    "overlapping",
    "parse_pool",
]
