"""A host agent's credentials: their names and its Role (racksmith.hostcreds)."""

from __future__ import annotations

from racksmith.hostcreds import (
    bound_to_user_data,
    host_objects,
    host_role_rules,
    host_service_account,
    machine_of,
    user_data_secret,
)


def test_names_tie_a_host_to_its_machine() -> None:
    assert host_service_account("m1") == "racksmith-host-m1"
    assert machine_of("racksmith-host-m1") == "m1"
    assert machine_of("racksmith-agent") is None and machine_of("racksmith-host-") is None
    assert user_data_secret("m1") == "m1-user-data"
    assert bound_to_user_data("m1", "u-1") == {"kind": "Secret", "apiVersion": "v1",
                                               "name": "m1-user-data", "uid": "u-1"}


def test_the_role_names_only_the_machines_own_objects() -> None:
    rules = host_role_rules("m1")
    assert all(r["resourceNames"] for r in rules)  # never a kind-wide grant
    assert {(r["resources"][0], tuple(r["resourceNames"])) for r in rules} == {
        ("lcmmachines", ("m1",)), ("lcmmachines/status", ("m1",)),
        ("serviceaccounts/token", ("racksmith-host-m1",))}
    assert not any("secrets" in r["resources"] or "*" in r["verbs"] for r in rules)


def test_the_objects_carry_the_given_metadata_and_bind_the_role_to_the_account() -> None:
    owner = {"ownerReferences": [{"kind": "Machine", "name": "m1", "uid": "x"}],
             "labels": {"a": "b"}}
    account, role, binding = host_objects("ns", "m1", owner)
    assert [o["kind"] for o in (account, role, binding)] == [
        "ServiceAccount", "Role", "RoleBinding"]
    for obj in (account, role, binding):
        assert obj["metadata"]["name"] == "racksmith-host-m1"
        assert obj["metadata"]["namespace"] == "ns"
        assert obj["metadata"]["ownerReferences"] == owner["ownerReferences"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "racksmith-host-m1",
                                    "namespace": "ns"}]
    account["metadata"]["labels"]["c"] = "d"  # each object its own copy
    assert "c" not in role["metadata"]["labels"] and "c" not in owner["labels"]
