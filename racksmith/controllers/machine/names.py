"""Names the Machine controller shares with the rest of Racksmith.

Owns the controller's field manager, its finalizer and labels, the names of
the objects it creates for a Machine ``m`` (IpamHost ``m``, LCMMachine ``m``,
Secret ``m-user-data``; the host agent's ServiceAccount, Role and
RoleBinding ``racksmith-host-m`` are :mod:`racksmith.hostcreds`'), the agent
Secret's keys, and the condition types and reasons it writes (see
``docs/design/cluster-contracts.md``, "Objects and names"). The resources it reads and writes are in
``racksmith.runtime.resources``.
"""

from __future__ import annotations

from racksmith.hostcreds import host_service_account as host_service_account
from racksmith.hostcreds import user_data_secret as user_data_secret
from racksmith.kinds import cluster

MACHINE_API_VERSION = cluster.Machine.info.api_version
FIELD_MANAGER = "racksmith-machine"
COMPONENT = "racksmith-machine"

FINALIZER = "cluster.racksmith.io/machine"
MACHINE_LABEL = "cluster.racksmith.io/machine"
CLUSTER_LABEL = "cluster.racksmith.io/cluster"
RELEASE_ANNOTATION = "lcm.racksmith.io/release"
"""On a Machine: the ClusterRelease it must run (written by the LCM node flow
when the machine's turn comes); pins the release its LCMMachine renders from."""
PROFILE_SET_ANNOTATION = "cluster.racksmith.io/profile-set-by"
"""On a claimed BareMetalHost: its profile annotation was set by this Machine (so
releasing the host clears it); absent when the user had set it."""

USER_DATA_KEY = "userData"
AGENT_CONFIG_PATH = "/etc/racksmith/agent.yaml"
AGENT_SECRET_KEYS = ("server", "ca.crt")
LCM_API_VERSION = "lcm.racksmith.io/v1alpha1"


# Condition types.
CLUSTER_FOUND = "ClusterFound"
CLUSTER_ENDPOINT_VALID = "ClusterEndpointValid"
RELEASE_FOUND = "ReleaseFound"
HOST_CLAIMED = "HostClaimed"
NETWORK_READY = "NetworkReady"
RELEASE_VALID = "ReleaseValid"
API_VIP_READY = "APIVIPReady"
AGENT_CONFIG_READY = "AgentConfigReady"
CLUSTER_CERTIFICATES_READY = "ClusterCertificatesReady"
PKI_DIR = "/etc/kubernetes/pki"
"""Where kubeadm looks for the cluster's certificate authorities."""
IMAGE_KNOWN = "ImageKnown"
HOST_PROVISIONED = "HostProvisioned"
DRAINED = "Drained"
READY = "Ready"

# Reasons.
NO_MATCHING_HOST = "NoMatchingHost"
HOST_GONE = "HostGone"
NOT_FOUND = "NotFound"
FOUND = "Found"
CLAIMED = "Claimed"
EVICTION_REFUSED = "EvictionRefused"
