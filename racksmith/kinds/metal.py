"""The physical hosts: BareMetalHost, served as Metal3 serves it, and
Racksmith's BareMetalHostInventory.

Owns BareMetalHost (a server managed through its BMC) in Metal3's group
``metal3.io/v1alpha1`` with Metal3's short names, printer columns and
finalizer, so a Metal3 site's manifests and ``kubectl get bmh`` habits carry
over, Metal3's HardwareData (a host's hardware, named as its host), and
BareMetalHostInventory (the inspection report of one host) in
Racksmith's ``metal.racksmith.io``. BareMetalHostProfile, of Racksmith's
group too, lives in ``hostprofile``; what Racksmith adds refers to a host by
name.
Controllers in ``racksmith.controllers`` read and write these models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from racksmith.kinds.base import (
    DocEnum,
    KindInfo,
    PrinterColumn,
    RacksmithModel,
    Resource,
    age_column,
)
from racksmith.kinds.bmcaddress import ADDRESS_PATTERN
from racksmith.kinds.common import (
    Condition,
    LocalObjectReference,
    ObjectReference,
    SecretReference,
    conditions_field,
)
from racksmith.kinds.hardware import HardwareDetails

GROUP = "metal.racksmith.io"
"""Racksmith's group of the host kinds it adds (inventories, profiles)."""
METAL3_GROUP = "metal3.io"
"""Metal3's group: BareMetalHost."""
CATEGORIES = ("racksmith", "metal")


# --- BareMetalHost -----------------------------------------------------------


class ProvisioningState(DocEnum):
    """Where a host is in its provisioning life cycle (Metal3's states)."""

    UNMANAGED = "unmanaged", "Not enough information (e.g. BMC details) to manage the host."
    REGISTERING = "registering", "The host is being enrolled with the provisioner; BMC checked."
    INSPECTING = "inspecting", "The host is booted into the ramdisk to collect hardware details."
    PREPARING = "preparing", "RAID and firmware settings are being applied."
    AVAILABLE = "available", "Inspected, cleaned and ready to be provisioned."
    PROVISIONING = "provisioning", "The image is being written to the host."
    PROVISIONED = "provisioned", "The image is on the host and it boots from it."
    SERVICING = (
        "servicing",
        "A provisioned host takes new firmware settings (during a reboot); its disk is kept.",
    )
    EXTERNALLY_PROVISIONED = (
        "externally provisioned",
        "The host was provisioned outside Racksmith; only power is managed.",
    )
    DEPROVISIONING = "deprovisioning", "The image is being removed and the disks cleaned."
    POWERING_OFF_BEFORE_DELETE = (
        "powering off before delete",
        "The host is being powered off before it is removed.",
    )
    DELETING = "deleting", "The host is being removed from the provisioner."


class OperationalStatus(DocEnum):
    """Overall health of the host as seen by the controller."""

    OK = "OK", "The host is healthy and operational."
    DISCOVERED = "discovered", "The host is known but lacks details (e.g. BMC credentials)."
    ERROR = "error", "An error occurred; see errorType and errorMessage."
    DELAYED = "delayed", "Provisioning is delayed, e.g. by a limit on concurrent operations."
    DETACHED = "detached", "The host is detached from the provisioner; nothing is done to it."


class ErrorType(DocEnum):
    """The kind of the last error."""

    REGISTRATION = "registration error", "The BMC could not be reached or its credentials fail."
    INSPECTION = "inspection error", "Collecting hardware details failed."
    PREPARATION = "preparation error", "Applying RAID or firmware settings failed."
    PROVISIONING = "provisioning error", "Writing the image or deprovisioning failed."
    POWER_MANAGEMENT = "power management error", "Powering the host on or off failed."
    DETACH = "detach error", "Detaching the host from the provisioner failed."
    SERVICING = "servicing error", "Changing a provisioned host's firmware settings failed."


class BootMode(DocEnum):
    """How the host boots."""

    UEFI = "UEFI", "UEFI boot."
    LEGACY = "legacy", "Legacy BIOS boot."
    UEFI_SECURE_BOOT = "UEFISecureBoot", "UEFI boot with Secure Boot enabled."


