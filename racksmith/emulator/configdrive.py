"""What a config-2 drive says: the files Ironic put in it and its cloud-config.

Owns reading the config drive of an emulated host (the ISO 9660 image
Ironic builds with genisoimage, label ``config-2``, files under
``openstack/latest/``; stored raw by ``image_writer``, but gzip and base64
are accepted too) through pycdlib, and parsing the user data's
``#cloud-config`` into the parts the emulated OS acts on (``write_files``,
``runcmd``). Pure: bytes in, values out. Called by ``osboot``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import io
import json
import shlex
from dataclasses import dataclass
from typing import Any

import pycdlib
import yaml
from pycdlib.pycdlibexception import PyCdlibException

CONFIG_DRIVE_LABEL = "config-2"
LATEST = "/openstack/latest"


class ConfigDriveError(Exception):
    """The config drive could not be read as a config-2 ISO."""


@dataclass(frozen=True)
class ConfigDrive:
    """The files of a config-2 drive that matter (``openstack/latest``)."""

    user_data: bytes | None
    meta_data: dict[str, Any]
    network_data: dict[str, Any]


@dataclass(frozen=True)
class WriteFile:
    """One cloud-config ``write_files`` entry, decoded."""

    path: str
    content: bytes
    mode: int = 0o644
    append: bool = False


@dataclass(frozen=True)
class CloudConfig:
    """The parts of a ``#cloud-config`` the emulated OS acts on.

    ``runcmd`` entries are argv lists (a string entry is split as a shell
    would); ``problems`` are entries that could not be understood.
    """

    write_files: tuple[WriteFile, ...] = ()
    runcmd: tuple[tuple[str, ...], ...] = ()
    problems: tuple[str, ...] = ()


# --- the config drive (pure) ----------------------------------------------------


def decode_configdrive(data: bytes) -> bytes:
    """The raw ISO from a stored config drive: raw, gzipped, or base64 of
    either (Ironic's wire format), whichever ``data`` is."""
    if _is_iso(data):
        return data
    if data[:2] == b"\x1f\x8b":
        return decode_configdrive(_gunzip(data))
    try:
        decoded = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ConfigDriveError("not an ISO 9660 image, gzip or base64") from exc
    if decoded[:2] == b"\x1f\x8b":
        decoded = _gunzip(decoded)
    if not _is_iso(decoded):
        raise ConfigDriveError("not an ISO 9660 image")
    return decoded


def _is_iso(data: bytes) -> bool:
    return data[0x8001:0x8006] == b"CD001"


def _gunzip(data: bytes) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise ConfigDriveError(f"bad gzip data: {exc}") from exc


def read_configdrive(data: bytes) -> ConfigDrive:
    """Parse a config drive (see :func:`decode_configdrive` for formats).

    Raises :class:`ConfigDriveError` when it is not an ISO labelled
    ``config-2`` or its JSON files are invalid. Missing files are empty.
    """
    iso = pycdlib.PyCdlib()
    try:
        iso.open_fp(io.BytesIO(decode_configdrive(data)))
    except (PyCdlibException, ValueError, IndexError) as exc:
        raise ConfigDriveError(f"unreadable ISO 9660 image: {exc}") from exc
    try:
        label = iso.pvd.volume_identifier.decode(errors="replace").strip()
        if label.lower() != CONFIG_DRIVE_LABEL:
            raise ConfigDriveError(f"volume label is {label!r}, not {CONFIG_DRIVE_LABEL!r}")
        user_data = _iso_file(iso, "user_data")
        return ConfigDrive(
            user_data=user_data,
            meta_data=_json_file(iso, "meta_data.json"),
            network_data=_json_file(iso, "network_data.json"),
        )
    finally:
        iso.close()


def _iso_file(iso: pycdlib.PyCdlib, name: str) -> bytes | None:
    """``openstack/latest/<name>`` by its Rock Ridge, Joliet or plain name."""
    path = f"{LATEST}/{name}"
    facets: list[dict[str, str]] = []
    if iso.has_rock_ridge():
        facets.append({"rr_path": path})
    if iso.has_joliet():
        facets.append({"joliet_path": path})
    for facet in facets:
        buf = io.BytesIO()
        try:
            iso.get_file_from_iso_fp(buf, **facet)
        except PyCdlibException:
            continue
        return buf.getvalue()
    # Plain ISO 9660: names may be upper-cased and carry a ";1" version.
    directory = "/"
    for part in ("openstack", "latest", name):
        wanted = part.upper().replace("-", "_")
        try:
            children = list(iso.list_children(iso_path=directory))
        except PyCdlibException:
            return None
        found = None
        for child in children:
            ident = child.file_identifier().decode(errors="replace").split(";")[0].rstrip(".")
            if ident.upper().replace("-", "_") == wanted:
                found = ident
                break
        if found is None:
            return None
        full = f"{directory.rstrip('/')}/{found}"
        if part == name:
            buf = io.BytesIO()
            for candidate in (full, f"{full};1"):
                with contextlib.suppress(PyCdlibException):
                    iso.get_file_from_iso_fp(buf, iso_path=candidate)
                    return buf.getvalue()
            return None
        directory = full
    return None


def _json_file(iso: pycdlib.PyCdlib, name: str) -> dict[str, Any]:
    raw = _iso_file(iso, name)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigDriveError(f"{name} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigDriveError(f"{name} is not a JSON object")
    return value


# --- cloud-config (pure) ---------------------------------------------------------


def parse_user_data(data: bytes) -> CloudConfig | None:
    """The cloud-config in ``data``, or None when it is not ``#cloud-config``."""
    text = data.decode("utf-8", errors="replace")
    if not text.startswith("#cloud-config"):
        return None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return CloudConfig(problems=(f"cloud-config is not YAML: {exc}",))
    if doc is None:
        return CloudConfig()
    if not isinstance(doc, dict):
        return CloudConfig(problems=("cloud-config is not a mapping",))
    problems: list[str] = []
    files: list[WriteFile] = []
    raw_files = doc.get("write_files") or []
    if not isinstance(raw_files, list):
        problems.append("write_files is not a list")
        raw_files = []
    for index, entry in enumerate(raw_files):
        try:
            files.append(_write_file(entry))
        except (ValueError, TypeError) as exc:
            problems.append(f"write_files[{index}]: {exc}")
    commands: list[tuple[str, ...]] = []
    raw_cmds = doc.get("runcmd") or []
    if not isinstance(raw_cmds, list):
        problems.append("runcmd is not a list")
        raw_cmds = []
    for index, entry in enumerate(raw_cmds):
        if isinstance(entry, list):
            commands.append(tuple(str(a) for a in entry))
        elif isinstance(entry, str):
            try:
                commands.append(tuple(shlex.split(entry)))
            except ValueError as exc:
                problems.append(f"runcmd[{index}]: {exc}")
        else:
            problems.append(f"runcmd[{index}]: neither a string nor a list")
    return CloudConfig(tuple(files), tuple(c for c in commands if c), tuple(problems))


def _write_file(entry: Any) -> WriteFile:
    if not isinstance(entry, dict):
        raise TypeError("not a mapping")
    path = entry.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ValueError("no path")
    content = entry.get("content", "")
    raw = content if isinstance(content, bytes) else str(content).encode()
    encoding = str(entry.get("encoding") or "text/plain").lower()
    if encoding in ("b64", "base64", "gz+b64", "gz+base64", "gzip+b64", "gzip+base64"):
        try:
            raw = base64.b64decode(raw, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"{path}: invalid base64: {exc}") from exc
    elif encoding not in ("text/plain", "gz", "gzip"):
        raise ValueError(f"{path}: unknown encoding {encoding!r}")
    if encoding.startswith("gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{path}: invalid gzip data: {exc}") from exc
    return WriteFile(path, raw, _mode(entry.get("permissions")), bool(entry.get("append")))


def _mode(value: Any) -> int:
    if value is None:
        return 0o644
    if isinstance(value, int):  # YAML 1.1 reads 0644 as octal already
        return value & 0o7777
    try:
        return int(str(value), 8) & 0o7777
    except ValueError as exc:
        raise ValueError(f"invalid permissions {value!r}") from exc
