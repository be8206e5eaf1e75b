"""One realistic sample object per kind, in canonical JSON form.

Used by the kinds tests: each sample must parse with its model, dump back to
exactly itself, and validate against its generated CRD schema.
"""

from __future__ import annotations

from typing import Any

T0 = "2025-03-01T10:00:00Z"
T1 = "2025-03-01T10:05:00Z"


def _meta(name: str, namespace: str | None = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return meta


_HARDWARE: dict[str, Any] = {
    "systemVendor": {"manufacturer": "Supermicro", "productName": "SYS-1029", "serialNumber": "S1"},
    "firmware": {"bios": {"date": "01/01/2024", "vendor": "AMI", "version": "3.4"}},
    "ramMebibytes": 262144,
    "nics": [
        {
            "name": "eno1",
            "mac": "52:54:00:00:00:01",
            "ip": "10.0.0.21",
            "speedGbps": 25,
            "vlans": [{"id": 100, "name": "mgmt"}],
            "pxe": True,
        }
    ],
    "storage": [
        {
            "name": "/dev/nvme0n1",
            "rotational": False,
            "type": "NVME",
            "sizeBytes": 960197124096,
            "serialNumber": "NV1",
            "wwn": "eui.0001",
            "hctl": "0:0:0:0",
        }
    ],
    "cpu": {"arch": "x86_64", "model": "Xeon Gold", "clockMegahertz": 2400.0, "count": 64},
    "hostname": "rack1-u12",
}

_STATE_ITEM: dict[str, Any] = {
    "name": "install-containerd",
    "phase": "configuration",
    "roles": ["node"],
    "type": "package",
    "params": {"name": "containerd", "version": "1.7.20", "hold": True},
}

SAMPLES: dict[str, dict[str, Any]] = {
    "BareMetalHost": {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": _meta("rack1-u12"),
        "spec": {
            "bmc": {
                "address": "redfish+https://10.1.0.12/redfish/v1/Systems/1",
                "credentialsName": "rack1-u12-bmc",
            },
            "bootMACAddress": "52:54:00:00:00:01",
            "bootMode": "UEFI",
            "online": True,
            "image": {
                "url": "http://images/ubuntu.qcow2",
                "checksum": "abc",
                "checksumType": "sha256",
                "format": "qcow2",
            },
            "userData": {"name": "rack1-u12-user-data"},
            "rootDeviceHints": {"minSizeGigabytes": 200, "rotational": False},
            "raid": {"softwareRAIDVolumes": [{"level": "1"}]},
            "consumerRef": {
                "apiVersion": "cluster.racksmith.io/v1alpha1",
                "kind": "Machine",
                "namespace": "default",
                "name": "worker-0",
            },
            "automatedCleaningMode": "metadata",
        },
        "status": {
            "operationalStatus": "OK",
            "errorCount": 0,
            "provisioning": {"state": "provisioned", "ID": "b7d3", "bootMode": "UEFI"},
            "hardware": _HARDWARE,
            "poweredOn": True,
            "goodCredentials": {
                "credentials": {"name": "rack1-u12-bmc", "namespace": "default"},
                "credentialsVersion": "42",
            },
            "operationHistory": {"register": {"start": T0, "end": T1}, "provision": {"start": T0}},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Provisioned",
                    "lastTransitionTime": T1,
                    "observedGeneration": 3,
                }
            ],
        },
    },
    "BareMetalHostInventory": {
        "apiVersion": "metal.racksmith.io/v1alpha1",
        "kind": "BareMetalHostInventory",
        "metadata": _meta("rack1-u12"),
        "spec": {"hostRef": {"name": "rack1-u12"}},
        "status": {"hardware": _HARDWARE, "inspectedAt": T1, "source": "emulator"},
    },
    "HardwareData": {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "HardwareData",
        "metadata": _meta("rack1-u12"),
        "spec": {"hardware": _HARDWARE},
    },
    "HostFirmwareSettings": {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "HostFirmwareSettings",
        "metadata": _meta("rack1-u12"),
        "spec": {"settings": {"ProcTurboMode": "Disabled", "NumCores": 12}},
        "status": {
            "schema": {"name": "schema-1a2b3c4d", "namespace": "default"},
            "settings": {"ProcTurboMode": "Enabled", "NumCores": "16"},
            "lastUpdated": T1,
            "conditions": [
                {"type": "Valid", "status": "False", "reason": "ConfigurationError",
                 "message": "setting NumCores is ReadOnly", "lastTransitionTime": T1,
                 "observedGeneration": 1},
            ],
        },
    },
    "FirmwareSchema": {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "FirmwareSchema",
        "metadata": _meta("schema-1a2b3c4d"),
        "spec": {
            "hardwareVendor": "Dell Inc.",
            "hardwareModel": "PowerEdge R650",
            "schema": {
                "ProcTurboMode": {"attribute_type": "Enumeration",
                                  "allowable_values": ["Enabled", "Disabled"]},
                "NumCores": {"attribute_type": "Integer", "lower_bound": 10,
                             "upper_bound": 20, "read_only": True},
            },
        },
    },
    "BareMetalHostProfile": {
        "apiVersion": "metal.racksmith.io/v1alpha1",
        "kind": "BareMetalHostProfile",
        "metadata": _meta("worker-raid"),
        "spec": {
            "devices": [
                {
                    "device": {"minSize": "100Gi", "type": "ssd"},
                    "wipe": True,
                    "partitions": [
                        {"name": "esp", "size": "512Mi", "flags": ["esp"]},
                        {"name": "root-a", "size": "60Gi"},
                        {"name": "lvm-a"},
                    ],
                },
                {
                    "device": {"hints": {"serialNumber": "NV2"}},
                    "partitions": [{"name": "root-b", "size": "60Gi"}, {"name": "lvm-b"}],
                },
            ],
            "softRaidDevices": [{"name": "md0", "level": "raid1", "devices": ["root-a", "root-b"]}],
            "volumeGroups": [{"name": "lvm_local", "devices": ["lvm-a", "lvm-b"]}],
            "logicalVolumes": [{"name": "var", "vg": "lvm_local", "size": "50Gi"}],
            "fileSystems": [
                {"fileSystem": "vfat", "source": "esp", "mountPoint": "/boot/efi"},
                {"fileSystem": "ext4", "source": "md0", "mountPoint": "/"},
                {
                    "fileSystem": "xfs",
                    "source": "var",
                    "mountPoint": "/var",
                    "mountOpts": "noatime",
                },
            ],
            "kernelParameters": {
                "cmdline": ["intel_iommu=on"],
                "sysctl": {"vm.swappiness": "10"},
                "modules": ["br_netfilter"],
            },
            "hugePages": [{"size": "1G", "count": 16}],
        },
        "status": {
            "renderedLayout": {"disks": 2},
            "conditions": [{"type": "Valid", "status": "True"}],
        },
    },
    "Subnet": {
        "apiVersion": "ipam.racksmith.io/v1alpha1",
        "kind": "Subnet",
        "metadata": {"name": "lcm-net", "namespace": "default", "labels": {"role": "lcm"}},
        "spec": {
            "cidr": "10.0.0.0/24",
            "gateway": "10.0.0.1",
            "includeRanges": ["10.0.0.20-10.0.0.200"],
            "excludeRanges": ["10.0.0.100"],
            "nameservers": ["10.0.0.2"],
        },
        "status": {
            "capacity": 181,
            "allocatable": 179,
            "allocated": 1,
            "messages": [],
            "observedGeneration": 1,
        },
    },
    "IPaddr": {
        "apiVersion": "ipam.racksmith.io/v1alpha1",
        "kind": "IPaddr",
        "metadata": _meta("ip-10-0-0-21"),
        "spec": {
            "address": "10.0.0.21",
            "cidr": "10.0.0.21/24",
            "gateway": "10.0.0.1",
            "mac": "52:54:00:00:00:01",
            "subnetRef": {"name": "lcm-net"},
            "ownerRef": {"kind": "IpamHost", "name": "worker-0"},
        },
    },
    "IpamHost": {
        "apiVersion": "ipam.racksmith.io/v1alpha1",
        "kind": "IpamHost",
        "metadata": _meta("worker-0"),
        "spec": {
            "machineRef": {"name": "worker-0"},
            "nicMACmap": [{"name": "eno1", "mac": "52:54:00:00:00:01", "primary": True}],
            "l2TemplateRef": "default-l2",
        },
        "status": {
            "state": "OK",
            "l2TemplateRef": "default-l2",
            "netconfig": {"version": 2, "ethernets": {"eno1": {"dhcp4": False}}},
            "ipAddresses": ["ip-10-0-0-21"],
        },
    },
    "L2Template": {
        "apiVersion": "ipam.racksmith.io/v1alpha1",
        "kind": "L2Template",
        "metadata": _meta("default-l2"),
        "spec": {
            "clusterRef": "prod",
            "default": True,
            "l3Layout": [{"subnetName": "lcm-net", "scope": "namespace"}],
            "autoIfMappingPrio": ["eno", "ens"],
            "npTemplate": "version: 2\nethernets:\n  {{nic 0}}:\n"
            '    addresses: [{{ip "0:lcm-net"}}]\n',
        },
        "status": {"conditions": [{"type": "Valid", "status": "True"}]},
    },
    "Cluster": {
        "apiVersion": "cluster.racksmith.io/v1alpha1",
        "kind": "Cluster",
        "metadata": _meta("prod"),
        "spec": {
            "networks": {
                "controlPlaneCIDRs": ["10.0.0.0/24"],
                "workloadPlaneCIDRs": ["10.1.0.0/24"],
                "pods": "10.233.0.0/16",
                "services": "10.96.0.0/12",
            },
            "apiServer": {"vip": "10.0.0.10", "keepalived": True},
            "release": "racksmith-1.4.0",
            "maxWorkerUpgradeCount": 5,
        },
        "status": {"machinesReady": 3, "machinesTotal": 4, "release": "racksmith-1.4.0"},
    },
    "Machine": {
        "apiVersion": "cluster.racksmith.io/v1alpha1",
        "kind": "Machine",
        "metadata": _meta("worker-0"),
        "spec": {
            "clusterName": "prod",
            "roles": ["node", "infra"],
            "hostSelector": {
                "matchLabels": {"rack": "1"},
                "matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}],
            },
            "l2TemplateSelector": {"matchLabels": {"net": "default"}},
            "hostProfile": "worker-raid",
            "upgradeIndex": 2,
        },
        "status": {
            "phase": "Ready",
            "nodeRef": {"kind": "Node", "name": "worker-0"},
            "hostRef": {"kind": "BareMetalHost", "namespace": "default", "name": "rack1-u12"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.21"}],
            "release": "racksmith-1.4.0",
        },
    },
    "ClusterRelease": {
        "apiVersion": "cluster.racksmith.io/v1alpha1",
        "kind": "ClusterRelease",
        "metadata": _meta("racksmith-1.4.0", None),
        "spec": {
            "version": "1.4.0",
            "kubernetesVersion": "1.33.2",
            "stateItems": [
                {
                    "name": "check-ports",
                    "phase": "checks",
                    "type": "command",
                    "params": {"cmd": ["ss", "-ltn"]},
                },
                _STATE_ITEM,
                {
                    "name": "join",
                    "phase": "join",
                    "roles": ["master", "etcd"],
                    "type": "kubeadm",
                    "params": {"phase": "join", "controlPlane": True},
                },
            ],
        },
    },
    "Volume": {
        "apiVersion": "storage.racksmith.io/v1alpha1",
        "kind": "Volume",
        "metadata": _meta("worker-0-data", None),
        "spec": {
            "nodeName": "worker-0",
            "storageClassName": "local-xfs",
            "mode": "Filesystem",
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"persistentVolumeReclaimPolicy": "Retain"},
            },
            "lvmLogicalVolume": {"vgName": "lvm_local", "size": "10Gi"},
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T1}],
            "phase": "Available",
            "deviceName": "dm-3",
            "size": "10Gi",
        },
    },
    "LCMMachine": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "LCMMachine",
        "metadata": _meta("worker-0"),
        "spec": {
            "machineRef": {"name": "worker-0"},
            "clusterName": "prod",
            "release": "racksmith-1.4.0",
            "stateItems": [_STATE_ITEM],
        },
        "status": {
            "phase": "Ready",
            "items": [
                {
                    "name": "install-containerd",
                    "hash": "9f2c",
                    "state": "Applied",
                    "changed": False,
                    "finishedAt": T1,
                }
            ],
            "heartbeat": T1,
            "agentVersion": "1.4.0",
            "release": "racksmith-1.4.0",
        },
    },
    "ClusterUpdatePlan": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "ClusterUpdatePlan",
        "metadata": _meta("prod-1.5.0"),
        "spec": {
            "cluster": "prod",
            "source": "racksmith-1.4.0",
            "target": "racksmith-1.5.0",
            "releaseNotes": "https://example.invalid/notes/1.5.0",
            "steps": [
                {
                    "id": "control-plane",
                    "name": "Update control plane",
                    "impact": {"users": "minor", "workloads": "none"},
                    "duration": {"estimated": "30m"},
                    "granularity": "machine",
                    "commence": True,
                },
                {
                    "id": "workers",
                    "name": "Update workers",
                    "granularity": "machine",
                    "commence": False,
                },
            ],
        },
        "status": {
            "phase": "AutoPaused",
            "startedAt": T0,
            "eta": T1,
            "steps": [
                {"id": "control-plane", "phase": "Completed", "progress": 100},
                {"id": "workers", "phase": "AutoPaused"},
            ],
            "machines": [{"name": "worker-0", "stepId": "workers", "phase": "NotStarted"}],
            "firingAlerts": ["KubePodCrashLooping"],
        },
    },
    "UpdateGroup": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "UpdateGroup",
        "metadata": _meta("prod-default"),
        "spec": {"index": 10, "concurrentUpdates": 5, "rebootIfUpdateRequires": True},
    },
    "UpdateAutoPause": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "UpdateAutoPause",
        "metadata": _meta("prod"),
        "spec": {"alerts": ["KubePodCrashLooping", "CephHealthError"]},
    },
    "GracefulRebootRequest": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "GracefulRebootRequest",
        "metadata": _meta("prod"),
        "spec": {"machines": ["worker-0", "worker-1"]},
    },
    "ControlPlaneBackup": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "ControlPlaneBackup",
        "metadata": _meta("pre-update-default-demo-1-1-0-3f2a9c1d", None),
        "spec": {"reason": "PreUpdate", "planRef": {"namespace": "default",
                                                    "name": "demo-1.1.0"}},
        "status": {"phase": "Completed",
                   "file": "/var/lib/racksmith/backups/racksmith-pre-update.tar",
                   "size": 1075200, "sha256": "7cde400dc25b3bf1d1ebc2e87fc9ea42"
                   "6524554d9eb6165a78ad69eaf44231b4", "resourceVersion": 4711,
                   "objects": 812, "encrypted": False,
                   "startedAt": "2026-12-04T10:00:00Z", "completedAt": "2026-12-04T10:00:02Z",
                   "verifiedAt": "2026-12-04T10:00:02Z"},
    },
    "ClusterMaintenanceRequest": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "ClusterMaintenanceRequest",
        "metadata": _meta("prod", None),
        "spec": {"scope": "os", "release": "racksmith-1.5.0"},
    },
    "NodeMaintenanceRequest": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "NodeMaintenanceRequest",
        "metadata": _meta("worker-0", None),
        "spec": {"nodeName": "worker-0", "scope": "drain"},
    },
    "ClusterWorkloadLock": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "ClusterWorkloadLock",
        "metadata": _meta("openstack", None),
        "spec": {"controllerName": "openstack"},
        "status": {"state": "inactive", "release": "racksmith-1.5.0"},
    },
    "NodeWorkloadLock": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "NodeWorkloadLock",
        "metadata": _meta("openstack-worker-0", None),
        "spec": {
            "controllerName": "openstack",
            "nodeName": "worker-0",
            "nodeDeletionRequestSupported": True,
        },
        "status": {
            "state": "active",
            "inactivationProgress": {"description": "migrating 3 VMs", "percentage": 40},
        },
    },
    "NodeDeletionRequest": {
        "apiVersion": "lcm.racksmith.io/v1alpha1",
        "kind": "NodeDeletionRequest",
        "metadata": _meta("worker-9", None),
        "spec": {"nodeName": "worker-9"},
    },
}
