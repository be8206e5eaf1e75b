"""Access declarations: the rules they make, and every controller's covering
what it watches (built with recording clients, no server)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from racksmith.app.identities import MANAGER, identity_objects, manager_access
from racksmith.app.runner import ACCESS
from racksmith.controllers import CONTROLLER_ACCESS, ClusterOptions, all_controllers
from racksmith.controllers.backup import backup_controller
from racksmith.emulator.workloads import reference_workloads_controller
from racksmith.runtime.access import EVENTS, Access, reads, tokens_for, watches, writes
from racksmith.runtime.client import Client, Informers
from racksmith.runtime.resources import CONFIG_MAPS, NODES, PODS, SECRETS
from tests.harness.fixture_provisioner import FixtureProvisioner


def test_rules_are_merged_by_verbs_and_sorted() -> None:
    access = (watches(NODES, PODS) + reads(SECRETS) + writes(PODS, "delete")
              + writes(NODES, "patch", subresource="status") + tokens_for("agent"))
    assert access.policy_rules() == [
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
         "resourceNames": ["agent"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    assert access.allows("watch", NODES) and not access.allows("watch", SECRETS)
    assert access.allows("patch", NODES, "status") and not access.allows("patch", NODES)
    assert access.watch_rules().policy_rules() == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}]
    with pytest.raises(ValueError):
        writes(PODS)


def _recording() -> tuple[dict[str, Client], Any]:
    informers = Informers(cast(Any, None))
    clients: dict[str, Client] = {}

    def client_for(name: str) -> Client:
        clients[name] = Client(cast(Any, None), informers=informers, verify_cached_reads=True)
        return clients[name]

    return clients, client_for


def test_every_controller_may_list_and_watch_what_it_reads_from_the_cache() -> None:
    clients, client_for = _recording()
    controllers = all_controllers(None, provisioner=FixtureProvisioner(), ipam=True,
                                  cluster=ClusterOptions(), client_for=client_for)
    controllers.append(reference_workloads_controller(client_for("reference-workloads")))
    controllers.append(backup_controller(client_for("backup"), cast(Any, None)))
    assert {c.name for c in controllers} == set(ACCESS) == set(clients)
    for name, client in clients.items():
        assert client.access is not None
        noted = list(client.access._noted)
        assert noted, name
        for resource, _namespace in noted:
            for verb in ("list", "watch"):
                assert ACCESS[name].allows(verb, resource), f"{name}: {verb} {resource}"


def test_every_controller_records_events_with_its_own_rules() -> None:
    for name, access in CONTROLLER_ACCESS.items():
        if name != "claim-binder":  # records none
            assert EVENTS.rules <= access.rules, name


def test_the_identities_and_the_process_role() -> None:
    objects = identity_objects(ACCESS)
    assert objects[0]["kind"] == "Namespace"
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    assert set(roles) == {"racksmith:controller-manager",
                          *(f"racksmith:controller:{n}" for n in ACCESS)}
    assert roles["racksmith:controller:machine"]["rules"] == ACCESS["machine"].policy_rules()
    accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
    assert accounts == {MANAGER, *(f"{n}-controller" for n in ACCESS)}
    bindings = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert all(b["subjects"][0]["namespace"] == "racksmith-system" for b in bindings)
    # the process itself writes nothing but its Lease and token requests
    manager = manager_access(ACCESS)
    for rule in manager.rules:
        writes_ = set(rule.verbs) - {"get", "list", "watch"}
        assert not writes_ or rule.resource in ("leases", "serviceaccounts/token"), rule
    assert manager.allows("watch", CONFIG_MAPS)  # the reference workloads' ConfigMap
    assert not manager.allows("get", SECRETS) and not manager.allows("watch", SECRETS)
    assert identity_objects(ACCESS) == objects  # stable
    assert Access() + Access() == Access()
