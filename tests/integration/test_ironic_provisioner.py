"""IronicProvisioner against a real standalone Ironic started by the test.

One Ironic per module (temp data dir, free port, stopped by process group in
teardown); hosts use ``fake://`` BMCs (fake-hardware: every step instant).
Calls are repeated the way a controller would, bounded by a call count, and
Ironic's provision actions are counted through the client to prove that
repeated calls never start anything twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from racksmith.ironic.client import IronicClient
from racksmith.ironic.config import IronicSettings
from racksmith.ironic.process import IronicProcess, default_bin_dir
from racksmith.provisioner.base import (
    BackendUnavailable,
    BMCAccess,
    ErrorKind,
    HostIdentity,
    ImageSpec,
    ProvisionRequest,
    Result,
)
from racksmith.provisioner.ironic import IronicProvisioner

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not (default_bin_dir() / "ironic").exists(),
                       reason="Ironic venv missing: run `make install`"),
]

PASSWORD = "s3cr3t-Pa55word"  # a test secret that must never leak
MAX_CALLS = 100


def settings_for(data_dir: Path, *, deploy_iso: str | None = None) -> IronicSettings:
    """Port 0: IronicProcess picks a port and proves the listener is its own."""
    return IronicSettings(
        data_dir=data_dir, port=0, http_url="http://127.0.0.1:9",
        http_root=data_dir / "http", deploy_iso=deploy_iso, ipmi=False,
        sync_power_state_interval=600)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ironic(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[IronicProcess]:
    proc = IronicProcess(settings_for(tmp_path_factory.mktemp("ironic")))
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def client(ironic: IronicProcess) -> AsyncIterator[IronicClient]:
    async with IronicClient(ironic.url) as c:
        yield c


@pytest.fixture
def provisioner(client: IronicClient, ironic: IronicProcess) -> IronicProvisioner:
    return IronicProvisioner(client, ironic.settings)


def host(name: str) -> HostIdentity:
    return HostIdentity(namespace="metal", name=name, uid=f"uid-{name}")


def fake_bmc(mac: str = "52:54:00:00:00:01", address: str = "fake://rack1/h1") -> BMCAccess:
    return BMCAccess(address=address, username="admin", password=PASSWORD,
                     boot_mac_address=mac)


REQUEST = ProvisionRequest(
    image=ImageSpec(url="http://127.0.0.1:9/images/os.qcow2", checksum="ab" * 32,
                    checksum_type="sha256", disk_format="qcow2"),
    user_data="#cloud-config\n", network_data={"links": []},
    meta_data={"local-hostname": "h1"}, root_device_hints={"name": "/dev/sda"})


async def until_done(call: Callable[[], Awaitable[Result]]) -> Result:
    """Call like a controller would until done or an error (bounded)."""
    for _ in range(MAX_CALLS):
        result = await call()
        if result.done or result.error:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"not done after {MAX_CALLS} calls: {result}")


async def register(p: IronicProvisioner, h: HostIdentity, bmc: BMCAccess) -> Result:
    async def call() -> Result:
        return (await p.register(h, bmc, credentials_changed=False)).result
    return await until_done(call)


async def nodes_named(client: IronicClient, name: str) -> int:
    return sum(1 for n in await client.list_nodes(fields=["name"]) if n.get("name") == name)


async def test_full_lifecycle_and_idempotency(provisioner: IronicProvisioner,
                                              client: IronicClient) -> None:
    h = host("lifecycle")
    name = h.node_name
    bmc = fake_bmc()

    assert (await register(provisioner, h, bmc)).done
    for _ in range(3):  # repeated calls: nothing new
        reg = await provisioner.register(h, bmc, credentials_changed=False)
        assert reg.result.done and not reg.result.dirty
        assert reg.provisioner_id is not None
    assert await nodes_named(client, name) == 1
    ports = await client.list_ports(name)
    assert [p["address"] for p in ports] == ["52:54:00:00:00:01"]

    async def inspect() -> Result:
        return (await provisioner.inspect(h)).result
    assert (await until_done(inspect)).done
    inspected = await provisioner.inspect(h)
    assert inspected.result.done and inspected.hardware is not None
    assert [n.mac for n in inspected.hardware.nics] == ["52:54:00:00:00:01"]

    assert (await until_done(lambda: provisioner.prepare(h, clean=False))).done
    assert (await provisioner.prepare(h)).done

    assert (await until_done(lambda: provisioner.provision(h, REQUEST))).done
    for _ in range(3):
        assert (await provisioner.provision(h, REQUEST)).done
    node = await client.get_node(name)
    assert node is not None and node["provision_state"] == "active"
    info = node["instance_info"]
    assert info["image_source"] == REQUEST.image.url
    assert info["image_os_hash_algo"] == "sha256"
    assert info["root_device"] == {"name": "/dev/sda"}

    assert (await until_done(lambda: provisioner.power(h, False))).done
    assert await provisioner.power_state(h) is False
    assert (await until_done(lambda: provisioner.power(h, True))).done
    assert await provisioner.power_state(h) is True

    assert (await until_done(lambda: provisioner.deprovision(h, clean=True))).done
    assert (await provisioner.deprovision(h, clean=True)).done
    node = await client.get_node(name)
    assert node is not None and node["provision_state"] == "available"
    assert node["automated_clean"] is True

    assert (await until_done(lambda: provisioner.delete(h))).done
    assert await client.get_node(name) is None
    assert (await provisioner.delete(h)).done  # absent is fine

    actions = {target: n for (node_name, target), n in client.provision_actions.items()
               if node_name == name}
    assert actions == {"manage": 1, "inspect": 1, "provide": 1, "active": 1, "deleted": 1}
    assert client.calls[name] > 0


async def test_repeated_provision_calls_deploy_once(provisioner: IronicProvisioner,
                                                    client: IronicClient) -> None:
    h = host("once")
    await register(provisioner, h, fake_bmc("52:54:00:00:00:02"))
    assert (await until_done(lambda: provisioner.prepare(h))).done
    for _ in range(10):  # back-to-back calls while Ironic deploys
        assert (await provisioner.provision(h, REQUEST)).error is None
    assert (await until_done(lambda: provisioner.provision(h, REQUEST))).done
    assert client.provision_actions[(h.node_name, "active")] == 1
    assert (await until_done(lambda: provisioner.delete(h))).done


@pytest.mark.parametrize(("address", "needle"), [
    ("192.168.1.10", "'ipmi'"),  # Metal3: a bare host is IPMI (disabled here)
    ("ilo4://10.0.0.1", "'ilo4'"),
    ("gopher://10.0.0.1", "'gopher'"),
    ("idrac-virtualmedia://10.0.0.1/redfish/v1/Systems/1", "deploy ISO"),
    ("redfish://", "no host"),
    ("redfish://host:99999", "port"),
    ("ipmi://10.0.0.1", "'ipmi'"),
    ("redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1", "deploy ISO"),
])
async def test_bad_addresses_create_no_node(provisioner: IronicProvisioner,
                                            client: IronicClient,
                                            address: str, needle: str) -> None:
    h = host("bad-address")
    reg = await provisioner.register(h, fake_bmc(address=address), credentials_changed=False)
    assert reg.result.error_kind is ErrorKind.REGISTRATION
    assert reg.result.error is not None and needle in reg.result.error
    assert PASSWORD not in reg.result.error
    assert reg.provisioner_id is None
    assert await client.get_node(h.node_name) is None


@pytest.mark.parametrize(("scheme", "driver", "boot", "management"), [
    ("redfish+http", "redfish", "redfish-virtual-media", "redfish"),
    ("ilo5-redfish+http", "redfish", "redfish-virtual-media", "redfish"),
    ("idrac-redfish+http", "idrac", "idrac-redfish-virtual-media", "idrac-redfish"),
])
async def test_refused_credentials_are_a_registration_error_without_secrets(
        provisioner: IronicProvisioner, client: IronicClient, scheme: str, driver: str,
        boot: str, management: str) -> None:
    """Against a BMC that refuses every request: the node is enrolled with
    the hardware type and interfaces the scheme means (Ironic accepts them:
    they are enabled), and management fails without a secret in the error."""
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response(
            {"error": {"code": "Base.1.0.GeneralError", "message": "Unauthorized"}},
            status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        h = host(f"refused-{scheme.split('+')[0]}")
        bmc = BMCAccess(address=f"{scheme}://127.0.0.1:{port}/redfish/v1/Systems/1",
                        username="admin", password=PASSWORD)
        result = await register(provisioner, h, bmc)
        assert result.error_kind is ErrorKind.REGISTRATION
        assert result.error and PASSWORD not in result.error
        node = await client.get_node(h.node_name)
        assert node is not None and node["provision_state"] == "enroll"
        assert (node["driver"], node["boot_interface"], node["management_interface"]) == (
            driver, boot, management)
        assert node["driver_info"]["redfish_password"] != PASSWORD  # Ironic masks it
        # Sticky until the credentials change; then it retries (manage again).
        again = await provisioner.register(h, bmc, credentials_changed=False)
        assert again.result.error
        assert client.provision_actions[(h.node_name, "manage")] == 1
        retry = await provisioner.register(h, bmc, credentials_changed=True)
        assert retry.result.error is None
        assert client.provision_actions[(h.node_name, "manage")] == 2
        result = await register(provisioner, h, bmc)
        assert result.error_kind is ErrorKind.REGISTRATION
        assert (await until_done(lambda: provisioner.delete(h))).done
        assert await client.get_node(h.node_name) is None
    finally:
        await runner.cleanup()


async def test_detach_removes_node_without_power_change(provisioner: IronicProvisioner,
                                                        client: IronicClient) -> None:
    h = host("detach")
    await register(provisioner, h, fake_bmc("52:54:00:00:00:03"))
    assert (await until_done(lambda: provisioner.detach(h))).done
    assert await client.get_node(h.node_name) is None
    assert (await provisioner.detach(h)).done
    assert not [k for k in client.power_actions if k[0] == h.node_name]


async def test_image_404_is_a_provisioning_error(provisioner: IronicProvisioner,
                                                 client: IronicClient) -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        h = host("image-404")
        await register(provisioner, h, fake_bmc("52:54:00:00:00:04"))
        assert (await until_done(lambda: provisioner.prepare(h, clean=False))).done
        # The direct deploy interface checks the image before deploying.
        await client.patch_node(h.node_name, [
            {"op": "replace", "path": "/deploy_interface", "value": "direct"}])
        url = f"http://127.0.0.1:{port}/missing.qcow2"
        request = ProvisionRequest(image=ImageSpec(url=url, checksum="ab" * 32,
                                                   checksum_type="sha256"))
        result = await until_done(lambda: provisioner.provision(h, request))
        assert result.error_kind is ErrorKind.PROVISIONING
        assert result.error and "missing.qcow2" in result.error
        # Sticky: the same request never deploys again.
        again = await provisioner.provision(h, request)
        assert again.error_kind is ErrorKind.PROVISIONING
        assert client.provision_actions[(h.node_name, "active")] == 1
        assert (await until_done(lambda: provisioner.delete(h))).done
        assert await client.get_node(h.node_name) is None
    finally:
        await runner.cleanup()


async def test_backend_unavailable() -> None:
    # A port bound but not listening refuses connections, and nobody else
    # can take it while we hold it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        await _backend_unavailable(closed.getsockname()[1])


async def _backend_unavailable(port: int) -> None:
    async with IronicClient(f"http://127.0.0.1:{port}") as c:
        p = IronicProvisioner(c, settings_for(Path("/nonexistent")))
        assert not await p.is_ready()
        with pytest.raises(BackendUnavailable):
            await p.register(host("x"), fake_bmc(), credentials_changed=False)
        with pytest.raises(BackendUnavailable):
            await p.power_state(host("x"))


async def test_supervisor_restarts_killed_ironic_and_is_ready_follows(
        tmp_path: Path) -> None:
    import os
    import signal

    proc = IronicProcess(settings_for(tmp_path), restart_backoff=0.1)
    await proc.start()
    try:
        async with IronicClient(proc.url) as c:
            p = IronicProvisioner(c, proc.settings)
            assert await p.is_ready()
            pid = proc.pid
            assert pid is not None
            os.killpg(pid, signal.SIGKILL)
            await proc.wait_restarted(60)
            assert proc.restarts == 1 and proc.pid not in (None, pid)
            assert await p.is_ready()
            await proc.stop()
            assert not await p.is_ready()
            assert proc.pid is None
    finally:
        await proc.stop()


async def test_a_second_start_adopts_a_running_ironic(tmp_path: Path) -> None:
    """What happens after `racksmith up` was SIGKILLed: Ironic outlives it and
    the next start adopts it (same pid) instead of starting another."""
    first = IronicProcess(settings_for(tmp_path), supervise=False)
    await first.start()
    settings = first.settings  # the port it got, as racksmith up records it
    second = IronicProcess(settings, restart_backoff=0.1)
    try:
        pid = first.pid
        await second.start()
        assert second.adopted and second.pid == pid
        async with IronicClient(second.url) as c:
            assert await IronicProvisioner(c, settings).is_ready()
        await second.stop()
        assert second.pid is None
        assert first.pid is None or not await second.is_ready()
    finally:
        await second.stop()
        await first.stop()


async def test_a_node_cache_serves_many_hosts_with_one_list_and_deploys_once(
        ironic: IronicProcess) -> None:
    """With ``node_cache_ttl`` the per-host polls come from one shared node
    list, yet every action still sees the state after its own last write."""
    async with IronicClient(ironic.url, node_cache_ttl=1.0) as cached:
        p = IronicProvisioner(cached, ironic.settings)
        hosts = [host(f"cached-{i}") for i in range(4)]
        for i, h in enumerate(hosts):
            bmc = fake_bmc(mac=f"52:54:00:00:10:{i:02x}", address=f"fake://rack9/c{i}")
            assert (await register(p, h, bmc)).done

        async def all_done(call: Callable[[HostIdentity], Awaitable[Result]]) -> None:
            for h in hosts:
                assert (await until_done(lambda h=h: call(h))).done, h

        async def inspect(h: HostIdentity) -> Result:
            return (await p.inspect(h)).result
        await all_done(inspect)
        await all_done(p.prepare)
        await all_done(lambda h: p.provision(h, REQUEST))
        for h in hosts:
            for _ in range(3):
                assert (await p.provision(h, REQUEST)).done
            assert cached.provision_actions[(h.node_name, "active")] == 1
            node = await cached.get_node(h.node_name)
            assert node is not None and node["provision_state"] == "active"
        await all_done(lambda h: p.delete(h))
        for h in hosts:
            assert await cached.get_node(h.node_name) is None


async def test_a_picked_port_that_is_taken_is_never_mistaken_for_ours(tmp_path: Path) -> None:
    """Port 0 picks a port; when the pick is held by another process the start
    goes on with another port (and never reports the other process's port)."""
    from racksmith.ironic.process import PORT_RANGE, listening_pids

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    picks = iter([busy])
    rng = random.Random(tmp_path.name)

    def pick() -> int:
        return next(picks, None) or rng.randint(*PORT_RANGE)

    proc = IronicProcess(settings_for(tmp_path), supervise=False, pick_port=pick)
    try:
        await proc.start()
    finally:
        taken.close()
    try:
        assert proc.settings.port != busy
        assert proc.pid is not None
        assert any(os.getpgid(p) == proc.pid for p in listening_pids(proc.settings.port))
        async with IronicClient(proc.url) as c:
            assert await IronicProvisioner(c, proc.settings).is_ready()
    finally:
        await proc.stop()
