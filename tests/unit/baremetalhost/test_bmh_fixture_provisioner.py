"""The fixture provisioner keeps the Provisioner contract: idempotent calls,
operations that take several calls, one deploy per request, credentials,
unavailability."""

from __future__ import annotations

import pytest

from racksmith.provisioner.base import (
    BackendUnavailable,
    BMCAccess,
    ErrorKind,
    HostIdentity,
    ImageSpec,
    ProvisionRequest,
)
from tests.harness.fixture_provisioner import FixtureProvisioner

HOST = HostIdentity("ns", "h", "uid")
BMC = BMCAccess("ipmi://10.0.0.1", "admin", "pw")
REQUEST = ProvisionRequest(image=ImageSpec(url="http://images.example/os.img"))


async def ready(p: FixtureProvisioner) -> None:
    assert (await p.register(HOST, BMC, credentials_changed=True)).result.done
    assert (await p.inspect(HOST)).result.done or (await p.inspect(HOST)).result.done
    assert (await p.prepare(HOST)).done


async def test_operations_take_the_configured_number_of_calls() -> None:
    p = FixtureProvisioner(steps={"inspect": 3})
    await p.register(HOST, BMC, credentials_changed=True)
    first, second, third = [await p.inspect(HOST) for _ in range(3)]
    assert not first.result.done and first.result.requeue_after == p.poll
    assert not second.result.done
    assert third.result.done and third.hardware is not None
    again = await p.inspect(HOST)
    assert again.result.done and p.calls[(HOST.node_name, "inspect")] == 4


async def test_exactly_one_deploy_per_request() -> None:
    p = FixtureProvisioner(steps={"provision": 3})
    await ready(p)
    results = [await p.provision(HOST, REQUEST) for _ in range(5)]
    assert [r.done for r in results] == [False, False, True, True, True]
    assert p.deploys[HOST.node_name] == 1
    node = p.node(HOST)
    assert node is not None and node.state == "active" and node.powered_on


async def test_a_bad_image_fails_without_redeploying() -> None:
    p = FixtureProvisioner()
    await ready(p)
    bad = ProvisionRequest(image=ImageSpec(url="http://images.example/missing.img"))
    p.broken_images.add(bad.image.url)
    for _ in range(3):
        result = await p.provision(HOST, bad)
        assert result.error_kind is ErrorKind.PROVISIONING and "missing.img" in (result.error or "")
    assert p.deploys[HOST.node_name] == 1
    outcomes = [(await p.provision(HOST, REQUEST)).done for _ in range(p.steps["provision"])]
    assert outcomes[-1] and p.deploys[HOST.node_name] == 2  # a new request, a new deploy


async def test_wrong_credentials_until_they_change() -> None:
    p = FixtureProvisioner()
    p.bmc_credentials[BMC.address] = ("admin", "right")
    refused = await p.register(HOST, BMC, credentials_changed=True)
    assert refused.result.error_kind is ErrorKind.REGISTRATION
    assert "pw" not in (refused.result.error or "").replace("ipmi", "")
    again = await p.register(HOST, BMC, credentials_changed=False)
    assert again.result.error == refused.result.error
    fixed = BMCAccess(BMC.address, "admin", "right")
    assert (await p.register(HOST, fixed, credentials_changed=True)).result.done


async def test_unavailable_backend_raises() -> None:
    p = FixtureProvisioner()
    p.unavailable = True
    assert not await p.is_ready()
    with pytest.raises(BackendUnavailable):
        await p.delete(HOST)
    p.unavailable = False
    assert (await p.delete(HOST)).done  # never there: done


async def test_detach_leaves_the_power_alone_delete_powers_off() -> None:
    p = FixtureProvisioner()
    await ready(p)
    assert (await p.power(HOST, True)).done
    node = p.node(HOST)
    assert node is not None
    assert (await p.detach(HOST)).done
    assert node.powered_on and p.node(HOST) is None
    await ready(p)
    other = p.node(HOST)
    assert other is not None
    other.powered_on = True
    assert (await p.delete(HOST)).done
    assert not other.powered_on and p.deleted[HOST.node_name] == 1
