"""Encryption of backup archives: AES-256-GCM in a chunked stream.

Owns the encrypted file format and :func:`encrypt_file` / :func:`decrypt_file`.
The key file holds at least 32 bytes (its whole content is the secret; a
fresh one: ``head -c 32 /dev/urandom > backup.key``); each archive gets a
random 16-byte salt and its own AES-256 key, HKDF-SHA256(key file, salt).
The plaintext is cut into 1 MiB chunks, each sealed with AES-GCM under the
nonce ``counter (11 bytes) || last (1 byte)`` — the STREAM construction of
age and Tink — so a chunk cannot be dropped, reordered, truncated or
changed without the decryption failing. Format::

    MAGIC (8 bytes) | salt (16 bytes) | chunk 0 | chunk 1 | ... | last chunk
    chunk = AES-GCM(plaintext of up to CHUNK bytes) (+16 bytes of tag)

A wrong key, a changed byte or a cut file are one error,
:class:`CannotDecrypt` ("cannot decrypt"). The key is read here and never
written anywhere, nor logged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"RSBKENC1"
SALT = 16
CHUNK = 1 << 20
TAG = 16
MIN_KEY = 32


class KeyFileError(ValueError):
    """The key file cannot be used (missing, unreadable, too short)."""


class CannotDecrypt(ValueError):
    """Wrong key, or the encrypted file was changed or cut."""


def load_key(path: Path) -> bytes:
    """The key file's bytes; at least :data:`MIN_KEY` of them."""
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    if len(key) < MIN_KEY:
        raise KeyFileError(f"the key file {path} holds {len(key)} bytes; a key needs at "
                           f"least {MIN_KEY} (e.g. head -c 32 /dev/urandom > {path.name})")
    return key


def is_encrypted(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


def _aead(key: bytes, salt: bytes) -> AESGCM:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt,
                   info=b"racksmith backup v1").derive(key)
    return AESGCM(derived)


def _nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def _chunks(src: BinaryIO, size: int) -> Iterator[tuple[bytes, bool]]:
    """Chunks of ``src`` with a flag on the last one (an empty input is one
    empty last chunk)."""
    current = src.read(size)
    while True:
        following = src.read(size)
        yield current, not following
        if not following:
            return
        current = following


def encrypt_file(src: Path, dst: BinaryIO, key: bytes) -> None:
    """Write ``src``, encrypted with ``key``, to ``dst``."""
    salt = os.urandom(SALT)
    aead = _aead(key, salt)
    dst.write(MAGIC + salt)
    with src.open("rb") as fh:
        for counter, (chunk, last) in enumerate(_chunks(fh, CHUNK)):
            dst.write(aead.encrypt(_nonce(counter, last), chunk, None))


def decrypt_file(src: Path, dst: BinaryIO, key: bytes) -> None:
    """Write the plaintext of ``src`` (encrypted by :func:`encrypt_file`) to
    ``dst``; raises :class:`CannotDecrypt`."""
    with src.open("rb") as fh:
        head = fh.read(len(MAGIC) + SALT)
        if len(head) != len(MAGIC) + SALT or not head.startswith(MAGIC):
            raise CannotDecrypt("cannot decrypt: not an encrypted Racksmith backup")
        aead = _aead(key, head[len(MAGIC):])
        for counter, (sealed, last) in enumerate(_chunks(fh, CHUNK + TAG)):
            try:
                dst.write(aead.decrypt(_nonce(counter, last), sealed, None))
            except InvalidTag:
                raise CannotDecrypt("cannot decrypt: wrong key, or the file was changed "
                                    "or cut") from None
