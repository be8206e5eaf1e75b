"""The Volume deletion rule of the MetalK8s storage design, pure.

Owns: whether a Volume may be deleted from a user's point of view. A Volume
is deletable when it has no PersistentVolume or its PersistentVolume is not
Bound; a Bound one would leave a pod's data behind a claim, so the CLI (and
the console) refuse with the reason, and the controller keeps such a Volume
Terminating until the claim goes. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["deletion_blocker"]


def deletion_blocker(volume_name: str, pv: Mapping[str, Any] | None) -> str | None:
    """Why Volume ``volume_name`` must not be deleted now, or None if it may.

    ``pv`` is the Volume's PersistentVolume as the API returns it (or None).
    """
    if pv is None:
        return None
    status = pv.get("status") or {}
    if status.get("phase") != "Bound":
        return None
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}".strip("/") or "a claim"
    pv_name = (pv.get("metadata") or {}).get("name", volume_name)
    return (f"volume {volume_name} is in use: its PersistentVolume {pv_name} is bound to "
            f"claim {claim}; delete the claim (and the pods using it) first")
