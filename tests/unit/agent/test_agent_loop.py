"""The reconcile loop against an in-memory LCMMachine (no API server): status
reports per item, hashes, phases, a failing item stopping the pass, back-off,
re-verification and heartbeats on a fake clock; plus the config file and the
kubelet's address and capacity rules."""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from racksmith.agent.config import AgentTiming, ConfigError, load_config
from racksmith.agent.executors import ExecContext
from racksmith.agent.host import EmulatedHost
from racksmith.agent.kubelet import capacity_from_hardware, internal_ip, netplan_addresses
from racksmith.agent.loop import Outcome, ReconcileLoop
from racksmith.clock import FakeClock
from racksmith.kinds.cluster import StateItem
from racksmith.planners.release import item_hash


class FakeLCM:
    """LCMApi double: one LCMMachine; status patches merged and recorded."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.obj: dict[str, Any] = {
            "apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "LCMMachine",
            "metadata": {"name": "m", "namespace": "ns", "generation": 1},
            "spec": {"machineRef": {"name": "m"}, "clusterName": "c", "release": "r1",
                     "stateItems": items},
        }
        self.patches: list[dict[str, Any]] = []

    async def get_lcm_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.obj)

    async def patch_lcm_status(self, namespace: str, name: str,
                               status: dict[str, Any]) -> None:
        self.patches.append(copy.deepcopy(status))
        self.obj.setdefault("status", {}).update(copy.deepcopy(status))

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.obj.get("status") or {})

    def set_items(self, items: list[dict[str, Any]]) -> None:
        self.obj["spec"]["stateItems"] = items
        self.obj["metadata"]["generation"] += 1


def file_item(name: str, path: str, content: str = "x") -> dict[str, Any]:
    return {"name": name, "phase": "configuration", "type": "file",
            "params": {"path": path, "content": content}}


def make_loop(tmp_path: Path, api: FakeLCM, clock: FakeClock | None = None,
              timing: AgentTiming = AgentTiming()) -> ReconcileLoop:
    ctx = ExecContext(host=EmulatedHost(tmp_path), node_name="m")
    return ReconcileLoop(api, "ns", "m", ctx, clock or FakeClock(), timing,
                         agent_version="test/1", jitter=lambda: 1.0)


async def test_pass_reports_every_item_with_its_hash(tmp_path: Path) -> None:
    items = [file_item("a", "/etc/a"), file_item("b", "/etc/b")]
    api = FakeLCM(items)
    result = await make_loop(tmp_path, api).run_pass()
    assert result.outcome == Outcome.READY
    assert result.changed == {"a": True, "b": True}
    status = api.status
    assert status["phase"] == "Ready"
    assert status["release"] == "r1"
    assert status["observedGeneration"] == 1
    assert status["agentVersion"] == "test/1"
    assert "heartbeat" in status
    assert [(i["name"], i["hash"], i["state"], i["changed"]) for i in status["items"]] == [
        (d["name"], item_hash(StateItem.model_validate(d)), "Applied", True) for d in items]
    # One report up front, one per item; Deploying until the last one.
    assert [p["phase"] for p in api.patches] == ["Deploying", "Deploying", "Ready"]
    again = await make_loop(tmp_path, api).run_pass()
    assert again.changed == {"a": False, "b": False}
    assert [i["changed"] for i in api.status["items"]] == [False, False]


async def test_failing_item_stops_the_pass(tmp_path: Path) -> None:
    api = FakeLCM([file_item("a", "/etc/a"), file_item("bad", "etc/relative"),
                   file_item("c", "/etc/c")])
    result = await make_loop(tmp_path, api).run_pass()
    assert result.outcome == Outcome.FAILED
    assert result.error is not None and "must be absolute" in result.error
    status = api.status
    assert status["phase"] == "Failed"
    assert "release" not in status
    states = {i["name"]: i for i in status["items"]}
    assert states["a"]["state"] == "Applied"
    assert states["bad"]["state"] == "Failed" and "must be absolute" in states["bad"]["error"]
    assert states["c"]["state"] == "Pending"
    assert not (tmp_path / "etc/c").exists()


async def test_paused_applies_nothing(tmp_path: Path) -> None:
    api = FakeLCM([file_item("a", "/etc/a")])
    api.obj["spec"]["paused"] = True
    assert (await make_loop(tmp_path, api).run_pass()).outcome == Outcome.PAUSED
    assert api.patches == []
    assert not (tmp_path / "etc/a").exists()


async def test_changed_item_is_pending_until_reapplied(tmp_path: Path) -> None:
    api = FakeLCM([file_item("a", "/etc/a"), file_item("b", "/etc/b")])
    loop = make_loop(tmp_path, api)
    await loop.run_pass()
    api.set_items([file_item("a", "/etc/a"), file_item("b", "/etc/b", "new")])
    await loop.run_pass()
    first = api.patches[-3]
    assert first["phase"] == "Deploying" and first["observedGeneration"] == 2
    assert [i["state"] for i in first["items"]] == ["Applied", "Pending"]
    assert api.status["phase"] == "Ready"
    assert (tmp_path / "etc/b").read_text() == "new"


async def test_loop_backs_off_reverifies_and_heartbeats(tmp_path: Path) -> None:
    clock = FakeClock()
    timing = AgentTiming(poll=1, heartbeat=20, reverify=300, backoff_base=2, backoff_cap=8)
    api = FakeLCM([file_item("bad", "relative")])
    loop = make_loop(tmp_path, api, clock, timing)
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    try:
        await clock.advance(0)
        failed_passes = lambda: sum(1 for p in api.patches  # noqa: E731
                                    if p.get("phase") == "Failed")
        assert failed_passes() == 1
        await clock.advance(1.5)  # back-off 2 s: no retry yet
        assert failed_passes() == 1
        await clock.advance(1)
        assert failed_passes() == 2
        await clock.advance(4)  # then 4 s
        assert failed_passes() == 3
        api.set_items([file_item("good", "/etc/good")])  # a new generation: at once
        await clock.advance(1)
        assert api.status["phase"] == "Ready"
        count = len(api.patches)
        await clock.advance(25)  # idle: only a heartbeat
        idle = api.patches[count:]
        assert idle and all(set(p) == {"heartbeat", "agentVersion", "rebootRequired"}
                               for p in idle)
        (tmp_path / "etc/good").unlink()
        await clock.advance(300)  # re-verification repairs the host
        assert (tmp_path / "etc/good").exists()
        assert api.status["phase"] == "Ready"
    finally:
        stop.set()
        await clock.advance(2)
        await asyncio.wait_for(task, 5)


def test_backoff_is_capped(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, FakeLCM([]), timing=AgentTiming(backoff_base=2, backoff_cap=60))
    assert [loop.backoff(n) for n in range(7)] == [2, 4, 8, 16, 32, 60, 60]


# --- config ----------------------------------------------------------------------------


def test_config_parsed(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    path.write_text(f"server: https://127.0.0.1:6443\ncertificateAuthorityData: {ca}\n"
                    "token: secret\nnamespace: ns\nlcmMachine: m\nnodeName: m\n")
    config = load_config(path)
    assert (config.server, config.namespace, config.lcm_machine, config.node_name) == (
        "https://127.0.0.1:6443", "ns", "m", "m")
    assert "secret" not in repr(config)
    kubeconfig = config.kubeconfig()
    assert kubeconfig["users"][0]["user"]["token"] == "secret"


@pytest.mark.parametrize("text,problem", [
    ("server: x\n", "token"),
    ("- a list\n", "mapping"),
    ("server: s\ntoken: t\nnamespace: n\nlcmMachine: m\nnodeName: m\n"
     "certificateAuthorityData: '***'\n", "base64"),
])
def test_config_errors(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


# --- kubelet rules ---------------------------------------------------------------------


def test_netplan_addresses_in_file_order() -> None:
    doc = {"network": {"version": 2, "ethernets": {
        "eno1": {"addresses": ["192.168.1.5/24"]},
        "eno2": {"addresses": [{"10.0.0.7/24": {"label": "x"}}, "fd00::7/64"]}},
        "bonds": {"bond0": {"addresses": ["10.1.0.2/24"]}}}}
    assert netplan_addresses(doc) == ["192.168.1.5", "10.0.0.7", "fd00::7", "10.1.0.2"]
    assert netplan_addresses(None) == []


def test_internal_ip_prefers_control_plane_cidrs_in_order() -> None:
    addresses = ["192.168.1.5", "10.0.0.7", "10.1.0.2"]
    assert internal_ip(addresses, ["10.1.0.0/24", "10.0.0.0/24"]) == "10.1.0.2"
    assert internal_ip(addresses, ["172.16.0.0/12"]) == "192.168.1.5"
    assert internal_ip([], ["10.0.0.0/8"]) is None


def test_capacity_from_hardware() -> None:
    assert capacity_from_hardware({"cpus": 4, "memoryBytes": 8 * 2**30}) == {
        "cpu": "4", "memory": "8388608Ki", "pods": "110"}
    assert capacity_from_hardware({}) == {"pods": "110"}
