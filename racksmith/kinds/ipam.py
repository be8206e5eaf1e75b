"""Kinds of the ``ipam.racksmith.io`` group: addresses and host networking.

Owns Subnet (an address pool), IPaddr (one allocated address), IpamHost
(the network of one machine, rendered as netplan) and L2Template (the
netplan template and subnets a machine's network is built from). Field
names follow MOSK's IPAM. The IPAM controller and planner use these models.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
    condition_column,
)
from racksmith.kinds.common import (
    Condition,
    LocalObjectReference,
    ObjectReference,
    conditions_field,
)

GROUP = "ipam.racksmith.io"
CATEGORIES = ("racksmith", "ipam")

#: One address or an inclusive range "a.b.c.d-a.b.c.e" (IPv4 or IPv6).
IPRange = Annotated[str, Field(pattern=r"^[0-9a-fA-F.:]+(-[0-9a-fA-F.:]+)?$")]


# --- Subnet --------------------------------------------------------------------


class SubnetSpec(RacksmithModel):
    """An address pool. Labels on the Subnet mark special pools (e.g. for services)."""

    cidr: str = Field(description="Network in CIDR notation, e.g. 10.0.0.0/24.")
    gateway: str | None = Field(default=None, description="Default gateway; never allocated.")
    include_ranges: list[IPRange] = Field(
        default_factory=list,
        description='Ranges to allocate from ("a.b.c.d-a.b.c.e" or one address); '
        "empty means the whole CIDR.",
    )
    exclude_ranges: list[IPRange] = Field(
        default_factory=list,
        description='Ranges never allocated ("a.b.c.d-a.b.c.e" or one address).',
    )
    nameservers: list[str] = Field(default_factory=list, description="DNS servers for hosts.")


class SubnetStatus(RacksmithModel):
    """Usage of the pool."""

    capacity: int | None = Field(
        default=None, ge=0, description="Addresses in the allocatable ranges."
    )
    allocatable: int | None = Field(default=None, ge=0, description="Addresses still free.")
    allocated: int | None = Field(
        default=None, ge=0, description="Addresses allocated (IPaddr objects)."
    )
    messages: list[str] = Field(
        default_factory=list, description="Problems found, e.g. overlapping ranges."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    conditions: list[Condition] = conditions_field()


class Subnet(Resource):
    """A pool of IP addresses that IPaddr objects are allocated from."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="Subnet",
        plural="subnets",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("CIDR", ".spec.cidr", description="Network."),
            PrinterColumn("Gateway", ".spec.gateway", description="Default gateway."),
            PrinterColumn("Allocatable", ".status.allocatable", "integer", "Free addresses."),
            PrinterColumn("Capacity", ".status.capacity", "integer", "Pool size.", priority=1),
            PrinterColumn(
                "Allocated", ".status.allocated", "integer", "Used addresses.", priority=1
            ),
            age_column(),
        ),
    )

    spec: SubnetSpec = Field(description="The pool.")
    status: SubnetStatus | None = Field(default=None, description="Usage.")


# --- IPaddr --------------------------------------------------------------------


class IPaddrSpec(RacksmithModel):
    """One allocated address and the network facts that go with it."""

    address: str = Field(description="The allocated IP address.")
    cidr: str | None = Field(
        default=None, description="Address with prefix length, e.g. 10.0.0.5/24."
    )
    gateway: str | None = Field(default=None, description="Gateway of the subnet.")
    mac: str | None = Field(default=None, description="MAC address of the interface that holds it.")
    subnet_ref: LocalObjectReference | None = Field(
        default=None, description="Subnet (same namespace) the address comes from."
    )
    owner_ref: ObjectReference | None = Field(
        default=None, description="Who holds the address (usually an IpamHost); empty means free."
    )


class IPaddr(Resource):
    """One IP address allocated from a Subnet; its name is derived from the address."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="IPaddr",
        plural="ipaddrs",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Address", ".spec.address", description="IP address."),
            PrinterColumn("MAC", ".spec.mac", description="Interface MAC."),
            PrinterColumn("Subnet", ".spec.subnetRef.name", description="Source subnet."),
            PrinterColumn("Owner", ".spec.ownerRef.name", description="Holder."),
            age_column(),
            PrinterColumn("CIDR", ".spec.cidr", description="With prefix.", priority=1),
        ),
    )

    spec: IPaddrSpec = Field(description="The address.")


# --- IpamHost ------------------------------------------------------------------


class NICMapping(RacksmithModel):
    """One NIC of the host, as found by inspection."""

    name: str = Field(description="Interface name, e.g. eno1.")
    mac: str = Field(description="MAC address.")
    ip: str | None = Field(default=None, description="Address seen during inspection, if any.")
    primary: bool = Field(default=False, description="True for the NIC the host PXE-booted from.")


class IpamHostState(DocEnum):
    """Whether the host's network config could be rendered."""

    OK = "OK", "The netplan config is rendered and all addresses are allocated."
    PENDING = "Pending", "Waiting for inspection data, a template or free addresses."
    ERROR = "Error", "Rendering failed; see messages."


