"""The virtual datacenter boots the installed OS (without Ironic).

Real sushy-tools BMCs (and, the same test, the instant fake BMCs of
``--hardware fake``) and the emulated agent; the config drive is built by
the very function Ironic calls (openstacksdk's ``configdrive.build``, run in
the Ironic venv) and written with the image by ``image_writer`` as a deploy
would. Then, through the BMC only: power On from Hdd → the OS starts the
racksmith process (a stand-in script); the datacenter stops → so does the
process; a new datacenter on the same data dir resumes the host (still On)
→ the process runs again; ForceOff → it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from racksmith.emulator.datacenter import VirtualDatacenter
from racksmith.emulator.image_writer import ImageWriter
from racksmith.emulator.inventory import EmulatedHost
from racksmith.emulator.osboot import PID_FILE, BootOutcome
from racksmith.emulator.redfish import DEFAULT_PYTHON

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not DEFAULT_PYTHON.exists(), reason="Ironic venv missing: make install"),
]

FAKE_AGENT = """\
import json, os, sys, time
from pathlib import Path
args = sys.argv[1:]
root = Path(args[args.index("--root") + 1])
(root / "fake-agent.json").write_text(json.dumps({"argv": args, "pid": os.getpid()}))
while True:
    time.sleep(0.05)
"""

USER_DATA = """\
#cloud-config
write_files:
  - path: /etc/racksmith/agent.yaml
    content: "lcmMachine: m1\\n"
runcmd:
  - [racksmith, agent, --config, /etc/racksmith/agent.yaml]
"""


def ironic_configdrive(user_data: str, meta: dict[str, Any]) -> str:
    """What Ironic's conductor sends the agent (base64 of a gzipped ISO)."""
    code = ("import json, sys; from openstack.baremetal.configdrive import build; "
            "print(build(json.loads(sys.argv[1]), user_data=sys.argv[2].encode()))")
    out = subprocess.run([str(DEFAULT_PYTHON), "-c", code, json.dumps(meta), user_data],
                         check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def _bmc(dc: VirtualDatacenter, session: aiohttp.ClientSession, host: EmulatedHost,
               method: str, path: str, body: dict[str, Any]) -> None:
    auth = aiohttp.encode_basic_auth(host.bmc_username, dc.password(host))
    if dc.redfish is not None:
        url = dc.redfish.system_url(host)
    else:
        assert dc.fakebmc is not None
        url = dc.fakebmc.system_url(host)
    async with session.request(method, f"{url}{path}", json=body,
                               headers={"Authorization": auth}) as resp:
        assert resp.status < 400, await resp.text()


async def _boot_from_disk(dc: VirtualDatacenter, session: aiohttp.ClientSession,
                          host: EmulatedHost) -> None:
    if dc.redfish is not None:
        await _bmc(dc, session, host, "PATCH", "", {"Boot": {
            "BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}})
        await _bmc(dc, session, host, "POST", "/Actions/ComputerSystem.Reset",
                   {"ResetType": "On"})
    else:
        await _bmc(dc, session, host, "PUT", "/boot", {"device": "Hdd", "persistent": True})
        await _bmc(dc, session, host, "POST", "/power", {"action": "On"})


async def _force_off(dc: VirtualDatacenter, session: aiohttp.ClientSession,
                     host: EmulatedHost) -> None:
    if dc.redfish is not None:
        await _bmc(dc, session, host, "POST", "/Actions/ComputerSystem.Reset",
                   {"ResetType": "ForceOff"})
    else:
        await _bmc(dc, session, host, "POST", "/power", {"action": "ForceOff"})


async def _agent_pid(dc: VirtualDatacenter, host: EmulatedHost, other_than: int = 0) -> int:
    root = dc.os_boot.root(host)
    for _ in range(300):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = int(json.loads((root / "fake-agent.json").read_text())["pid"])
            if pid != other_than and _alive(pid):
                return pid
        await asyncio.sleep(0.05)
    raise AssertionError(f"no agent on {host.name}: {dc.os_boot.last_boot(host)}")


def _datacenter(data_dir: Path, script: Path, hardware: str) -> VirtualDatacenter:
    dc = VirtualDatacenter(data_dir, 1, "http://127.0.0.1:9", seed=11, boot_delay=0.0,
                           hardware=hardware)
    dc.os_boot.command = (sys.executable, str(script))
    dc.os_boot.stop_timeout = 2.0
    return dc


@pytest.fixture
def started() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("hardware", ["redfish", "fake"])
async def test_disk_boot_runs_the_agent_across_emulator_restarts(
    tmp_path: Path, started: list[int], hardware: str
) -> None:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    data_dir = tmp_path / "data"
    dc = _datacenter(data_dir, script, hardware)
    await dc.start()
    host = dc.hosts[0]
    try:
        async with aiohttp.ClientSession() as session:
            image = dc.sample_image()
            result = await ImageWriter(dc.disks, lambda: session).write(
                host,
                {"image_info": {"urls": [image.url], "os_hash_algo": "sha256",
                                "os_hash_value": image.sha256},
                 "configdrive": ironic_configdrive(USER_DATA, {"uuid": host.uuid,
                                                               "name": "m1"})},
                {},
            )
            assert result["configdrive"]
            await _boot_from_disk(dc, session, host)
            first = await _agent_pid(dc, host)
            started.append(first)
        root = dc.os_boot.root(host)
        assert (root / "etc/racksmith/agent.yaml").read_text() == "lcmMachine: m1\n"
        assert (root / "etc/hostname").read_text() == "m1\n"
        assert (root / PID_FILE).read_text().split() == [str(first)]
    finally:
        await dc.stop()
    assert not _alive(first)

    dc = _datacenter(data_dir, script, hardware)
    await dc.start()  # the BMC says On: the OS boots again
    try:
        second = await _agent_pid(dc, host, other_than=first)
        started.append(second)
        report = dc.os_boot.last_boot(host)
        assert report is not None and report.outcome is BootOutcome.BOOTED
        async with aiohttp.ClientSession() as session:
            await _force_off(dc, session, host)
        for _ in range(200):
            if not _alive(second):
                break
            await asyncio.sleep(0.05)
        assert not _alive(second)
    finally:
        await dc.stop()
