"""The emulated hosts' manifest, applied again after a Machine took a host.

``racksmith up --apply-emulated-hosts`` server-side applies the virtual
datacenter's manifest at every start. The Machine controller sets
``spec.online`` of the host it provisions; the manifest leaves ``online`` to
the server's default, so applying it again at a restart is no conflict
(it used to state ``online: false`` and every restart logged one "--apply
left BareMetalHost … as it is" warning per consumed host).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi

from racksmith.apiserver.server import ApiServer
from racksmith.emulator.datacenter import VirtualDatacenter

pytestmark = pytest.mark.asyncio


async def test_a_restart_applies_the_emulated_hosts_again_without_conflict(
        tmp_path: Path, fresh_api_server: ApiServer, fresh_client: ApiClient) -> None:
    dc = VirtualDatacenter(tmp_path / "data", 2, "", seed=3, hardware="fake")
    try:
        objects = dc.manifest_objects()
    finally:
        await dc.stop()
    hosts = [o for o in objects if o["kind"] == "BareMetalHost"]
    assert len(hosts) == 2
    for obj in objects:
        await fresh_api_server.apply(obj, manager="racksmith-apply", server_side=True)
    custom = CustomObjectsApi(fresh_client)
    name = hosts[0]["metadata"]["name"]
    host = await custom.get_namespaced_custom_object(
        "metal3.io", "v1alpha1", "default", "baremetalhosts", name)
    assert host["spec"]["online"] is False  # the server's default
    # The Machine controller powers the host it provisions on (an Update).
    host["spec"]["online"] = True
    await custom.replace_namespaced_custom_object(
        "metal3.io", "v1alpha1", "default", "baremetalhosts", name, host,
        field_manager="racksmith-machine")
    for obj in objects:  # the restart: no 409
        await fresh_api_server.apply(obj, manager="racksmith-apply", server_side=True)
    host = await custom.get_namespaced_custom_object(
        "metal3.io", "v1alpha1", "default", "baremetalhosts", name)
    assert host["spec"]["online"] is True  # the Machine's value survives
