"""Patches and server-side apply for the API server (pure, no I/O).

Owns the five write transformations kube-apiserver offers besides PUT:
:func:`json_merge_patch`, :func:`json_patch`, :func:`strategic_merge_patch`,
:func:`apply_patch` (server-side apply) and :func:`record_update`
(managedFields bookkeeping for every non-apply write), with their
exceptions, and :class:`TypeNode` (:mod:`.schematypes`), the list and map
types the last two read from a resource's schema. Each submodule documents
what it simplifies.
"""

from racksmith.apiserver.patching.apply import apply_patch, record_update
from racksmith.apiserver.patching.errors import ApplyConflict, PatchError, PatchTestFailed
from racksmith.apiserver.patching.merge import json_merge_patch, json_patch
from racksmith.apiserver.patching.schematypes import TypeNode
from racksmith.apiserver.patching.strategic import strategic_merge_patch

__all__ = [
    "ApplyConflict",
    "PatchError",
    "PatchTestFailed",
    "TypeNode",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "record_update",
    "strategic_merge_patch",
]
