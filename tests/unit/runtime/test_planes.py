"""The plane helpers (``racksmith.runtime.planes``): cluster-qualified keys of
cluster-scoped objects, their mappers, and the SharedPlane's one API."""

from __future__ import annotations

from typing import cast

from racksmith.runtime.client import Client
from racksmith.runtime.keys import ObjectKey, self_keys
from racksmith.runtime.planes import (
    ClusterUnavailable,
    SharedPlane,
    in_cluster_key,
    qualified,
    split_key,
    the_cluster,
)

ALPHA = ObjectKey("default", "alpha")
VOLUME = {"metadata": {"name": "data-0"}}


def test_a_key_in_a_cluster_names_the_cluster_and_splits_back() -> None:
    key = in_cluster_key(ALPHA, "data-0")
    assert key == ObjectKey("default/alpha", "data-0")
    assert split_key(key) == (ALPHA, "data-0")


def test_without_a_cluster_the_key_is_the_objects_own() -> None:
    assert in_cluster_key(None, "data-0") == ObjectKey("", "data-0")
    assert split_key(ObjectKey("", "data-0")) == (None, "data-0")


def test_qualified_maps_a_clusters_objects_to_its_keys() -> None:
    client = cast(Client, None)
    assert list(qualified(self_keys)(ALPHA, client)(VOLUME)) == [
        ObjectKey("default/alpha", "data-0")]
    assert list(qualified(self_keys)(None, client)(VOLUME)) == [ObjectKey("", "data-0")]


def test_the_cluster_names_the_cluster_for_any_object() -> None:
    assert list(the_cluster(ALPHA)(VOLUME)) == [ALPHA]


async def test_a_shared_plane_is_the_management_api_for_every_cluster() -> None:
    management = cast(Client, object())
    plane = SharedPlane(management)
    assert not plane.own_apis
    assert await plane.client(ALPHA) is management
    assert await plane.clients() == [(None, management)]
    assert plane.clusters() == []


def test_an_unavailable_cluster_is_a_503_naming_it() -> None:
    exc = ClusterUnavailable(ALPHA)
    assert exc.status == 503 and "default/alpha" in exc.message