class IpamHostSpec(RacksmithModel):
    """Inputs to the host's network config."""

    machine_ref: LocalObjectReference | None = Field(
        default=None, description="Machine (same namespace) this IpamHost belongs to."
    )
    nic_mac_map: list[NICMapping] = Field(
        default_factory=list,
        alias="nicMACmap",
        description="NICs of the host, in the order the L2 template's interface mapping uses.",
    )
    l2_template_ref: str | None = Field(
        default=None,
        alias="l2TemplateRef",
        description="L2Template (same namespace) to render; empty uses the one the "
        "machine's l2TemplateSelector or the cluster default picks.",
    )


class IpamHostStatus(RacksmithModel):
    """The rendered network config."""

    state: IpamHostState | None = Field(default=None, description="Rendering outcome.")
    l2_template_ref: str | None = Field(
        default=None, alias="l2TemplateRef", description="L2Template actually used."
    )
    netconfig: dict[str, Any] | None = Field(
        default=None, description="Rendered netplan v2 document (the content under `network:`)."
    )
    ip_addresses: list[str] = Field(
        default_factory=list, description="Names of the IPaddr objects held."
    )
    messages: list[str] = Field(default_factory=list, description="Rendering problems.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    conditions: list[Condition] = conditions_field()


class IpamHost(Resource):
    """The network of one machine: its NICs, template, and rendered netplan."""

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="IpamHost",
        plural="ipamhosts",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("State", ".status.state", description="Rendering outcome."),
            PrinterColumn("Template", ".status.l2TemplateRef", description="L2Template used."),
            age_column(),
            PrinterColumn(
                "Machine", ".spec.machineRef.name", description="Owning machine.", priority=1
            ),
        ),
    )

    spec: IpamHostSpec = Field(default_factory=IpamHostSpec, description="Inputs.")
    status: IpamHostStatus | None = Field(default=None, description="Rendered config.")


# --- L2Template ----------------------------------------------------------------


class SubnetScope(DocEnum):
    """Where an L3 layout entry looks up its subnet."""

    NAMESPACE = "namespace", "The subnet is in the template's namespace."
    GLOBAL = "global", "The subnet is shared, in the default namespace."


class L3Layout(RacksmithModel):
    """A subnet the template uses."""

    subnet_name: str = Field(description="Name of the Subnet.")
    scope: SubnetScope = Field(default=SubnetScope.NAMESPACE, description="Where to find it.")
    label_selector: dict[str, str] = Field(
        default_factory=dict, description="Pick the subnet by labels instead of by name."
    )


class L2TemplateSpec(RacksmithModel):
    """A netplan template and the subnets it draws addresses from."""

    cluster_ref: str | None = Field(
        default=None, description="Cluster the template belongs to; empty means any cluster."
    )
    default: bool = Field(
        default=False, description="Use for machines that select no template (one per cluster)."
    )
    l3_layout: list[L3Layout] = Field(
        default_factory=list, alias="l3Layout", description="Subnets the template uses."
    )
    if_mapping: list[str] = Field(
        default_factory=list,
        description="NIC names in order: `nic N` is the N-th (0-based) entry.",
    )
    auto_if_mapping_prio: list[str] = Field(
        default_factory=list,
        description="Name prefixes (e.g. eno, ens, enp) to order NICs by when ifMapping is empty.",
    )
    np_template: str = Field(
        description="Netplan v2 template. Macros: {{nic N}}, {{mac N}}, "
        '{{ip "N:subnet"}}, {{ip "vif:subnet"}}, {{cidr_from_subnet "subnet"}}, '
        '{{gateway_from_subnet "subnet"}}, {{nameservers_from_subnet "subnet"}}, '
        "{{cluster_api_lb_ip}}."
    )


class L2TemplateStatus(RacksmithModel):
    """Template validation."""

    messages: list[str] = Field(default_factory=list, description="Template problems.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status was computed from."
    )
    conditions: list[Condition] = conditions_field(
        "Current state observations; Valid tells whether the template renders."
    )


class L2Template(Resource):
    """How to build a machine's network config: subnets plus a netplan template.

    Changing a template in use is risky: machines using it are re-rendered
    only after the change is confirmed (see the controller's docs).
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="L2Template",
        plural="l2templates",
        namespaced=True,
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Cluster", ".spec.clusterRef", description="Owning cluster."),
            PrinterColumn("Default", ".spec.default", "boolean", "Cluster default."),
            condition_column("Valid", "Valid"),
            age_column(),
        ),
    )

    spec: L2TemplateSpec = Field(description="The template.")
    status: L2TemplateStatus | None = Field(default=None, description="Validation.")
