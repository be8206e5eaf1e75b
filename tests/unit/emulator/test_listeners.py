"""Listening sockets: bound by the user of a port, never chosen ahead and
handed on; a taken port is an error naming it; the ports book is private."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from racksmith.app.services import PortBook
from racksmith.cli.emulator import parse_fds
from racksmith.emulator.listeners import NAMES, Listeners, PortInUse, bind_listener, port_of
from racksmith.ironic.process import listening_pids


def test_bound_sockets_report_their_ports_and_survive_inheritance() -> None:
    first = Listeners.bind()
    try:
        ports = first.ports
        assert set(ports) == set(NAMES) and all(ports.values())
        assert len(set(ports.values())) == len(NAMES)
        # What a child sees: the same sockets through their file descriptors.
        dup = {name: os.dup(fd) for name, fd in first.fds().items()}
        child = Listeners.inherit(dup)
        assert child.ports == ports
        child.close()
        # The ports stay bound while the parent holds them: nobody else can bind.
        with pytest.raises(PortInUse, match=f"port {ports['agent']}"):
            bind_listener(ports["agent"], what="emulator agent")
    finally:
        first.close()
    # Closed: the recorded port can be bound again (a restart reuses it).
    again = bind_listener(ports["http"])
    assert port_of(again) == ports["http"]
    again.close()


def test_listening_pids_finds_this_process() -> None:
    sock = bind_listener(0)
    try:
        assert os.getpid() in listening_pids(port_of(sock))
    finally:
        sock.close()
    unbound = socket.socket()
    unbound.bind(("127.0.0.1", 0))
    try:
        assert listening_pids(unbound.getsockname()[1]) == set()  # bound, not listening
    finally:
        unbound.close()


def test_parse_fds() -> None:
    assert parse_fds("") == {}
    assert parse_fds("agent=3,http=4,bmc=5") == {"agent": 3, "http": 4, "bmc": 5}
    for bad in ("agent=3", "agent=x,http=4,bmc=5", "nope=3,http=4,bmc=5", "agent3"):
        with pytest.raises(ValueError):
            parse_fds(bad)


def test_port_book_records_what_was_bound(tmp_path: Path) -> None:
    book = PortBook(tmp_path)
    assert book.get("ironic") == 0
    book.record({"ironic": 27001, "agent": 40000})
    book.record({"agent": 40001})
    assert book.all() == {"ironic": 27001, "agent": 40001}
    assert stat.S_IMODE(os.stat(book.path).st_mode) == 0o600
    book.path.write_text("{not json")
    assert book.get("agent") == 0
