"""The PersistentVolume of a Volume, pure.

Owns ``pv_manifest`` (the PV to create once the device is prepared, per
"The Volume controller" in ``docs/design/volume-contracts.md``),
``size_quantity`` (the byte count the agent read back, as a quantity) and
``device_path``. As in MetalK8s, ``spec.template`` is the base and the
fields the design owns are set over it: name, the finalizer, the owner
reference, the Volume label, capacity, ``local``, node affinity, reclaim
policy, StorageClass and volume mode; ``mountOptions`` are the
StorageClass's followed by the template's own.
"""

from __future__ import annotations

import copy
from typing import Any

from racksmith.controllers.volume.names import (
    DEFAULT_FS_TYPE,
    FINALIZER,
    HOSTNAME_LABEL,
    VOLUME_API_VERSION,
    VOLUME_KIND,
    VOLUME_LABEL,
)
from racksmith.controllers.volume.observed import StorageClassView
from racksmith.kinds.storage import Volume, VolumeMode

_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
          ("Ki", 2**10))


def size_quantity(size_bytes: int) -> str:
    """``size_bytes`` as the largest exact binary quantity ("10Gi"), else plain bytes."""
    for suffix, unit in _UNITS:
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"{size_bytes // unit}{suffix}"
    return str(size_bytes)


def device_path(device_name: str) -> str:
    """The node-local path of the device the agent reported (``loop3`` → ``/dev/loop3``)."""
    return device_name if device_name.startswith("/") else f"/dev/{device_name}"


def pv_manifest(volume: Volume, storage_class: StorageClassView, device_name: str,
                size: str) -> dict[str, Any]:
    """The PersistentVolume exposing ``volume``'s prepared device (see the module docstring)."""
    meta, spec = volume.metadata, volume.spec
    name = meta.name or ""
    template = spec.template
    pv_meta: dict[str, Any] = copy.deepcopy(template.metadata) if template else {}
    pv_spec: dict[str, Any] = copy.deepcopy(template.spec) if template else {}
    for server_owned in ("name", "namespace", "uid", "resourceVersion", "ownerReferences",
                         "creationTimestamp", "deletionTimestamp", "generation"):
        pv_meta.pop(server_owned, None)
    pv_meta["name"] = name
    pv_meta["labels"] = {**_str_map(pv_meta.get("labels")), VOLUME_LABEL: name}
    finalizers = [str(f) for f in pv_meta.get("finalizers") or [] if f != FINALIZER]
    pv_meta["finalizers"] = [*finalizers, FINALIZER]
    pv_meta["ownerReferences"] = [{
        "apiVersion": VOLUME_API_VERSION, "kind": VOLUME_KIND, "name": name,
        "uid": meta.uid, "controller": True, "blockOwnerDeletion": True,
    }]
    filesystem = spec.mode is VolumeMode.FILESYSTEM
    local: dict[str, Any] = {"path": device_path(device_name)}
    if filesystem:
        local["fsType"] = storage_class.fs_type or DEFAULT_FS_TYPE
    pv_spec.pop("claimRef", None)
    pv_spec.setdefault("accessModes", ["ReadWriteOnce"])
    pv_spec.update({
        "capacity": {"storage": size},
        "local": local,
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{
            "key": HOSTNAME_LABEL, "operator": "In", "values": [spec.node_name]}]}]}},
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": spec.storage_class_name,
        "volumeMode": spec.mode.value,
    })
    options = [*storage_class.mount_options,
               *(str(o) for o in pv_spec.get("mountOptions") or []
                 if o not in storage_class.mount_options)]
    if filesystem and options:
        pv_spec["mountOptions"] = options
    else:
        pv_spec.pop("mountOptions", None)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": pv_meta,
            "spec": pv_spec, "status": {"phase": "Available"}}


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