class AutomatedCleaningMode(DocEnum):
    """Whether disks are cleaned before provisioning and after deprovisioning."""

    METADATA = "metadata", "Wipe partition tables and file-system signatures."
    DISABLED = "disabled", "Do not clean."


class ChecksumType(DocEnum):
    """Algorithm of an image checksum."""

    MD5 = "md5", "MD5."
    SHA256 = "sha256", "SHA-256."
    SHA512 = "sha512", "SHA-512."
    AUTO = "auto", "Told by the checksum's length (as when no type is given)."


class ImageFormat(DocEnum):
    """Disk format of an image."""

    RAW = "raw", "Raw disk image."
    QCOW2 = "qcow2", "QEMU copy-on-write image."
    VDI = "vdi", "VirtualBox disk image."
    VMDK = "vmdk", "VMware disk image."
    LIVE_ISO = "live-iso", "Bootable ISO, booted by virtual media without writing to disk."


class InspectionMode(DocEnum):
    """How the host is inspected at registration (Metal3's ``inspectionMode``)."""

    DISABLED = "disabled", "Not inspected: hardware details come from the " \
        "inspect.metal3.io/hardwaredetails annotation, or stay empty."
    AGENT = "agent", "Booted into the inspection ramdisk (the default but for Redfish BMCs)."
    FAST = "fast", "Out-of-band, through the BMC only (Redfish BMCs; refused on others)."


class CustomDeploy(RacksmithModel):
    """A custom deploy step instead of writing an image (refused: not supported by Racksmith)."""

    method: str = Field(description="The custom deploy step's name.")


class BMCDetails(RacksmithModel):
    """How to reach the host's baseboard management controller."""

    address: str = Field(
        pattern=ADDRESS_PATTERN,
        description=(
            "BMC address, as Metal3 parses it: ipmi://host[:port] or a bare "
            "host[:port] (IPMI); redfish://, redfish-virtualmedia://, "
            "redfish-uefihttp://, idrac-redfish://, idrac-virtualmedia:// (each "
            "also with +http or +https, and the system's path, e.g. "
            "/redfish/v1/Systems/1); ilo5-redfish:// and ilo5-virtualmedia:// "
            "(aliases of redfish:// and redfish-virtualmedia://); fake:// (no "
            "hardware) and fake+http:// (the virtual datacenter's fake BMCs)."
        )
    )
    credentials_name: str = Field(
        description="Secret (same namespace) with the username and password keys."
    )
    disable_certificate_verification: bool = Field(
        default=False, description="Skip TLS certificate verification of the BMC."
    )


class Image(RacksmithModel):
    """The operating system image to write to the host."""

    url: str = Field(description="Where to download the image.")
    checksum: str | None = Field(
        default=None, description="Checksum value, or URL of a checksum file."
    )
    checksum_type: ChecksumType | None = Field(default=None, description="Checksum algorithm.")
    format: ImageFormat | None = Field(default=None, description="Disk format of the image.")
    oci_auth_secret_name: str | None = Field(
        default=None, description="Secret with the credentials of an oci:// registry "
        "(refused: oci:// images are not supported by Racksmith).")


class RootDeviceHints(RacksmithModel):
    """How to choose the disk the image is written to; all given hints must match."""

    device_name: str | None = Field(default=None, description="Device path, e.g. /dev/sda.")
    hctl: str | None = Field(default=None, description="SCSI host:channel:target:lun.")
    model: str | None = Field(default=None, description="Substring of the device model.")
    vendor: str | None = Field(default=None, description="Substring of the device vendor.")
    serial_number: str | None = Field(default=None, description="Device serial number.")
    min_size_gigabytes: int | None = Field(default=None, ge=0, description="Minimum size in GB.")
    wwn: str | None = Field(default=None, description="World Wide Name.")
    wwn_with_extension: str | None = Field(
        default=None, description="WWN with the vendor extension."
    )
    wwn_vendor_extension: str | None = Field(default=None, description="WWN vendor extension.")
    rotational: bool | None = Field(default=None, description="True for spinning disks only.")


