"""``racksmith emulator``: the virtual datacenter as a foreground process.

Owns: running :class:`racksmith.emulator.datacenter.VirtualDatacenter` until
SIGINT/SIGTERM. ``racksmith up --emulate-hosts N`` starts it as its own
process so that emulated servers, like real ones, survive a control-plane
crash.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from racksmith.emulator.datacenter import VirtualDatacenter


async def run_emulator(data_dir: Path, count: int, ironic_url: str, *, redfish_port: int,
                       agent_port: int, http_port: int, hardware: str = "redfish") -> None:
    dc = VirtualDatacenter(data_dir, count, ironic_url, redfish_port=redfish_port,
                           agent_port=agent_port, http_port=http_port, hardware=hardware)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await dc.start()
        print(f"emulator ready: {count} hosts, manifest {dc.manifest_path}", flush=True)
        await stop.wait()
    finally:
        await dc.stop()
