"""IPA's ``write_image`` for emulated hosts: download an image onto a disk file.

Owns the image path of the emulated agent: which disk (root device hints,
else the smallest), the download (http(s) from 127.0.0.1 only — emulated
hosts never reach beyond loopback), checksum verification (``os_hash_*``,
plain or ``algo:`` checksums, or a checksum-file URL) and the config drive
(base64, optionally gzipped, or a URL). Called by ``agent``.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import aiohttp
import structlog

from racksmith.emulator.disks import DiskStore
from racksmith.emulator.inventory import DiskInfo, EmulatedHost, root_disk

log = structlog.get_logger("racksmith.emulator.image_writer")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class CommandFailed(Exception):
    """An agent command failed; becomes the result's ``command_error``."""

    def __init__(self, message: str, error_type: str = "CommandExecutionError") -> None:
        super().__init__(message)
        self.error_type = error_type


class ImageWriter:
    """Writes images onto the disk files of ``disks``.

    ``session`` returns the HTTP client session to download with.
    """

    def __init__(self, disks: DiskStore, session: Callable[[], aiohttp.ClientSession]) -> None:
        self.disks = disks
        self._session = session

    async def write(
        self, host: EmulatedHost, args: dict[str, Any], node: dict[str, Any]
    ) -> dict[str, Any]:
        """Run IPA's ``write_image`` step: download ``image_info.urls[0]``
        into the root disk (root device hints from the node's properties),
        verify the checksum, store the config drive. Returns what was done;
        raises :class:`CommandFailed`."""
        info = args.get("image_info") or {}
        urls = info.get("urls") or []
        if not urls:
            raise CommandFailed("image_info has no urls", "ImageDownloadError")
        url = str(urls[0])
        hints = (node.get("properties") or {}).get("root_device") or None
        try:
            disk = root_disk(host.inventory, hints)
        except LookupError as exc:
            raise CommandFailed(str(exc), "DeviceNotFound") from exc
        algo, expected = await self._expected_checksum(info, url)
        digest = hashlib.new(algo) if algo else None
        written = await self._download_to_disk(host, disk, url, digest)
        if digest is not None and expected and digest.hexdigest() != expected.lower():
            raise CommandFailed(
                f"checksum mismatch for {url}: got {digest.hexdigest()}, expected {expected}",
                "ImageChecksumError",
            )
        configdrive = args.get("configdrive") or info.get("configdrive")
        if configdrive:
            data = await self._configdrive_bytes(str(configdrive))
            await asyncio.to_thread(self.disks.write_configdrive, host, disk, data)
        log.info("image written", host=host.name, disk=disk.name, bytes=written)
        return {
            "url": url,
            "disk": disk.name,
            "bytes": written,
            "image_type": info.get("image_type"),
            "configdrive": bool(configdrive),
        }

    def _check_local(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or parsed.hostname not in LOOPBACK_HOSTS:
            raise CommandFailed(
                f"emulated hosts only download over http(s) from 127.0.0.1, not {url}",
                "ImageDownloadError",
            )

    async def _fetch(self, url: str) -> bytes:
        session = self._session()
        self._check_local(url)
        try:
            async with session.get(url) as resp:
                if resp.status != 200:
                    raise CommandFailed(f"GET {url}: HTTP {resp.status}", "ImageDownloadError")
                return await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise CommandFailed(f"GET {url}: {exc}", "ImageDownloadError") from exc

    async def _expected_checksum(self, info: dict[str, Any], url: str) -> tuple[str | None, str]:
        algo = info.get("os_hash_algo")
        value = info.get("os_hash_value")
        if algo and value:
            return str(algo), str(value)
        checksum = str(info.get("checksum") or "")
        if not checksum:
            return None, ""
        if checksum.startswith(("http://", "https://")):
            text = (await self._fetch(checksum)).decode(errors="replace")
            checksum = _pick_checksum(text, url)
        if ":" in checksum:
            algo, _, checksum = checksum.partition(":")
            return algo, checksum
        by_length = {32: "md5", 40: "sha1", 64: "sha256", 128: "sha512"}
        return by_length.get(len(checksum), "md5"), checksum

    async def _download_to_disk(
        self, host: EmulatedHost, disk: DiskInfo, url: str, digest: Any
    ) -> int:
        session = self._session()
        self._check_local(url)
        fd = await asyncio.to_thread(self.disks.open_for_write, host, disk)
        offset = 0
        try:
            async with session.get(
                url, timeout=aiohttp.ClientTimeout(total=None, sock_read=60)
            ) as resp:
                if resp.status != 200:
                    raise CommandFailed(f"GET {url}: HTTP {resp.status}", "ImageDownloadError")
                async for chunk in resp.content.iter_chunked(1 << 20):
                    if offset + len(chunk) > disk.size_bytes:
                        raise CommandFailed(f"image larger than {disk.name}", "ImageWriteError")
                    await asyncio.to_thread(os.pwrite, fd, chunk, offset)
                    if digest is not None:
                        digest.update(chunk)
                    offset += len(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise CommandFailed(f"GET {url}: {exc}", "ImageDownloadError") from exc
        finally:
            await asyncio.to_thread(os.close, fd)
        return offset

    async def _configdrive_bytes(self, value: str) -> bytes:
        if value.startswith(("http://", "https://")):
            data = await self._fetch(value)
        else:
            try:
                data = base64.b64decode(value)
            except ValueError as exc:
                raise CommandFailed(f"invalid config drive: {exc}", "ConfigDriveError") from exc
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return data


def _pick_checksum(text: str, url: str) -> str:
    """The checksum for ``url``'s file name in a ``sha256sum``-style file."""
    name = urlparse(url).path.rsplit("/", 1)[-1]
    lines = [line.split() for line in text.splitlines() if line.strip()]
    for parts in lines:
        if len(parts) >= 2 and parts[1].lstrip("*") == name:
            return parts[0]
    if len(lines) == 1:
        return lines[0][0]
    raise CommandFailed(f"no checksum for {name} in the checksum file", "ImageChecksumError")