class SoftwareRAIDVolume(RacksmithModel):
    """A software RAID volume built by the ramdisk."""

    level: str = Field(description='RAID level: "0", "1" or "1+0".')
    size_gibibytes: int | None = Field(
        default=None, ge=0, description="Size; empty uses the whole disks."
    )
    physical_disks: list[RootDeviceHints] = Field(
        default_factory=list, description="Disks to use; empty lets the ramdisk choose."
    )


class HardwareRAIDVolume(RacksmithModel):
    """A hardware RAID volume created through the BMC."""

    name: str | None = Field(default=None, description="Volume name.")
    level: str = Field(description='RAID level: "0", "1", "2", "5", "6", "1+0", "5+0" or "6+0".')
    size_gibibytes: int | None = Field(
        default=None, ge=0, description="Size; empty uses the whole disks."
    )
    controller: str | None = Field(default=None, description="RAID controller to use.")
    physical_disks: list[str] = Field(default_factory=list, description="Disk names to use.")
    rotational: bool | None = Field(
        default=None, description="Use spinning (true) or solid (false) disks."
    )
    number_of_physical_disks: int | None = Field(
        default=None, ge=1, description="How many disks to use."
    )


class RAIDConfig(RacksmithModel):
    """RAID volumes to build before provisioning (hardware or software, not both)."""

    hardware_raid_volumes: list[HardwareRAIDVolume] = Field(
        default_factory=list, alias="hardwareRAIDVolumes", description="Hardware RAID volumes."
    )
    software_raid_volumes: list[SoftwareRAIDVolume] = Field(
        default_factory=list, alias="softwareRAIDVolumes", description="Software RAID volumes."
    )


class FirmwareConfig(RacksmithModel):
    """BIOS settings applied before provisioning."""

    simultaneous_multithreading_enabled: bool | None = Field(
        default=None, description="Enable hyper-threading."
    )
    sriov_enabled: bool | None = Field(default=None, description="Enable SR-IOV.")
    virtualization_enabled: bool | None = Field(
        default=None, description="Enable CPU virtualization."
    )


class BareMetalHostSpec(RacksmithModel):
    """Desired state of a BareMetalHost."""

    bmc: BMCDetails | None = Field(default=None, description="How to reach the BMC.")
    boot_mac_address: str | None = Field(
        default=None,
        alias="bootMACAddress",
        description="MAC address of the NIC the host boots from.",
    )
    boot_mode: BootMode = Field(default=BootMode.UEFI, description="Boot mode.")
    online: bool = Field(default=False, description="Whether the host should be powered on.")
    image: Image | None = Field(default=None, description="Image to provision; empty means none.")
    user_data: SecretReference | None = Field(
        default=None, description="Secret with cloud-init user data."
    )
    network_data: SecretReference | None = Field(
        default=None, description="Secret with cloud-init network data."
    )
    meta_data: SecretReference | None = Field(
        default=None, description="Secret with cloud-init metadata."
    )
    root_device_hints: RootDeviceHints | None = Field(
        default=None, description="How to choose the root disk."
    )
    raid: RAIDConfig | None = Field(default=None, description="RAID volumes to build.")
    firmware: FirmwareConfig | None = Field(
        default=None, description="Refused, as Metal3 refuses it: use HostFirmwareSettings.")
    consumer_ref: ObjectReference | None = Field(
        default=None, description="The object (usually a Machine) that uses this host."
    )
    externally_provisioned: bool = Field(
        default=False, description="The host was provisioned elsewhere; only manage its power."
    )
    automated_cleaning_mode: AutomatedCleaningMode = Field(
        default=AutomatedCleaningMode.METADATA, description="Disk cleaning mode."
    )
    description: str | None = Field(default=None, description="Free text for the operator.")
    hardware_profile: str | None = Field(
        default=None, description="Metal3's legacy hardware profile name: accepted and "
        "without effect, as in Metal3 (Racksmith's disk layouts: the "
        "baremetalhost.metal.racksmith.io/profile annotation).")
    inspection_mode: InspectionMode | None = Field(
        default=None, description="disabled, agent (boot the ramdisk) or fast (out-of-band, "
        "Redfish only); empty: out-of-band for Redfish BMCs, the ramdisk for others.")
    architecture: str | None = Field(
        default=None, description="CPU architecture of the host; Racksmith deploys x86_64 only.")
    custom_deploy: CustomDeploy | None = Field(
        default=None, description="Refused: not supported by Racksmith.")
    preprovisioning_network_data_name: str | None = Field(
        default=None, description="Refused: the ramdisk's network comes from Racksmith's IPAM.")
    disable_power_off: bool = Field(
        default=False, description="Never power the host off (true is refused: not "
        "supported by Racksmith).")
    network_interfaces: list[dict[str, Any]] = Field(
        default_factory=list, description="Refused when not empty: not supported by Racksmith.")
    taints: list[dict[str, Any]] = Field(
        default_factory=list, description="Deprecated in Metal3, never implemented there; "
        "refused when not empty.")


