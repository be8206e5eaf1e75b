"""The virtual datacenter's loopback images (``racksmith.loopback``)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from racksmith.loopback import LoopbackMap


def test_images_are_distinct_stable_and_shared_through_the_file(tmp_path: Path) -> None:
    a = LoopbackMap(tmp_path / "dc" / "network.json")
    site = a.ensure()
    images = {addr: a.image(addr) for addr in ("10.10.0.5", "10.30.0.5", "10.10.0.101")}
    assert len(set(images.values())) == 3
    for image in images.values():
        assert ipaddress.ip_address(image) in ipaddress.ip_network(f"127.{site}.0.0/16")
    b = LoopbackMap(tmp_path / "dc" / "network.json")  # another process's view
    assert b.lookup("10.10.0.5") == images["10.10.0.5"]
    assert b.image("10.30.0.5") == images["10.30.0.5"]
    assert b.lookup("10.99.0.1") is None
    assert (tmp_path / "dc" / "network.json").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="not an IP address"):
        a.image("demo.example")
