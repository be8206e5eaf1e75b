"""The API resources the controllers read and write, one constant each.

Owns every :class:`~racksmith.runtime.source.Resource` a controller names:
those of Racksmith's kinds, derived from the kinds catalogue (each kind's
``KindInfo``: group, version, plural), and the Kubernetes built-ins they
touch (Nodes, Secrets, PersistentVolumes, ...). Controllers import their
resources from here, never from one another, so two controllers watching
Machines name one collection. Adding a resource a controller needs means
adding it here.
"""

from __future__ import annotations

from racksmith.kinds import cluster, firmware, hostprofile, ipam, lcm, maintenance, metal, storage
from racksmith.kinds.base import Resource as Kind
from racksmith.runtime.source import Resource


def resource_of(kind: type[Kind]) -> Resource:
    """The collection of ``kind`` (group, served version and plural of its ``info``)."""
    info = kind.info
    return Resource(info.group, info.version, info.plural)


# metal3.io (hosts), metal.racksmith.io
HOSTS = resource_of(metal.BareMetalHost)
INVENTORIES = resource_of(metal.BareMetalHostInventory)
HARDWARE_DATA = resource_of(metal.HardwareData)
FIRMWARE_SETTINGS = resource_of(firmware.HostFirmwareSettings)
FIRMWARE_SCHEMAS = resource_of(firmware.FirmwareSchema)
PROFILES = resource_of(hostprofile.BareMetalHostProfile)

# ipam.racksmith.io
SUBNETS = resource_of(ipam.Subnet)
IPADDRS = resource_of(ipam.IPaddr)
IPAMHOSTS = resource_of(ipam.IpamHost)
L2TEMPLATES = resource_of(ipam.L2Template)

# cluster.racksmith.io
CLUSTERS = resource_of(cluster.Cluster)
MACHINES = resource_of(cluster.Machine)
RELEASES = resource_of(cluster.ClusterRelease)

# storage.racksmith.io
VOLUMES = resource_of(storage.Volume)

# lcm.racksmith.io
LCMMACHINES = resource_of(lcm.LCMMachine)
PLANS = resource_of(lcm.ClusterUpdatePlan)
UPDATE_GROUPS = resource_of(lcm.UpdateGroup)
AUTOPAUSES = resource_of(lcm.UpdateAutoPause)
REBOOTS = resource_of(lcm.GracefulRebootRequest)
CMRS = resource_of(maintenance.ClusterMaintenanceRequest)
NMRS = resource_of(maintenance.NodeMaintenanceRequest)
CLUSTER_LOCKS = resource_of(maintenance.ClusterWorkloadLock)
NODE_LOCKS = resource_of(maintenance.NodeWorkloadLock)
BACKUPS = resource_of(lcm.ControlPlaneBackup)

# Kubernetes built-ins.
NODES = Resource("", "v1", "nodes")
SECRETS = Resource("", "v1", "secrets")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts")
PVS = Resource("", "v1", "persistentvolumes")
PVCS = Resource("", "v1", "persistentvolumeclaims")
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses")
PODS = Resource("", "v1", "pods")
CONFIG_MAPS = Resource("", "v1", "configmaps")
NAMESPACES = Resource("", "v1", "namespaces")
PDBS = Resource("policy", "v1", "poddisruptionbudgets")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings")

__all__ = [
    "AUTOPAUSES",
    "BACKUPS",
    "CLUSTERS",
    "CLUSTER_LOCKS",
    "CMRS",
    "CONFIG_MAPS",
    "FIRMWARE_SCHEMAS",
    "FIRMWARE_SETTINGS",
    "HARDWARE_DATA",
    "HOSTS",
    "INVENTORIES",
    "IPADDRS",
    "IPAMHOSTS",
    "L2TEMPLATES",
    "LCMMACHINES",
    "MACHINES",
    "NAMESPACES",
    "NMRS",
    "NODES",
    "NODE_LOCKS",
    "PDBS",
    "PLANS",
    "PODS",
    "PROFILES",
    "PVCS",
    "PVS",
    "REBOOTS",
    "RELEASES",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICE_ACCOUNTS",
    "STORAGE_CLASSES",
    "SUBNETS",
    "UPDATE_GROUPS",
    "VOLUMES",
    "resource_of",
]