class ProvisionStatus(RacksmithModel):
    """What has been provisioned on the host."""

    state: ProvisioningState | None = Field(default=None, description="Current provisioning state.")
    id: str | None = Field(
        default=None, alias="ID", description="Id of the host in the provisioner."
    )
    image: Image | None = Field(default=None, description="Image last provisioned.")
    root_device_hints: RootDeviceHints | None = Field(
        default=None, description="Root device hints last applied."
    )
    boot_mode: BootMode | None = Field(default=None, description="Boot mode last applied.")
    raid: RAIDConfig | None = Field(default=None, description="RAID configuration last applied.")
    firmware: FirmwareConfig | None = Field(default=None, description="BIOS settings last applied.")
    disk_layout: dict[str, Any] | None = Field(
        default=None,
        description="The disk layout rendered from the profile for this host's hardware and "
        "sent with the deploy (devices, partitions, RAID, LVM, file systems, kernel "
        "parameters, huge pages).",
    )


class CredentialsStatus(RacksmithModel):
    """A version of the BMC credentials."""

    credentials: SecretReference | None = Field(default=None, description="Secret holding them.")
    credentials_version: str | None = Field(
        default=None, description="resourceVersion of the Secret when used."
    )


class OperationMetric(RacksmithModel):
    """When an operation started and ended."""

    start: datetime | None = Field(default=None, description="Start time.")
    end: datetime | None = Field(default=None, description="End time.")


class OperationHistory(RacksmithModel):
    """Timing of the last occurrence of each long operation."""

    register_: OperationMetric | None = Field(
        default=None, alias="register", description="Registration."
    )
    inspect: OperationMetric | None = Field(default=None, description="Inspection.")
    provision: OperationMetric | None = Field(default=None, description="Provisioning.")
    deprovision: OperationMetric | None = Field(default=None, description="Deprovisioning.")


class BareMetalHostStatus(RacksmithModel):
    """Observed state of a BareMetalHost."""

    operational_status: OperationalStatus | None = Field(
        default=None, description="Overall health."
    )
    error_type: ErrorType | None = Field(default=None, description="Kind of the last error.")
    error_message: str | None = Field(default=None, description="Details of the last error.")
    error_count: int = Field(
        default=0, ge=0, description="Consecutive failures; drives the back-off."
    )
    last_updated: datetime | None = Field(default=None, description="When the status last changed.")
    provisioning: ProvisionStatus | None = Field(default=None, description="Provisioning state.")
    hardware: HardwareDetails | None = Field(
        default=None, description="Summary of inspected hardware."
    )
    powered_on: bool | None = Field(default=None, description="Power state read from the BMC.")
    good_credentials: CredentialsStatus | None = Field(
        default=None, description="Last BMC credentials that worked."
    )
    tried_credentials: CredentialsStatus | None = Field(
        default=None, description="Last BMC credentials tried."
    )
    operation_history: OperationHistory | None = Field(
        default=None, description="Timing of long operations."
    )
    conditions: list[Condition] = conditions_field()


