"""A static HTTP server for images and virtual-media ISOs (127.0.0.1 only).

Owns one aiohttp server that serves a directory: Ironic's ``[deploy]http_root``
(where it publishes virtual-media ISOs under ``redfish/``) and, under
``images/``, the emulator's own files: a small dummy deploy ISO (what BMCs
"boot") and a sample OS image with recognisable bytes plus its sha256.
Started by ``datacenter.VirtualDatacenter``; usable alone in tests.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web

from racksmith.emulator.listeners import bind_listener, port_of, serve

log = structlog.get_logger("racksmith.emulator.images")

DEPLOY_ISO = "deploy.iso"
SAMPLE_IMAGE = "sample-os.img"
SAMPLE_MAGIC = b"RACKSMITH-SAMPLE-OS-IMAGE\n"


@dataclass(frozen=True)
class PublishedImage:
    """A file under ``images/``: its URL and sha256 hex digest."""

    name: str
    url: str
    sha256: str
    size: int


def make_deploy_iso(path: Path) -> None:
    """Write a tiny ISO 9660 file (volume descriptors only): enough for
    format detection; nothing boots it but the emulated agent's imagination."""
    sector = 2048
    data = bytearray(sector * 20)
    pvd = bytearray(sector)
    pvd[0] = 1
    pvd[1:6] = b"CD001"
    pvd[6] = 1
    pvd[40:72] = b"RACKSMITH_DEPLOY".ljust(32)
    pvd[80:88] = (20).to_bytes(4, "little") + (20).to_bytes(4, "big")
    pvd[128:132] = sector.to_bytes(2, "little") + sector.to_bytes(2, "big")
    pvd[881] = 1
    term = bytearray(sector)
    term[0] = 255
    term[1:6] = b"CD001"
    term[6] = 1
    data[16 * sector : 17 * sector] = pvd
    data[17 * sector : 18 * sector] = term
    path.write_bytes(bytes(data))


def make_sample_image(path: Path, size: int = 2 * 1024 * 1024) -> None:
    """Write a raw "OS image": a magic header, then a deterministic pattern."""
    block = hashlib.sha256(b"racksmith").digest() * 128  # 4 KiB
    body = SAMPLE_MAGIC + (block * (size // len(block) + 1))
    path.write_bytes(body[:size])


class ImageServer:
    """Serves ``root`` on ``http://127.0.0.1:<port>/``; ``port=0`` picks one
    at ``start``; ``sock``: an already bound listener (see ``listeners``).

    ``start`` creates ``root/images`` with the deploy ISO and the sample
    image if missing. ``start``/``stop`` are idempotent.
    """

    def __init__(self, root: Path, port: int = 0, sock: socket.socket | None = None) -> None:
        self.root = Path(root)
        self._sock = sock
        self._port = port_of(sock) if sock is not None else port
        self._runner: web.AppRunner | None = None

    @property
    def images_dir(self) -> Path:
        """Where the emulator's own files live (served at ``/images/``)."""
        return self.root / "images"

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL, no trailing slash: Ironic's ``[deploy]http_url``."""
        return f"http://127.0.0.1:{self._port}"

    def image_url(self, name: str) -> str:
        """URL of ``images/<name>``."""
        return f"{self.url}/images/{name}"

    @property
    def deploy_iso_url(self) -> str:
        """URL of the dummy deploy ISO (``driver_info.deploy_iso``)."""
        return self.image_url(DEPLOY_ISO)

    def publish(self, name: str, data: bytes) -> PublishedImage:
        """Store ``data`` as ``images/<name>`` and describe it."""
        self.images_dir.mkdir(parents=True, exist_ok=True)
        (self.images_dir / name).write_bytes(data)
        return self.describe(name)

    def describe(self, name: str) -> PublishedImage:
        """URL, sha256 and size of ``images/<name>`` (reads the file)."""
        path = self.images_dir / name
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return PublishedImage(name, self.image_url(name), digest.hexdigest(), path.stat().st_size)

    def _prepare(self) -> None:
        self.images_dir.mkdir(parents=True, exist_ok=True)
        iso = self.images_dir / DEPLOY_ISO
        if not iso.exists():
            make_deploy_iso(iso)
        sample = self.images_dir / SAMPLE_IMAGE
        if not sample.exists():
            make_sample_image(sample)
        digest = self.describe(SAMPLE_IMAGE).sha256
        (self.images_dir / f"{SAMPLE_IMAGE}.sha256sum").write_text(f"{digest}  {SAMPLE_IMAGE}\n")

    async def start(self) -> None:
        """Create the files and listen."""
        if self._runner is not None:
            return
        self._prepare()
        app = web.Application()
        app.router.add_static("/", self.root, show_index=False, follow_symlinks=False)
        sock, self._sock = self._sock or bind_listener(self._port, what="image server"), None
        self._port = port_of(sock)
        self._runner = await serve(app, sock)
        log.info("image server started", url=self.url, root=str(self.root))

    async def stop(self) -> None:
        """Stop listening."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
