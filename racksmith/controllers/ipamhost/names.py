"""Names shared by the IpamHost and L2Template controllers.

Owns the labels that tie an IPaddr to the IpamHost interface it was
claimed for, the annotations of the template-change confirmation, the
IpamHost finalizer and the condition types and reasons both controllers
write. The resources they read and write (IpamHosts, L2Templates, Machines,
Clusters, Subnets, IPaddrs) are in ``racksmith.runtime.resources``; the
IPaddr labels and reasons of the claim protocol in ``racksmith.ipamclaims``.
"""

from __future__ import annotations

FIELD_MANAGER = "racksmith-ipamhost"
COMPONENT = "racksmith-ipamhost"

GLOBAL_NAMESPACE = "default"
"""Where ``scope: global`` subnets live."""

IPAMHOST_LABEL = "ipam.racksmith.io/ipamhost"
"""On an IPaddr claimed for an IpamHost: the IpamHost's name."""
INTERFACE_LABEL = "ipam.racksmith.io/interface"
"""On an IPaddr claimed for an IpamHost: the interface (NIC index or name)."""

FINALIZER = "ipam.racksmith.io/ipamhost"
"""On every IpamHost that may hold addresses: released before it goes."""
RENDERED_GENERATION = "ipam.racksmith.io/rendered-template-generation"
"""On an IpamHost: the L2Template generation its netconfig was rendered from."""
CONFIRM_GENERATION = "ipam.racksmith.io/confirm-generation"
"""On an L2Template: the generation whose re-rendering the user confirmed."""

# IpamHost conditions.
READY = "Ready"
TEMPLATE_CHANGE_PENDING = "TemplateChangePending"
# L2Template conditions.
VALID = "Valid"
CHANGE_CONFIRMED = "ChangeConfirmed"

REASON_RENDERED = "Rendered"
REASON_NO_TEMPLATE = "NoTemplate"
REASON_TEMPLATE_NOT_FOUND = "TemplateNotFound"
REASON_AMBIGUOUS_TEMPLATE = "AmbiguousTemplate"
REASON_NO_NICS = "NoNICs"
REASON_SUBNET_NOT_FOUND = "SubnetNotFound"
REASON_SUBNET_UNUSABLE = "SubnetUnusable"
REASON_ADDRESSES_PENDING = "AddressesPending"
REASON_RENDER_FAILED = "RenderFailed"
REASON_CONFIRMATION_REQUIRED = "ConfirmationRequired"
REASON_UP_TO_DATE = "UpToDate"
REASON_CONFIRMED = "Confirmed"
REASON_VALID = "Valid"
REASON_INVALID = "Invalid"
