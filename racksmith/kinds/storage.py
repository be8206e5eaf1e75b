"""Kinds of the ``storage.racksmith.io`` group: local persistent volumes.

Owns Volume (a local device on one node, prepared by the agent and exposed
as a PersistentVolume), following the MetalK8s storage operator design. The
storage controller reads the spec and writes the status, including the
``phase`` printer column derived from the Ready condition.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
)
from racksmith.kinds.common import Condition, Quantity, conditions_field

GROUP = "storage.racksmith.io"
CATEGORIES = ("racksmith", "storage")

#: The only condition type of a Volume.
READY_CONDITION = "Ready"


class VolumeMode(DocEnum):
    """How the volume is presented to pods."""

    FILESYSTEM = "Filesystem", "Formatted with the StorageClass's fsType and mounted."
    BLOCK = "Block", "Handed to pods as a raw block device."


class VolumeReason(DocEnum):
    """Reason of the Ready condition of a Volume."""

    PENDING = "Pending", "The storage task is running."
    TERMINATING = "Terminating", "The volume is being deleted."
    INTERNAL_ERROR = "InternalError", "A bug or unexpected state in the controller."
    CREATION_ERROR = "CreationError", "Preparing the device failed."
    DESTRUCTION_ERROR = "DestructionError", "Releasing the device failed."
    UNAVAILABLE_ERROR = "UnavailableError", "The PV is unhealthy; recovered automatically."


class VolumePhase(DocEnum):
    """User-facing summary of the Ready condition, kept for ``kubectl get``."""

    AVAILABLE = "Available", "Ready=True: the PersistentVolume exists and is usable."
    PENDING = "Pending", "Ready=Unknown with reason Pending: the device is being prepared."
    FAILED = "Failed", "Ready=False: see the condition's reason and message."
    TERMINATING = "Terminating", "Being deleted."


class SparseLoopDevice(RacksmithModel):
    """A sparse file attached as a loop device (for tests and demos)."""

    size: Quantity = Field(description="Size of the sparse file, e.g. 10Gi.")


class RawBlockDevice(RacksmithModel):
    """An existing disk or partition used as is."""

    device_path: str = Field(description="Stable path of the device, e.g. /dev/disk/by-id/...")


class LVMLogicalVolume(RacksmithModel):
    """A logical volume created in an existing volume group."""

    vg_name: str = Field(description="Volume group to create the logical volume in.")
    size: Quantity = Field(description="Size of the logical volume, e.g. 10Gi.")


class VolumeTemplate(RacksmithModel):
    """Extra PersistentVolume content merged into the generated PV."""

    metadata: dict[str, Any] = Field(
        default_factory=dict, description="PV metadata to merge (labels, annotations)."
    )
    spec: dict[str, Any] = Field(default_factory=dict, description="PV spec to merge.")


_BACKENDS = ("sparseLoopDevice", "rawBlockDevice", "lvmLogicalVolume")


class VolumeSpec(RacksmithModel):
    """Which device, on which node, for which StorageClass. Exactly one backend is set."""

    node_name: str = Field(description="Node the volume lives on.")
    storage_class_name: str = Field(description="StorageClass of the PersistentVolume.")
    mode: VolumeMode = Field(default=VolumeMode.FILESYSTEM, description="Filesystem or Block.")
    template: VolumeTemplate | None = Field(default=None, description="PV content to merge.")
    sparse_loop_device: SparseLoopDevice | None = Field(
        default=None, description="Back the volume with a sparse file."
    )
    raw_block_device: RawBlockDevice | None = Field(
        default=None, description="Back the volume with an existing device."
    )
    lvm_logical_volume: LVMLogicalVolume | None = Field(
        default=None, alias="lvmLogicalVolume", description="Back the volume with a new LVM LV."
    )

    @model_validator(mode="after")
    def _exactly_one_backend(self) -> VolumeSpec:
        chosen = [
            b
            for b in (self.sparse_loop_device, self.raw_block_device, self.lvm_logical_volume)
            if b is not None
        ]
        if len(chosen) != 1:
            raise ValueError(f"exactly one of {', '.join(_BACKENDS)} must be set")
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema = handler.resolve_ref_schema(schema)
        schema["oneOf"] = [{"required": [name]} for name in _BACKENDS]
        return schema


class VolumeStatus(RacksmithModel):
    """Observed state of a volume."""

    conditions: list[Condition] = conditions_field(
        "Only type Ready; reason is one of Pending, Terminating, InternalError, "
        "CreationError, DestructionError, UnavailableError."
    )
    phase: VolumePhase | None = Field(
        default=None, description="Summary of the Ready condition, written by the controller."
    )
    job: str | None = Field(default=None, description="Id of the running storage task, if any.")
    device_name: str | None = Field(
        default=None, description="Kernel name of the device, e.g. loop3."
    )
    size: Quantity | None = Field(default=None, description="Size of the prepared device.")


class Volume(Resource):
    """A local device on one node, exposed as a PersistentVolume."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="Volume",
        plural="volumes",
        namespaced=False,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Node", ".spec.nodeName", description="Node of the volume."),
            PrinterColumn(
                "StorageClass", ".spec.storageClassName", description="StorageClass of the PV."
            ),
            PrinterColumn("Size", ".status.size", description="Size of the prepared device."),
            PrinterColumn("Phase", ".status.phase", description="Summary of Ready."),
            age_column(),
            PrinterColumn("Mode", ".spec.mode", description="Filesystem or Block.", priority=1),
            PrinterColumn("Device", ".status.deviceName", description="Device name.", priority=1),
        ),
        selectable_fields=(".spec.nodeName",),
    )

    spec: VolumeSpec = Field(description="Desired volume.")
    status: VolumeStatus | None = Field(default=None, description="Observed state.")
