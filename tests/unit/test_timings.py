"""Waits are settings: the defaults are the product's (unchanged from when they
were module constants), and the composition root hands the timings it is
given to every controller, the node flows inside them included."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from racksmith.app.runner import build_controllers
from racksmith.app.settings import Settings, Timings
from racksmith.controllers import ClusterOptions, ControllerTimings, all_controllers
from racksmith.controllers.baremetalhost import BareMetalHostSettings
from racksmith.controllers.ipamhost import IpamHostTimings
from racksmith.controllers.machine import MachineTimings
from racksmith.controllers.maintenance import (
    GracefulRebootTimings,
    MaintenanceTimings,
    NodeMaintenance,
)
from racksmith.controllers.update import UpdateTimings
from racksmith.controllers.volume import VolumeTimings
from racksmith.emulator.workloads import WorkloadTimings
from racksmith.ironic.config import IronicPeriodics
from racksmith.provisioner.ironic_states import IronicTimings
from tests.harness.fixture_provisioner import FixtureProvisioner

FLOW_DEFAULTS = {"poll": 5.0, "lock_retry": 10.0, "reboot_retry": 600.0,
                 "eviction_backoff_base": 2.0, "eviction_backoff_cap": 30.0}


def test_defaults_are_unchanged() -> None:
    assert asdict(MaintenanceTimings()) == FLOW_DEFAULTS
    assert asdict(MachineTimings()) == {
        "retry_missing": 10.0, "retry_no_host": 30.0, "retry_drain": 10.0,
        "retry_terminating": 2.0, "resync": 300.0, "cluster_unreachable": 10.0,
        "shared_secrets": 10.0, "agent_token_seconds": 365 * 24 * 3600}
    assert asdict(GracefulRebootTimings()) == {
        "poll": 5.0, "default_drain_timeout": 600.0, "node_flow": FLOW_DEFAULTS}
    assert asdict(UpdateTimings()) == {
        "active_requeue": 5.0, "sweep_period": 30.0, "node_flow": FLOW_DEFAULTS}
    assert asdict(VolumeTimings()) == {"job_poll": 2.0, "resync": 300.0}
    assert asdict(IpamHostTimings()) == {"pending_retry": 30.0}
    assert asdict(IronicTimings()) == {"action_poll": 1.0, "power_poll": 2.0}
    assert asdict(WorkloadTimings()) == {"busy_requeue": 1.0, "idle_requeue": 30.0}
    assert asdict(BareMetalHostSettings()) == {
        "poll_floor": 2.0, "poll_default": 10.0, "steady_poll": 300.0,
        "error_backoff_base": 10.0, "error_backoff_cap": 600.0,
        "backend_retry_base": 5.0, "backend_retry_cap": 120.0, "jitter": 0.1,
        "calls_per_minute": 30, "delete_error_attempts": 3}
    assert ControllerTimings() == ControllerTimings(
        baremetalhost=BareMetalHostSettings(), ipamhost=IpamHostTimings(),
        machine=MachineTimings(), volume=VolumeTimings(), update=UpdateTimings(),
        graceful_reboot=GracefulRebootTimings())
    assert asdict(IronicPeriodics()) == {"sync_power_state_interval": 30,
                                         "check_provision_state_interval": 5,
                                         "firmware_status_interval": 60}
    assert Settings().timings == Timings(ControllerTimings(), IronicTimings(),
                                         WorkloadTimings(), IronicPeriodics())


def test_nonsense_is_refused() -> None:
    with pytest.raises(ValueError):
        MachineTimings(shared_secrets=-1)
    with pytest.raises(ValueError):
        MaintenanceTimings(poll=0)
    with pytest.raises(ValueError):
        MaintenanceTimings(eviction_backoff_base=4, eviction_backoff_cap=1)
    with pytest.raises(ValueError):
        MachineTimings(resync=-1)
    with pytest.raises(ValueError):
        VolumeTimings(job_poll=0)
    with pytest.raises(ValueError):
        IronicTimings(power_poll=0)
    with pytest.raises(ValueError):
        IronicPeriodics(sync_power_state_interval=0)


SMALL = Timings(
    controllers=ControllerTimings(
        baremetalhost=BareMetalHostSettings(poll_floor=0.01, steady_poll=0.5),
        ipamhost=IpamHostTimings(pending_retry=0.3),
        machine=MachineTimings(retry_missing=0.1, retry_no_host=0.2, retry_drain=0.3,
                               retry_terminating=0.4, resync=0.5),
        volume=VolumeTimings(job_poll=0.2, resync=0.6),
        update=UpdateTimings(active_requeue=0.2, sweep_period=0.7,
                             node_flow=MaintenanceTimings(poll=0.2, lock_retry=0.3)),
        graceful_reboot=GracefulRebootTimings(
            poll=0.3, default_drain_timeout=0.8,
            node_flow=MaintenanceTimings(poll=0.4, reboot_retry=1.0)),
    ),
    ironic=IronicTimings(action_poll=0.1, power_poll=0.2),
    reference_workloads=WorkloadTimings(busy_requeue=0.2, idle_requeue=0.9),
)


def reconcilers(controllers: list[Any]) -> dict[str, Any]:
    return {c.name: c.reconciler for c in controllers}


async def test_the_composition_root_passes_the_timings_through() -> None:
    client = ApiClient()
    try:
        got = reconcilers(build_controllers(
            Settings(timings=SMALL), client, provisioner=FixtureProvisioner(),
            registry=CollectorRegistry(), default_image=None, alertmanager_url=None,
            emulated=True))
    finally:
        await client.close()
    t = SMALL.controllers
    assert got["baremetalhost"].settings is t.baremetalhost
    assert got["ipamhost"].timings is t.ipamhost
    assert got["machine"].timings is t.machine
    assert got["machine"].committer.timings is t.machine
    assert got["volume"].timings is t.volume
    assert got["volume"].committer.timings is t.volume
    assert got["update"].timings is t.update
    assert isinstance(got["update"].flow, NodeMaintenance)
    assert got["update"].flow.clock is got["update"].clock
    assert got["update"].flow.timings is t.update.node_flow
    assert got["update"].flow.drainer.timings is t.update.node_flow
    assert got["graceful-reboot"].timings is t.graceful_reboot
    assert got["graceful-reboot"].flow.timings is t.graceful_reboot.node_flow
    assert got["graceful-reboot"].flow.drainer.timings is t.graceful_reboot.node_flow
    assert got["reference-workloads"].timings is SMALL.reference_workloads


async def test_without_timings_every_controller_waits_the_defaults() -> None:
    client = ApiClient()
    try:
        got = reconcilers(all_controllers(client, provisioner=FixtureProvisioner(),
                                          registry=CollectorRegistry(),
                                          cluster=ClusterOptions()))
    finally:
        await client.close()
    assert got["baremetalhost"].settings == BareMetalHostSettings()
    assert got["ipamhost"].timings == IpamHostTimings()
    assert got["machine"].timings == MachineTimings()
    assert got["volume"].timings == VolumeTimings()
    assert got["update"].timings == UpdateTimings()
    assert got["update"].flow.timings == MaintenanceTimings()
    assert got["graceful-reboot"].timings == GracefulRebootTimings()
    assert got["graceful-reboot"].flow.timings == MaintenanceTimings()
