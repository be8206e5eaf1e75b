"""Listening sockets of the virtual datacenter, bound once by whoever knows
the port first and served by whoever uses it.

Owns the rule that replaces "pick a free port, close it, hand the number
on" (a race: another process may take the port in between): a port is
bound here, by the process that serves it (port 0: the kernel picks one and
the bound socket reports it), or bound by ``racksmith up`` and inherited by
the ``racksmith emulator`` child it spawns (``pass_fds``, as systemd socket
activation does), so the port is never free between being chosen and being
served. A port that is already taken is an error that names it.

:class:`Listeners` holds the three servers' sockets of one datacenter
(ramdisk agent, image server, BMCs). Used by ``datacenter``, ``agent``,
``images``, ``fakebmc``, ``redfish`` and the app's ``EmulatorService``.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

from aiohttp import web

HOST = "127.0.0.1"
NAMES = ("agent", "http", "bmc")
"""The listeners of a datacenter: the ramdisk agent API, the image/ISO
server (Ironic's ``http_root``), the BMCs (Redfish or fake)."""


class PortInUse(OSError):
    """A port that had to be used as is (recorded in ``DIR/ports.json``) is
    taken by another process."""


def bind_listener(port: int = 0, *, what: str = "listener", host: str = HOST) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``port`` 0: any
    free port; read it with ``getsockname``). Raises :class:`PortInUse`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(errno.EADDRINUSE,
                            f"{what}: port {port} on {host} is already in use") from None
        raise
    sock.setblocking(False)
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


async def serve(app: web.Application, sock: socket.socket) -> web.AppRunner:
    """Serve ``app`` on the bound ``sock`` (closed by ``runner.cleanup()``)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


@dataclass
class Listeners:
    """The bound sockets of one datacenter, by name (see :data:`NAMES`)."""

    sockets: dict[str, socket.socket] = field(default_factory=dict)

    @classmethod
    def bind(cls, ports: dict[str, int] | None = None) -> Listeners:
        """Bind every listener on its given port (missing or 0: any free one)."""
        ports = ports or {}
        out = cls()
        try:
            for name in NAMES:
                out.sockets[name] = bind_listener(ports.get(name, 0), what=f"emulator {name}")
        except BaseException:
            out.close()
            raise
        return out

    @classmethod
    def inherit(cls, fds: dict[str, int]) -> Listeners:
        """Adopt listening sockets passed down by the parent process."""
        out = cls()
        for name, fd in fds.items():
            sock = socket.socket(fileno=fd)
            sock.setblocking(False)
            out.sockets[name] = sock
        return out

    @property
    def ports(self) -> dict[str, int]:
        return {name: port_of(sock) for name, sock in self.sockets.items()}

    def fds(self) -> dict[str, int]:
        return {name: sock.fileno() for name, sock in self.sockets.items()}

    def take(self, name: str) -> socket.socket | None:
        """Hand the socket to its server (which closes it when it stops)."""
        return self.sockets.pop(name, None)

    def close(self) -> None:
        """Close what no server took (the parent's copies after a spawn)."""
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
