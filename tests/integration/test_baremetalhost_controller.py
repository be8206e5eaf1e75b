"""The BareMetalHost controller against the real embedded API server.

The controller runs on the runtime (``Controller`` + ``Manager``) over a
kubernetes_asyncio client made from the server's kubeconfig, driving the
in-memory fixture provisioner. Intervals are shrunk through the settings;
every wait polls a condition under a bound and nothing asserts on time. The
tests share the module's API server, each in its own namespace
(``tests.harness``); the provisioner is each test's own.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from racksmith.cli.export import exported_host
from racksmith.controllers.baremetalhost import (
    FINALIZER,
    BareMetalHostSettings,
    baremetalhost_controller,
)
from racksmith.controllers.firmware import FirmwareTimings, firmware_controller
from racksmith.kinds.hostannotations import (
    DETACHED,
    HARDWARE_DETAILS,
    INSPECT,
    PAUSED,
    PROFILE,
    REBOOT,
    RENDERED_LAYOUT,
    STATUS,
)
from racksmith.runtime import Controller
from racksmith.runtime.keys import ObjectKey
from tests.harness import api
from tests.harness.baremetal import BMH_SETTINGS, bmh_controller, fixture_provisioner
from tests.harness.controllers import ReconcileSpy, managed
from tests.harness.fixture_provisioner import FixtureNode, FixtureProvisioner
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP, VERSION = "metal3.io", "v1alpha1"
OURS = "metal.racksmith.io"  # the kinds Racksmith adds: profiles, inventories
PASSWORD = "s3cr3t-Pa55"
IMAGE = {"url": "http://images.example/os.qcow2", "checksum": "abc", "checksumType": "sha256"}


class Cluster(api.World):
    """The test's own view of the API."""

    def key(self, name: str) -> str:
        """The fixture provisioner's name of the host ``name``."""
        return f"{self.ns}~{name}"

    async def secret(self, name: str, username: str = "admin", password: str = PASSWORD,
                     replace: bool = False) -> None:
        body: Any = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {"username": base64.b64encode(username.encode()).decode(),
                         "password": base64.b64encode(password.encode()).decode()}}
        if replace:
            await self.core.replace_namespaced_secret(name, self.ns, body)
        else:
            await self.core.create_namespaced_secret(self.ns, body)

    async def host(self, name: str, *, secret: str | None = None, online: bool = False,
                   annotations: dict[str, str] | None = None, profile: str | None = None,
                   **spec: Any) -> None:
        annotations = {**(annotations or {}), **({PROFILE: profile} if profile else {})}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "BareMetalHost",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"bmc": {"address": f"redfish://bmc-{name}.example/redfish/v1/Systems/1",
                             "credentialsName": secret or f"{name}-bmc"},
                     "bootMACAddress": "52:54:00:00:00:01", "online": online, **spec},
        }
        await self.create(GROUP, "baremetalhosts", body)

    async def profile(self, name: str, spec: dict[str, Any], replace: bool = False) -> None:
        body: dict[str, Any] = {"apiVersion": f"{OURS}/{VERSION}",
                                "kind": "BareMetalHostProfile",
                                "metadata": {"name": name}, "spec": spec}
        if replace:
            current = await self.custom.get_namespaced_custom_object(
                OURS, VERSION, self.ns, "baremetalhostprofiles", name)
            body["metadata"] = current["metadata"]
            await self.custom.replace_namespaced_custom_object(
                OURS, VERSION, self.ns, "baremetalhostprofiles", name, body)
        else:
            await self.create(OURS, "baremetalhostprofiles", body)

    async def read(self, name: str, plural: str = "baremetalhosts") -> dict[str, Any] | None:
        return await self.get(GROUP if plural == "baremetalhosts" else OURS, plural, name)

    async def patch_host(self, name: str, patch: dict[str, Any]) -> None:
        await self.patch(GROUP, "baremetalhosts", name, patch)

    async def delete_host(self, name: str) -> None:
        await self.delete(GROUP, "baremetalhosts", name)

    async def state(self, name: str) -> str | None:
        obj = await self.read(name)
        state = ((obj or {}).get("status") or {}).get("provisioning", {}).get("state")
        return None if state is None else str(state)

    async def in_state(self, name: str, state: str) -> None:
        async def check() -> bool:
            return await self.state(name) == state
        await eventually(check, f"{name} in state {state!r}")

    async def gone_host(self, name: str) -> None:
        await self.gone(name, lambda: self.read(name))

    async def available(self, name: str, **host: Any) -> None:
        """Host ``name`` (and its Secret) created (``host``: its options): available."""
        await self.secret(f"{name}-bmc")
        await self.host(name, **host)
        await self.in_state(name, "available")

    async def provisioned(self, backend: FixtureProvisioner, name: str) -> FixtureNode:
        """Host ``name`` (and its Secret) created with an image: provisioned and on."""
        await self.secret(f"{name}-bmc")
        await self.host(name, image=IMAGE, online=True)
        await self.in_state(name, "provisioned")
        node = backend.node(self.key(name))
        assert node is not None and node.powered_on
        return node

    async def until_status(self, name: str, field: str, value: Any) -> None:
        """Until host ``name``'s ``status.<field>`` is ``value``."""
        async def check() -> bool:
            return status_of(await self.read(name)).get(field) == value
        await eventually(check, f"{name}'s {field} {value!r}")


