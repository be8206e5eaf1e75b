"""The backup port: what a snapshot of a store is, and who takes one.

Owns :class:`Snapshot` (a backup file written and verified),
:class:`SnapshotFailed`, :class:`ClusterStore` (where a managed cluster's
own etcd is, and credentials for it) and the :class:`Snapshotter`
protocol. The backup controller (``racksmith.controllers.backup``) asks
for snapshots through it; ``racksmith.backup.service`` takes them; the
composition root joins the two. A leaf: it imports nothing of Racksmith,
so neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Snapshot:
    """A backup file written and verified."""

    file: str
    size: int
    sha256: str
    resource_version: int
    objects: int
    encrypted: bool
    verified_at: datetime


class SnapshotFailed(Exception):
    """The backup could not be taken (the message says why; never a secret)."""


@dataclass(frozen=True)
class ClusterStore:
    """A cluster's etcd members (client URLs, in order) and credentials for them."""

    cluster: str
    endpoints: tuple[str, ...]
    ca_pem: bytes = field(repr=False)
    cert_pem: bytes = field(repr=False)
    key_pem: bytes = field(repr=False)


class Snapshotter(Protocol):
    """Where backups are written (the composition root's data dir)."""

    async def take(self, name: str) -> Snapshot:
        """Write and verify backup ``name``; raises :class:`SnapshotFailed`."""
        ...

    async def take_cluster(self, name: str, store: ClusterStore) -> Snapshot:
        """Write and verify backup ``name`` of a managed cluster's etcd."""
        ...

    async def remove(self, file: str) -> None:
        """Delete a backup file this snapshotter wrote (gone already: fine)."""
        ...


__all__ = ["ClusterStore", "Snapshot", "SnapshotFailed", "Snapshotter"]
