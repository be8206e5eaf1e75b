"""Running and talking to a standalone Ironic (config, process, REST client).

Nothing here knows about BareMetalHosts: :mod:`racksmith.provisioner.ironic`
builds on these pieces and translates Ironic's world into the Provisioner
contract.
"""