def status_of(obj: dict[str, Any] | None) -> dict[str, Any]:
    assert obj is not None
    status: dict[str, Any] = obj.get("status") or {}
    return status


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in status_of(obj).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


@pytest.fixture
def cluster(client: ApiClient, ns: str) -> Cluster:
    return Cluster(client, ns)


@pytest.fixture
def backend() -> FixtureProvisioner:
    return fixture_provisioner()


@contextlib.asynccontextmanager
async def running(client: ApiClient, backend: FixtureProvisioner,
                  settings: BareMetalHostSettings = BMH_SETTINGS) -> AsyncIterator[Controller]:
    controller = bmh_controller(client, backend, settings)
    async with managed(client, [controller], identity="bmh-test"):
        yield controller


@pytest_asyncio.fixture(loop_scope="module")
async def controller(client: ApiClient, backend: FixtureProvisioner
                     ) -> AsyncIterator[Controller]:
    async with running(client, backend) as c:
        yield c


def no_secret_anywhere(*objects: Any) -> None:
    for obj in objects:
        text = json.dumps(obj, default=str)
        assert PASSWORD not in text


# ------------------------------------------------------------------------ tests


async def test_register_inspect_provision_deprovision(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.available("h1")

    async def power_known() -> bool:
        return status_of(await cluster.read("h1")).get("poweredOn") is False
    await eventually(power_known, "h1 power state read")
    host = await cluster.read("h1")
    assert host is not None
    status = status_of(host)
    assert FINALIZER in host["metadata"]["finalizers"]
    assert status["operationalStatus"] == "OK"
    assert status["hardware"]["ramMebibytes"] == 65536
    assert status["goodCredentials"]["credentials"]["name"] == "h1-bmc"
    assert status["provisioning"]["ID"].startswith("fixture-")
    history = status["operationHistory"]
    assert history["register"]["start"] and history["register"]["end"]
    assert history["inspect"]["start"] and history["inspect"]["end"]
    inventory = await cluster.read("h1", "baremetalhostinventories")
    assert inventory is not None
    assert inventory["spec"]["hostRef"]["name"] == "h1"
    owner = inventory["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "BareMetalHost", "h1", host["metadata"]["uid"])
    assert len(inventory["status"]["hardware"]["storage"]) == 3

    # Re-inspection on request: the annotation is consumed, the host comes back.
    inspections = backend.calls[(cluster.key("h1"), "inspect")]
    await cluster.patch_host("h1", {"metadata": {"annotations": {INSPECT: ""}}})

    async def reinspected() -> bool:
        obj = await cluster.read("h1")
        # Two calls: the forced start, then the one that reports it done.
        return INSPECT not in ((obj or {})["metadata"].get("annotations") or {}) and \
            status_of(obj)["provisioning"]["state"] == "available" and \
            backend.calls[(cluster.key("h1"), "inspect")] >= inspections + 2
    await eventually(reinspected, "h1 inspected again")

    # Provision with a profile that fits: a RAID1 root over the two SSDs.
    await cluster.profile("mirror", {
        "devices": [
            {"device": {"type": "ssd", "minSize": "100Gi"},
             "partitions": [{"name": "esp", "size": "512Mi", "flags": ["esp"]},
                            {"name": "root-a"}]},
            {"device": {"type": "ssd", "minSize": "100Gi"},
             "partitions": [{"name": "root-b"}]},
        ],
        "softRaidDevices": [{"name": "md0", "level": "raid1", "devices": ["root-a", "root-b"]}],
        "fileSystems": [{"fileSystem": "vfat", "source": "esp", "mountPoint": "/boot/efi"},
                        {"fileSystem": "ext4", "source": "md0", "mountPoint": "/"}],
        "kernelParameters": {"cmdline": ["console=ttyS0"]},
        "hugePages": [{"size": "2M", "count": 512}],
    })
    await cluster.patch_host("h1", {"metadata": {"annotations": {PROFILE: "mirror"}},
                                    "spec": {"image": IMAGE, "online": True}})
    await cluster.in_state("h1", "provisioned")

    async def powered_on() -> bool:
        return status_of(await cluster.read("h1")).get("poweredOn") is True
    await eventually(powered_on, "h1 powered on")
    host = await cluster.read("h1")
    assert host is not None
    assert status_of(host)["provisioning"]["image"]["url"] == IMAGE["url"]
    layout = json.loads(host["metadata"]["annotations"][RENDERED_LAYOUT])
    assert [d["name"] for d in layout["devices"]] == ["/dev/sda", "/dev/sdb"]
    assert layout["softRaidDevices"][0]["level"] == "raid1"
    assert "hugepages=512" in layout["kernel"]["cmdline"]
    assert status_of(host)["provisioning"]["diskLayout"] == layout
    profile_valid = condition(host, "ProfileValid")
    assert profile_valid is not None and profile_valid["status"] == "True"
    node = backend.node(cluster.key("h1"))
    assert node is not None and node.deployed is not None
    assert node.deployed.meta_data is not None
    assert node.deployed.meta_data["racksmith_disk_layout"] == layout
    assert backend.deploys[cluster.key("h1")] == 1
    history = status_of(host)["operationHistory"]
    assert history["provision"]["start"] and history["provision"]["end"]

    # Reboot once on request: off, annotation gone, back on.
    power_calls = backend.calls[(cluster.key("h1"), "power")]
    await cluster.patch_host("h1", {"metadata": {"annotations": {REBOOT: ""}}})

    async def rebooted() -> bool:
        obj = await cluster.read("h1")
        # off and on again (the annotation goes with the power-off, so the
        # status alone could still show the power state from before)
        return REBOOT not in ((obj or {})["metadata"].get("annotations") or {}) and \
            status_of(obj).get("poweredOn") is True and \
            backend.calls[(cluster.key("h1"), "power")] >= power_calls + 2
    await eventually(rebooted, "h1 rebooted")
    assert backend.calls[(cluster.key("h1"), "power")] >= power_calls + 2
    assert node.powered_on

    # Removing the image deprovisions the host back to available.
    await cluster.patch_host("h1", {"spec": {"image": None, "online": False}})
    await cluster.in_state("h1", "available")
    host = await cluster.read("h1")
    assert host is not None
    assert "image" not in status_of(host)["provisioning"]
    assert "diskLayout" not in status_of(host)["provisioning"]
    assert RENDERED_LAYOUT not in (host["metadata"].get("annotations") or {})
    assert status_of(host)["operationHistory"]["deprovision"]["end"]
    assert backend.deploys[cluster.key("h1")] == 1

    await cluster.has_events("h1", "Registered", "InspectionComplete", "Prepared",
                             "ProvisioningStarted", "ProvisioningComplete", "Rebooting",
                             "Deprovisioning", "DeprovisioningComplete")
    no_secret_anywhere(host, [e.message for e in await cluster.events("h1")])


async def test_deleting_a_provisioned_host_deprovisions_first(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.secret("h2-bmc")
    await cluster.host("h2", image=IMAGE, online=True)
    await cluster.in_state("h2", "provisioned")
    await cluster.delete_host("h2")
    await cluster.gone_host("h2")
    assert backend.node(cluster.key("h2")) is None
    assert backend.deleted[cluster.key("h2")] == 1
    ops = [op for node, op in backend.history if node == cluster.key("h2")]
    last_deprovision = max(i for i, op in enumerate(ops) if op == "deprovision")
    assert "delete" not in ops[:last_deprovision]
    assert ops.index("delete") > max(i for i, op in enumerate(ops) if op == "power")
    await cluster.has_events("h2", "Deprovisioning", "DeprovisioningComplete", "PoweredOff",
                             "Deleted")


async def test_wrong_credentials_then_fixed(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    backend.bmc_credentials["redfish://bmc-h3.example/redfish/v1/Systems/1"] = (
        "admin", "right-one")
    await cluster.secret("h3-bmc", password=PASSWORD)

    async def refused() -> bool:
        return status_of(await cluster.read("h3") or {}).get("errorType") == "registration error"
    await cluster.host("h3")
    await eventually(refused, "registration error")
    host = await cluster.read("h3")
    status = status_of(host)
    assert status["provisioning"]["state"] == "registering"
    assert "refused the credentials" in status["errorMessage"]
    assert status["operationalStatus"] == "error"
    assert status["errorCount"] >= 1
    tried = status["triedCredentials"]
    assert tried["credentials"]["name"] == "h3-bmc"
    assert "goodCredentials" not in status
    await cluster.has_events("h3", "RegistrationError")
    no_secret_anywhere(host, [e.message for e in await cluster.events("h3")])

    await cluster.secret("h3-bmc", password="right-one", replace=True)
    await cluster.in_state("h3", "available")
    status = status_of(await cluster.read("h3"))
    assert "errorType" not in status and status["errorCount"] == 0
    assert status["goodCredentials"]["credentialsVersion"] == \
        status["triedCredentials"]["credentialsVersion"] != tried["credentialsVersion"]


async def test_an_error_waits_out_its_back_off_until_an_input_changes(
    cluster: Cluster, backend: FixtureProvisioner, client: ApiClient
) -> None:
    # The error's own status write wakes the host at once; it must not retry
    # (and count the error again) before the back-off, unless the user
    # changed something — here the Secret.
    backend.bmc_credentials["redfish://bmc-h9.example/redfish/v1/Systems/1"] = (
        "admin", "right-one")
    slow = dataclasses.replace(BMH_SETTINGS, error_backoff_base=30.0, error_backoff_cap=60.0)
    async with running(client, backend, slow) as controller:
        spy = ReconcileSpy(controller)
        await cluster.secret("h9-bmc", password=PASSWORD)
        await cluster.host("h9")

        async def refused() -> bool:
            return status_of(await cluster.read("h9") or {}).get("errorType") == \
                "registration error"
        await eventually(refused, "registration error")
        def registers() -> int:
            return sum(n for (_, op), n in backend.calls.items() if op == "register")
        calls = registers()
        # the reconcile that failed, then the one its status write woke
        await spy.reconciled(ObjectKey(cluster.ns, "h9"), 2, "woken by its error's status")
        status = status_of(await cluster.read("h9"))
        assert status["errorCount"] == 1, status
        assert registers() == calls
        await cluster.secret("h9-bmc", password="right-one", replace=True)
        await cluster.in_state("h9", "available")


async def test_missing_secret_then_created(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.host("h4")

    async def missing() -> bool:
        return status_of(await cluster.read("h4") or {}).get("errorMessage") == \
            "secret h4-bmc not found"
    await eventually(missing, "secret not found error")
    assert status_of(await cluster.read("h4"))["errorType"] == "registration error"
    assert backend.calls[(cluster.key("h4"), "register")] == 0
    await cluster.secret("h4-bmc")
    await cluster.in_state("h4", "available")


async def test_profile_that_does_not_fit_keeps_the_host_available(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.secret("h5-bmc")
    nvme_pair = {"devices": [{"device": {"type": "nvme", "minSize": "100Gi"}},
                             {"device": {"type": "nvme", "minSize": "100Gi"}}]}
    await cluster.profile("fast", nvme_pair)
    await cluster.host("h5", image=IMAGE, profile="fast")

    async def flagged() -> bool:
        cond = condition(await cluster.read("h5"), "ProfileValid")
        return cond is not None and cond["status"] == "False"
    await eventually(flagged, "ProfileValid False")
    host = await cluster.read("h5")
    cond = condition(host, "ProfileValid")
    assert cond is not None and cond["reason"] == "ProfileDoesNotFit"
    assert "needs 2 disks of type nvme with at least 100Gi, host has 0" in cond["message"]
    assert status_of(host)["provisioning"]["state"] == "available"
    assert backend.deploys[cluster.key("h5")] == 0
    await cluster.has_events("h5", "ProfileDoesNotFit")

    # Fixing the profile is enough: the profile watch wakes the host up.
    await cluster.profile("fast", {"devices": [{"device": {"type": "ssd"}}]}, replace=True)
    await cluster.in_state("h5", "provisioned")
    assert backend.deploys[cluster.key("h5")] == 1


async def test_paused_host_is_left_alone(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.secret("h6-bmc")
    await cluster.host("h6", annotations={PAUSED: ""})
    # A second host as a barrier: once it is available, h6 had its chances.
    await cluster.secret("h6b-bmc")
    await cluster.host("h6b")
    await cluster.in_state("h6b", "available")
    host = await cluster.read("h6")
    assert host is not None and "status" not in host
    assert FINALIZER not in (host["metadata"].get("finalizers") or [])
    assert not [k for k in backend.calls if k[0] == cluster.key("h6")]
    await cluster.patch_host("h6", {"metadata": {"annotations": {PAUSED: None}}})
    await cluster.in_state("h6", "available")


async def test_detached_host_is_released_without_touching_the_server(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    node = await cluster.provisioned(backend, "h7")
    await cluster.patch_host("h7", {"metadata": {"annotations": {DETACHED: ""}}})
    await cluster.until_status("h7", "operationalStatus", "detached")
    assert backend.node(cluster.key("h7")) is None and backend.detached[cluster.key("h7")] == 1
    power_calls = backend.calls[(cluster.key("h7"), "power")]
    await cluster.delete_host("h7")
    await cluster.gone_host("h7")
    assert node.powered_on, "the server was left running"
    assert backend.calls[(cluster.key("h7"), "power")] == power_calls
    assert backend.calls[(cluster.key("h7"), "deprovision")] == 0
    assert backend.deleted[cluster.key("h7")] == 0


async def test_deletion_waits_for_an_unreachable_backend(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.secret("h8-bmc")
    await cluster.host("h8")
    await cluster.in_state("h8", "available")
    backend.unavailable = True
    await cluster.delete_host("h8")

    async def waiting() -> bool:
        # A reconcile that ran before the delete may already have set the
        # condition without the deletion in its message: wait for the latter.
        cond = condition(await cluster.read("h8"), "BackendReachable")
        return cond is not None and cond["status"] == "False" and \
            "deletion waits" in cond["message"]
    await eventually(waiting, "BackendReachable False while deleting")
    host = await cluster.read("h8")
    assert host is not None and host["metadata"].get("deletionTimestamp")
    cond = condition(host, "BackendReachable")
    assert cond is not None and cond["reason"] == "BackendUnavailable"
    assert "deletion waits" in cond["message"]
    assert "errorType" not in status_of(host), "an unreachable backend is not a host error"
    await cluster.has_events("h8", "BackendUnavailable")
    backend.unavailable = False
    await cluster.gone_host("h8")
    assert backend.deleted[cluster.key("h8")] == 1


async def test_restart_mid_provisioning_deploys_exactly_once(
    client: ApiClient, cluster: Cluster
) -> None:
    backend = fixture_provisioner(steps={"provision": 40})
    await cluster.secret("h9-bmc")
    async with running(client, backend):
        await cluster.host("h9", image=IMAGE, online=True)

        async def deploying() -> bool:
            node = backend.node(cluster.key("h9"))
            return node is not None and node.state == "deploying"
        await eventually(deploying, "deploy started")
    assert await cluster.state("h9") == "provisioning"
    assert backend.deploys[cluster.key("h9")] == 1
    async with running(client, backend):
        await cluster.in_state("h9", "provisioned")
    assert backend.deploys[cluster.key("h9")] == 1


async def test_a_failed_deploy_is_undone_and_retried_until_it_succeeds(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    """As Metal3's BMO: a deploy that still fails once its error's back-off
    has passed is deprovisioned (cleaned, back to available) and provisioned
    again; once the cause is gone (here the image becomes reachable, as a
    conductor that recovers) the host ends provisioned, with no error."""
    backend.broken_images.add(IMAGE["url"])
    await cluster.secret("h10-bmc")
    await cluster.host("h10", image=IMAGE, online=True)

    async def failed() -> bool:
        host = await cluster.read("h10")
        return host is not None and status_of(host).get("errorType") == "provisioning error"
    await eventually(failed, "the first deploy failed")

    async def retried() -> bool:
        return backend.deploys[cluster.key("h10")] >= 2
    await eventually(retried, "the deploy tried again after deprovisioning")
    assert backend.calls[(cluster.key("h10"), "deprovision")] >= 1
    backend.broken_images.discard(IMAGE["url"])
    await cluster.in_state("h10", "provisioned")
    host = await cluster.read("h10")
    assert host is not None and "errorType" not in status_of(host)
    await cluster.has_events("h10", "Deprovisioning", "ProvisioningComplete")


async def test_a_host_out_of_calls_is_put_off_and_counted(
    cluster: Cluster, client: ApiClient
) -> None:
    """A registration that takes more polls than the host's calls a minute:
    the host is put off (``racksmith_baremetalhost_throttled_total``), never
    calls beyond its budget, and still shows its state."""
    backend = fixture_provisioner(steps={"register": 50})
    registry = CollectorRegistry()
    settings = dataclasses.replace(BMH_SETTINGS, calls_per_minute=6)
    controller = baremetalhost_controller(client, backend, settings=settings,
                                          registry=registry, workers=1)
    await cluster.secret("h-budget-bmc")
    await cluster.host("h-budget")
    async with managed(client, [controller], identity="bmh-budget-test"):
        async def throttled() -> bool:
            value = registry.get_sample_value("racksmith_baremetalhost_throttled_total")
            return (value or 0.0) >= 1
        await eventually(throttled, "the host put off once its calls are used")
    assert sum(n for (node, _), n in backend.calls.items()
               if node == cluster.key("h-budget")) <= 6
    assert await cluster.state("h-budget") == "registering"


# --------------------------------------------------------------- Metal3's annotations


async def hardware_data(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return await cluster.get(GROUP, "hardwaredata", name)


async def test_hardware_data_is_written_by_inspection_and_rebuilt_when_deleted(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.available("hd1")
    found = await eventually(lambda: hardware_data(cluster, "hd1"), "hd1's HardwareData")
    inventory = await cluster.read("hd1", "baremetalhostinventories")
    assert inventory is not None
    assert found["spec"]["hardware"] == inventory["status"]["hardware"]
    owner = found["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == \
        (f"{GROUP}/{VERSION}", "BareMetalHost", "hd1")
    inspections = backend.calls[(cluster.key("hd1"), "inspect")]
    await cluster.delete(GROUP, "hardwaredata", "hd1")

    async def rebuilt() -> bool:
        again = await hardware_data(cluster, "hd1")
        return again is not None and again["metadata"]["uid"] != found["metadata"]["uid"]
    await eventually(rebuilt, "hd1's HardwareData written again")
    again = await hardware_data(cluster, "hd1")
    assert again is not None and again["spec"]["hardware"] == found["spec"]["hardware"]
    assert backend.calls[(cluster.key("hd1"), "inspect")] == inspections  # not re-inspected


async def test_a_host_with_its_hardware_given_is_not_inspected(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    hardware = {"ramMebibytes": 2048, "cpu": {"arch": "x86_64", "count": 2},
                "storage": [{"name": "/dev/vda", "sizeBytes": 21474836480}]}
    await cluster.create(GROUP, "hardwaredata", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "HardwareData",
        "metadata": {"name": "hd2"}, "spec": {"hardware": hardware}})
    await cluster.secret("hd2-bmc")
    await cluster.host("hd2")
    await cluster.secret("hd3-bmc")
    await cluster.host("hd3", inspectionMode="disabled",
                       annotations={HARDWARE_DETAILS: json.dumps(hardware)})
    for name in ("hd2", "hd3"):
        await cluster.in_state(name, "available")
        host = await cluster.read(name)
        assert status_of(host)["hardware"]["ramMebibytes"] == 2048, name
        assert HARDWARE_DETAILS not in (host or {})["metadata"].get("annotations", {})
        assert backend.calls[(cluster.key(name), "inspect")] == 0, name


async def test_a_keyed_reboot_keeps_the_host_off_until_every_key_is_gone(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    node = await cluster.provisioned(backend, "kr")
    await cluster.patch_host("kr", {"metadata": {"annotations": {
        f"{REBOOT}/a": "", f"{REBOOT}/b": '{"mode":"hard"}'}}})
    await cluster.until_status("kr", "poweredOn", False)
    # One key goes, and an unkeyed reboot is asked with it: once that one is
    # consumed (the controller saw the change), the host is still off.
    await cluster.patch_host("kr", {"metadata": {"annotations": {
        f"{REBOOT}/a": None, REBOOT: ""}}})

    async def consumed() -> bool:
        host = await cluster.read("kr")
        return REBOOT not in (host or {})["metadata"].get("annotations", {})
    await eventually(consumed, "the unkeyed reboot consumed")
    assert not node.powered_on and f"{REBOOT}/b" in \
        (await cluster.read("kr") or {})["metadata"]["annotations"]
    await cluster.patch_host("kr", {"metadata": {"annotations": {f"{REBOOT}/b": None}}})
    await cluster.until_status("kr", "poweredOn", True)
    assert node.powered_on


async def test_a_host_created_with_the_status_annotation_takes_it(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.provisioned(backend, "mv1")
    exported = exported_host(await cluster.read("mv1") or {})
    await cluster.patch_host("mv1", {"metadata": {"annotations": {DETACHED: ""}}})
    await cluster.until_status("mv1", "operationalStatus", "detached")
    await cluster.delete_host("mv1")
    await cluster.gone_host("mv1")
    inspections = backend.calls[(cluster.key("mv1"), "inspect")]
    provisions = backend.calls[(cluster.key("mv1"), "provision")]
    assert backend.deleted[cluster.key("mv1")] == 0  # detached: the server untouched
    exported["metadata"]["annotations"].pop(DETACHED, None)
    await cluster.create(GROUP, "baremetalhosts", exported)

    async def adopted() -> bool:
        host = await cluster.read("mv1")
        return status_of(host).get("operationalStatus") == "OK" and \
            STATUS not in (host or {})["metadata"].get("annotations", {}) and \
            await cluster.state("mv1") == "provisioned"
    await eventually(adopted, "mv1 adopted from its status")
    assert backend.calls[(cluster.key("mv1"), "inspect")] == inspections
    assert backend.calls[(cluster.key("mv1"), "provision")] == provisions  # not deployed again
    assert backend.calls[(cluster.key("mv1"), "adopt")] >= 1


async def test_a_detached_host_with_delete_delayed_waits(
    cluster: Cluster, backend: FixtureProvisioner, controller: Controller
) -> None:
    await cluster.secret("dd-bmc")
    await cluster.host("dd", annotations={DETACHED: '{"deleteAction": "delay"}'})
    await cluster.until_status("dd", "operationalStatus", "detached")
    await cluster.delete_host("dd")

    async def delayed() -> bool:
        return (condition(await cluster.read("dd"), "DeletionAllowed") or {}).get(
            "status") == "False"
    await eventually(delayed, "dd's deletion delayed")
    await cluster.patch_host("dd", {"metadata": {"annotations": {DETACHED: None}}})
    await cluster.gone_host("dd")


# ------------------------------------------------------------- firmware settings


@contextlib.asynccontextmanager
async def with_firmware(client: ApiClient, backend: FixtureProvisioner
                        ) -> AsyncIterator[None]:
    """The BareMetalHost and firmware controllers over ``backend``."""
    host = bmh_controller(client, backend)
    firmware = firmware_controller(client, backend, timings=FirmwareTimings(resync=60.0))
    async with managed(client, [host, firmware], identity="firmware-test"):
        yield


async def firmware_condition(cluster: Cluster, name: str, kind: str, status: str) -> dict[str, Any]:
    """Until the HostFirmwareSettings ``name`` has condition ``kind`` at
    ``status`` for its current generation; the object."""
    async def check() -> dict[str, Any] | None:
        hfs = await cluster.get(GROUP, "hostfirmwaresettings", name)
        cond = condition(hfs, kind)
        ok = hfs is not None and cond is not None and cond["status"] == status and \
            cond.get("observedGeneration") == hfs["metadata"]["generation"]
        return hfs if ok else None
    found: dict[str, Any] = await eventually(check, f"{name}'s {kind} {status}")
    return found


async def test_firmware_settings_are_read_checked_and_applied_during_a_reboot(
    client: ApiClient, cluster: Cluster, backend: FixtureProvisioner
) -> None:
    async with with_firmware(client, backend):
        node = await cluster.provisioned(backend, "fw")
        # Read from the host: an empty HostFirmwareSettings, its FirmwareSchema.
        hfs = await firmware_condition(cluster, "fw", "ChangeDetected", "False")
        assert hfs["spec"].get("settings", {}) == {}
        assert hfs["status"]["settings"]["ProcTurboMode"] == "Enabled"
        assert "ownerReferences" not in hfs["metadata"]
        schema = await cluster.get(GROUP, "firmwareschemas", hfs["status"]["schema"]["name"])
        assert schema is not None
        assert schema["spec"]["hardwareVendor"] == "Fixture"
        assert schema["spec"]["schema"]["NumCores"]["read_only"] is True

        # A value the schema refuses: Valid False with Metal3's words, an Event.
        await cluster.patch(GROUP, "hostfirmwaresettings", "fw",
                            {"spec": {"settings": {"NumCores": 12, "BootMode": "Floppy"}}})
        hfs = await firmware_condition(cluster, "fw", "Valid", "False")
        message = condition(hfs, "Valid")["message"]  # type: ignore[index]
        assert "setting NumCores is ReadOnly" in message
        assert "unknown enumeration value - Floppy" in message
        await cluster.has_event("fw", "ConfigurationError", type="Warning")

        # A valid change waits for a reboot: nothing is done to the host yet.
        await cluster.patch(GROUP, "hostfirmwaresettings", "fw", {"spec": {"settings": {
            "NumCores": None, "BootMode": None, "ProcTurboMode": "Disabled"}}})
        await firmware_condition(cluster, "fw", "Valid", "True")
        await firmware_condition(cluster, "fw", "ChangeDetected", "True")
        assert backend.services[cluster.key("fw")] == 0 and node.powered_on

        # The maintenance flow's reboot: serviced first (the disk kept), then
        # held off until the key goes.
        await cluster.patch_host("fw", {"metadata": {"annotations": {f"{REBOOT}/lcm": ""}}})
        await cluster.until_status("fw", "poweredOn", False)
        assert await cluster.state("fw") == "provisioned"
        assert backend.services[cluster.key("fw")] == 1
        assert node.firmware["ProcTurboMode"] == "Disabled"
        assert backend.calls[(cluster.key("fw"), "deprovision")] == 0
        await cluster.has_events("fw", "ServicingStarted", "ServicingComplete")
        await firmware_condition(cluster, "fw", "ChangeDetected", "False")
        await cluster.patch_host("fw", {"metadata": {"annotations": {f"{REBOOT}/lcm": None}}})
        await cluster.until_status("fw", "poweredOn", True)
        assert backend.services[cluster.key("fw")] == 1


async def test_a_failed_servicing_is_reported_until_the_settings_are_edited(
    client: ApiClient, cluster: Cluster, backend: FixtureProvisioner
) -> None:
    backend.refused_settings = {"QuietBoot"}
    async with with_firmware(client, backend):
        await cluster.provisioned(backend, "fw2")
        await firmware_condition(cluster, "fw2", "Valid", "True")
        await cluster.patch(GROUP, "hostfirmwaresettings", "fw2",
                            {"spec": {"settings": {"QuietBoot": "false"}}})
        await firmware_condition(cluster, "fw2", "ChangeDetected", "True")
        await cluster.patch_host("fw2", {"metadata": {"annotations": {f"{REBOOT}/lcm": ""}}})
        await cluster.until_status("fw2", "errorType", "servicing error")
        assert await cluster.state("fw2") == "servicing"
        # Back to the host's own value: serviced again (nothing to change), done.
        await cluster.patch(GROUP, "hostfirmwaresettings", "fw2",
                            {"spec": {"settings": {"QuietBoot": "true"}}})
        await cluster.until_status("fw2", "poweredOn", False)
        assert await cluster.state("fw2") == "provisioned"
        assert status_of(await cluster.read("fw2")).get("errorType") is None


async def test_settings_asked_of_a_bmc_without_any_are_refused_and_the_reboot_goes_on(
    client: ApiClient, cluster: Cluster, backend: FixtureProvisioner
) -> None:
    backend.without_firmware = {cluster.key("nofw")}
    async with with_firmware(client, backend):
        await cluster.provisioned(backend, "nofw")
        assert await cluster.get(GROUP, "hostfirmwaresettings", "nofw") is None
        await cluster.create(GROUP, "hostfirmwaresettings", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "HostFirmwareSettings",
            "metadata": {"name": "nofw"}, "spec": {"settings": {"ProcTurboMode": "Disabled"}}})
        hfs = await firmware_condition(cluster, "nofw", "Valid", "False")
        assert "setting ProcTurboMode is not in the Firmware Schema" in \
            condition(hfs, "Valid")["message"]  # type: ignore[index]
        await cluster.patch_host("nofw", {"metadata": {"annotations": {REBOOT: ""}}})
        await cluster.has_event("nofw", "Rebooting")
        await cluster.until_status("nofw", "poweredOn", True)
        assert backend.services[cluster.key("nofw")] == 0
        assert backend.calls[(cluster.key("nofw"), "service")] == 0

