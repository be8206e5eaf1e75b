"""The catalogue: every kind Racksmith serves, in documentation order.

Owns ``ALL_KINDS``; ``crdgen``, ``docgen``, the app (to install CRDs) and
the tests iterate over it. Adding a kind means adding it here.
"""

from __future__ import annotations

from racksmith.kinds.base import Resource
from racksmith.kinds.cluster import Cluster, ClusterRelease, Machine
from racksmith.kinds.firmware import FirmwareSchema, HostFirmwareSettings
from racksmith.kinds.hostprofile import BareMetalHostProfile
from racksmith.kinds.ipam import IPaddr, IpamHost, L2Template, Subnet
from racksmith.kinds.lcm import (
    ClusterUpdatePlan,
    ControlPlaneBackup,
    GracefulRebootRequest,
    LCMMachine,
    UpdateAutoPause,
    UpdateGroup,
)
from racksmith.kinds.maintenance import (
    ClusterMaintenanceRequest,
    ClusterWorkloadLock,
    NodeDeletionRequest,
    NodeMaintenanceRequest,
    NodeWorkloadLock,
)
from racksmith.kinds.metal import BareMetalHost, BareMetalHostInventory, HardwareData
from racksmith.kinds.storage import Volume

ALL_KINDS: tuple[type[Resource], ...] = (
    BareMetalHost,
    BareMetalHostInventory,
    HardwareData,
    HostFirmwareSettings,
    FirmwareSchema,
    BareMetalHostProfile,
    Subnet,
    IPaddr,
    IpamHost,
    L2Template,
    Cluster,
    Machine,
    ClusterRelease,
    Volume,
    LCMMachine,
    ClusterUpdatePlan,
    UpdateGroup,
    UpdateAutoPause,
    GracefulRebootRequest,
    ClusterMaintenanceRequest,
    NodeMaintenanceRequest,
    ClusterWorkloadLock,
    NodeWorkloadLock,
    NodeDeletionRequest,
    ControlPlaneBackup,
)


def kind_by_name(kind: str) -> type[Resource]:
    """The kind class named ``kind`` (e.g. "Volume"); raises KeyError if unknown."""
    for kind_cls in ALL_KINDS:
        if kind_cls.info.kind == kind:
            return kind_cls
    raise KeyError(kind)
