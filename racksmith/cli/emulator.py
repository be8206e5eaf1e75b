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
from racksmith.emulator.listeners import NAMES, Listeners


def parse_fds(text: str) -> dict[str, int]:
    """``agent=3,http=4,bmc=5`` → ``{"agent": 3, ...}`` (every name, or none)."""
    if not text.strip():
        return {}
    fds: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in NAMES or not value.strip().isdigit():
            raise ValueError(f"expected {'=FD,'.join(NAMES)}=FD, got {part!r}")
        fds[name.strip()] = int(value)
    if set(fds) != set(NAMES):
        raise ValueError(f"every listener is needed: {', '.join(NAMES)}")
    return fds


async def run_emulator(data_dir: Path, count: int, ironic_url: str, *,
                       fds: dict[str, int] | None = None, ports: dict[str, int] | None = None,
                       hardware: str = "redfish") -> None:
    """Serve the inherited listeners (``fds``), else bind ``ports`` here."""
    listeners = Listeners.inherit(fds) if fds else Listeners.bind(ports or {})
    dc = VirtualDatacenter(data_dir, count, ironic_url, listeners=listeners,
                           hardware=hardware)
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
