"""Which Volumes an event about a StorageClass or a Node concerns.

Owns ``VolumeIndex``: per Volume key, its StorageClass and Node names and
whether its last reconcile found either missing. The sources map
StorageClasses and Nodes to the Volumes that wait for them (Node status
updates come often; a Volume at rest needs none of them). Filled in by the
reconciler; mappers never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from racksmith.runtime.keys import ObjectKey, key_of


@dataclass(frozen=True)
class _Entry:
    storage_class: str
    node: str
    waiting: bool


class VolumeIndex:
    """What the mappers know about each Volume (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[ObjectKey, _Entry] = {}

    def record(self, key: ObjectKey, storage_class: str, node: str, waiting: bool) -> None:
        self._entries[key] = _Entry(storage_class, node, waiting)

    def forget(self, key: ObjectKey) -> None:
        self._entries.pop(key, None)

    def storage_class_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A StorageClass concerns the waiting Volumes that name it."""
        name = key_of(obj).name
        return sorted(k for k, e in self._entries.items() if e.waiting
                      and e.storage_class == name)

    def node_keys(self, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """A Node concerns the waiting Volumes that live on it."""
        name = key_of(obj).name
        return sorted(k for k, e in self._entries.items() if e.waiting and e.node == name)
