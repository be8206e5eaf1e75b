"""The BMC credentials file shared by the Redfish emulator and its manager.

Owns the on-disk format: JSON mapping system UUID → ``{username, salt,
hash}`` with a salted PBKDF2-SHA256 hash, written atomically with mode
0600. ``redfish.RedfishEmulator`` writes it (also to rotate a password while
running); ``sushy_ext.PerSystemAuth`` reads it in the emulator process.
Standard library only: it is imported in both virtualenvs.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

PBKDF2_ROUNDS = 20000


def hash_password(password: str, salt: bytes) -> str:
    """PBKDF2-SHA256 of ``password`` with ``salt``, as hex."""
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, PBKDF2_ROUNDS).hex()


def credential_entry(username: str, password: str) -> dict[str, str]:
    """One file entry for ``username``/``password`` with a fresh salt."""
    salt = secrets.token_bytes(16)
    return {"username": username, "salt": salt.hex(), "hash": hash_password(password, salt)}


def write_credentials(path: Path, entries: dict[str, dict[str, str]]) -> None:
    """Replace the file atomically (readers see the old or the new, never half)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(entries, f)
    os.replace(tmp, path)


def read_credentials(path: Path) -> dict[str, dict[str, str]]:
    """The entries in the file (empty if it does not exist)."""
    try:
        with path.open(encoding="utf-8") as f:
            data: dict[str, dict[str, str]] = json.load(f)
    except FileNotFoundError:
        return {}
    return data
