"""Pure planners: functions from declared intent and observed facts to a plan.

Owns computations that need no I/O (no API calls, no clock), so controllers
can call them on every reconcile and tests can drive them exhaustively:
``disklayout`` (BareMetalHostProfile and inspected hardware → rendered layout),
``roles`` (Machine roles → node labels and taints, the MetalK8s rules),
``netplan`` (L2Template + host NICs + allocations → netplan v2, in a jinja2
sandbox) and ``release`` (ClusterRelease with roles and cluster → the ordered,
hashed state items of an LCMMachine).
Imports only ``racksmith.kinds``.
"""
