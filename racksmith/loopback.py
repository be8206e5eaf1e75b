"""The virtual datacenter's network: each emulated address has a loopback image.

Owns the file ``<datacenter>/network.json`` that says which 127/8 address
stands for which address of the virtual datacenter (a host's control-plane
address, a cluster's VIP). Every 127/8 address is local on Linux with no
set-up, so each emulated host serves on an address of its own with kube's
well-known ports (6443, 2379, 2380), as a real host does.

Layout: ``{"site": S, "images": {"10.10.0.101": "127.S.0.1", ...}}``. The
site byte ``S`` is chosen when the file is made: one with no listening TCP
socket on ``127.S.*`` (``/proc/net/tcp``), so two datacenters on one machine
(two test racks at once) never share an image although their clusters use
the same networks. Images are handed out in order from ``127.S.0.1`` and
never change; a new one is written under an exclusive ``flock`` (the host
agents, the datacenter and the management plane all read the file, each in
its own process). File 0600, in the datacenter's 0700 directory.

Used by the host agents (emulated kubeadm, static pods), the management
plane (a cluster's endpoint as the controllers and ``racksmith kubeconfig``
reach it) and the tests. Pure file I/O; imports nothing of Racksmith's.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ENV", "LoopbackMap", "listening_sites"]

#: The environment variable naming the file, set for the agents of emulated hosts.
ENV = "RACKSMITH_EMULATED_NETWORK"
_FIRST_SITE, _LAST_SITE = 16, 250


def listening_sites() -> set[int]:
    """The second bytes of every 127/8 address with a listening TCP socket."""
    sites: set[int] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                addr = int(fields[1].split(":")[0], 16).to_bytes(4, "little")
                if addr[0] == 127:
                    sites.add(addr[1])
    return sites


class LoopbackMap:
    """The images of one virtual datacenter's addresses (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: dict[str, str] = {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, object]]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = self._read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                tmp = self.path.with_suffix(".tmp")
                with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                    json.dump(data, f, sort_keys=True, indent=1)
                os.replace(tmp, self.path)
        finally:
            os.close(fd)

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def ensure(self) -> int:
        """Make the file (choosing the site byte) if needed; the site byte."""
        with self._locked() as data:
            site = data.get("site")
            if not isinstance(site, int):
                busy = listening_sites()
                free = [s for s in range(_FIRST_SITE, _LAST_SITE + 1) if s not in busy]
                site = random.choice(free) if free else _FIRST_SITE
                data["site"] = site
                data["images"] = {}
            return site

    def lookup(self, address: str) -> str | None:
        """The image of ``address``, if it has one (never allocates)."""
        key = _normal(address)
        if key in self._cache:
            return self._cache[key]
        images = self._read().get("images")
        image = images.get(key) if isinstance(images, dict) else None
        if isinstance(image, str):
            self._cache[key] = image
            return image
        return None

    def image(self, address: str) -> str:
        """The image of ``address``, handed out now if it has none."""
        found = self.lookup(address)
        if found is not None:
            return found
        key = _normal(address)
        self.ensure()
        with self._locked() as data:
            images = data.setdefault("images", {})
            assert isinstance(images, dict)
            if key not in images:
                site = int(data["site"])  # type: ignore[call-overload]
                used = {ipaddress.ip_address(v) for v in images.values()}
                n = len(images) + 1
                while True:
                    candidate = ipaddress.ip_address(f"127.{site}.{n // 254}.{n % 254 + 1}")
                    if candidate not in used:
                        break
                    n += 1
                images[key] = str(candidate)
            image = str(images[key])
        self._cache[key] = image
        return image


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.strip().strip("[]")))
    except ValueError:
        raise ValueError(f"{address!r} is not an IP address") from None