class BareMetalHost(Resource):
    """A physical server managed through its BMC: enrolled, inspected, provisioned."""

    info: ClassVar[KindInfo] = KindInfo(
        group=METAL3_GROUP,
        kind="BareMetalHost",
        plural="baremetalhosts",
        namespaced=True,
        short_names=("bmh", "bmhost"),
        categories=CATEGORIES,
        # Metal3's columns, in its order (``kubectl get bmh``: State,
        # Consumer, Online, Error, Age; ``-o wide`` adds Status and BMC).
        printer_columns=(
            PrinterColumn("Status", ".status.operationalStatus",
                          description="Operational status", priority=1),
            PrinterColumn("State", ".status.provisioning.state",
                          description="Provisioning status"),
            PrinterColumn("Consumer", ".spec.consumerRef.name",
                          description="Consumer using this host"),
            PrinterColumn("BMC", ".spec.bmc.address",
                          description="Address of management controller", priority=1),
            PrinterColumn("Online", ".spec.online", description="Whether the host is online "
                          "or not"),
            PrinterColumn("Error", ".status.errorType",
                          description="Type of the most recent error"),
            age_column(),
        ),
    )

    spec: BareMetalHostSpec = Field(default_factory=BareMetalHostSpec, description="Desired state.")
    status: BareMetalHostStatus | None = Field(default=None, description="Observed state.")


# --- BareMetalHostInventory --------------------------------------------------


class BareMetalHostInventorySpec(RacksmithModel):
    """Which host the inventory describes."""

    host_ref: LocalObjectReference = Field(
        description="The BareMetalHost (same namespace) this report describes."
    )


class BareMetalHostInventoryStatus(RacksmithModel):
    """The inspection report."""

    hardware: HardwareDetails | None = Field(default=None, description="Full hardware details.")
    inspected_at: datetime | None = Field(default=None, description="When inspection finished.")
    source: str | None = Field(
        default=None, description="What produced the report (e.g. ironic-inspector, emulator)."
    )
    conditions: list[Condition] = conditions_field()


class BareMetalHostInventory(Resource):
    """The full hardware report of one host, written by inspection.

    The report is data the controller observes, so it lives in ``status``
    (written through the status subresource); ``spec`` only names the host.
    The inventory has the same name as its host and is owned by it.
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=GROUP,
        kind="BareMetalHostInventory",
        plural="baremetalhostinventories",
        namespaced=True,
        short_names=("bmhi",),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Host", ".spec.hostRef.name", description="Described host."),
            PrinterColumn("CPUs", ".status.hardware.cpu.count", "integer", "Logical CPUs."),
            PrinterColumn("RAM", ".status.hardware.ramMebibytes", "integer", "Memory in MiB."),
            PrinterColumn("Inspected", ".status.inspectedAt", "date", "When inspected."),
            age_column(),
            PrinterColumn(
                "Vendor",
                ".status.hardware.systemVendor.manufacturer",
                description="Manufacturer.",
                priority=1,
            ),
            PrinterColumn(
                "Model",
                ".status.hardware.systemVendor.productName",
                description="Product name.",
                priority=1,
            ),
        ),
    )

    spec: BareMetalHostInventorySpec = Field(description="Which host is described.")
    status: BareMetalHostInventoryStatus | None = Field(default=None, description="The report.")


# --- HardwareData ------------------------------------------------------------


class HardwareDataSpec(RacksmithModel):
    """The hardware details of the host of the same name."""

    hardware: HardwareDetails | None = Field(
        default=None, description="The host's hardware details, as inspected.")


class HardwareData(Resource):
    """Metal3's record of a host's inspected hardware, named as its host.

    Written when the host is inspected and rebuilt (from the host's
    BareMetalHostInventory) when deleted; a HardwareData applied before its
    host is created gives the host its hardware, so it is not inspected.
    Linked to its host by name; its owner reference (to the host's UID) only
    lets the host's deletion take it along.
    """

    info: ClassVar[KindInfo] = KindInfo(
        group=METAL3_GROUP,
        kind="HardwareData",
        plural="hardwaredata",
        namespaced=True,
        short_names=("hd",),
        categories=CATEGORIES,
        printer_columns=(age_column(),),
    )

    spec: HardwareDataSpec = Field(default_factory=HardwareDataSpec,
                                   description="The hardware details.")
