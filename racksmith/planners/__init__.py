"""Pure planners: functions from declared intent and observed facts to a plan.

Owns computations that need no I/O (no API calls, no clock), so controllers
can call them on every reconcile and tests can drive them exhaustively:
``disklayout`` (BareMetalHostProfile and inspected hardware → rendered layout).
Imports only ``racksmith.kinds``.
"""
