"""The shared resource constants: Racksmith's are the kinds catalogue's
collections (group, served version, plural), each named once."""

from __future__ import annotations

from racksmith.kinds.registry import ALL_KINDS
from racksmith.runtime import resources
from racksmith.runtime.source import Resource

CONSTANTS = {name: value for name, value in vars(resources).items()
             if isinstance(value, Resource)}
CATALOGUE = {(k.info.group, k.info.version, k.info.plural) for k in ALL_KINDS}


def test_every_racksmith_resource_is_a_kind_of_the_catalogue() -> None:
    for name, res in CONSTANTS.items():
        if res.group.endswith(".racksmith.io"):
            assert (res.group, res.version, res.plural) in CATALOGUE, name


def test_one_constant_per_collection() -> None:
    assert len(set(CONSTANTS.values())) == len(CONSTANTS)
    assert sorted(CONSTANTS) == sorted(n for n in resources.__all__ if n.isupper())


def test_paths() -> None:
    assert resources.MACHINES.path("ns") == (
        "/apis/cluster.racksmith.io/v1alpha1/namespaces/ns/machines")
    assert resources.NODES.path() == "/api/v1/nodes"
