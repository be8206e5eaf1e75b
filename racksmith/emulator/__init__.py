"""The virtual datacenter: emulated servers for development, demos and tests.

Owns the emulated hardware (``inventory``), the Redfish BMCs (``redfish``,
running sushy-tools with ``sushy_ext``), the emulated ramdisk agent
(``agent``), the image server (``images``) and the composition of them all
(``datacenter``). Ironic drives these hosts exactly as it drives real ones.

This package module imports nothing on purpose: ``sushy_launcher`` runs in
Ironic's own virtualenv, which lacks Racksmith's dependencies.
"""
