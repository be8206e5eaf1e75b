"""Render ironic.conf for a standalone Ironic (pure: no I/O).

Owns :class:`IronicSettings` (the typed knobs Racksmith exposes) and
:func:`render_config` (settings → ironic.conf text). Called by
:class:`racksmith.ironic.process.IronicProcess`, which writes the file; the
emulator and the tests build settings directly.

Why each option is set is written next to it: most of them were learnt the
hard way (see /work/shared/IRONIC-NOTES.md). Every path Ironic may write to
points into ``data_dir`` so nothing lands in /var/lib/ironic or /var/log.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

FAKE_HARDWARE = "fake-hardware"
"""The hardware type of ``fake://`` hosts (enabled in every Ironic Racksmith
configures). Racksmith registers them with the ``fake`` inspect interface,
which stores no inventory in Ironic: there is none to read."""

#: Interfaces per hardware type that Racksmith uses. The first of each list
#: is what a node gets by default; the provisioner sets them explicitly.
FAKE_INTERFACES: Mapping[str, str] = {
    "boot": "fake",
    "deploy": "fake",
    "inspect": "fake",
    "management": "fake",
    "power": "fake",
}
REDFISH_INTERFACES: Mapping[str, str] = {
    "boot": "redfish-virtual-media",
    "deploy": "direct",
    "inspect": "redfish",
    "management": "redfish",
    "power": "redfish",
}
FAKE_BMC_INTERFACES: Mapping[str, str] = {
    "boot": "racksmith-fake",
    "deploy": "direct",
    "inspect": "agent",
    "management": "racksmith-fake",
    "power": "racksmith-fake",
}
"""The ``racksmith-fake`` hardware type (``ironic_plugin/``): the virtual
datacenter's instant fake BMCs, with the real ramdisk agent protocol."""
IPMI_INTERFACES: Mapping[str, str] = {
    "boot": "ipxe",
    "deploy": "direct",
    "inspect": "agent",
    "management": "ipmitool",
    "power": "ipmitool",
}


QUIET_LOGGERS: tuple[str, ...] = (
    "amqp=WARNING", "amqplib=WARNING", "qpid.messaging=INFO", "oslo.messaging=INFO",
    "oslo_messaging=INFO", "stevedore=INFO", "iso8601=WARNING", "requests=WARNING",
    "urllib3=WARNING", "keystonemiddleware.auth_token=INFO", "keystoneauth.session=INFO",
    "openstack=WARNING", "oslo_policy=WARNING", "oslo_concurrency.lockutils=WARNING",
    "sushy=INFO", "sushy_oem_idrac=INFO",
)
"""``[DEFAULT]default_log_levels``: Ironic's defaults (``ironic.conf.opts``)
with ``urllib3`` whole and the Redfish client (``sushy``) held at INFO."""


@dataclass(frozen=True)
class IronicPeriodics:
    """Ironic's own periodic tasks, as ``racksmith up`` configures them
    (``Settings.timings.ironic_service``)."""

    sync_power_state_interval: int = 30
    """How often Ironic reads every node's power state from its BMC (it
    notices power changes made out of band). One BMC call per node: on
    Redfish BMCs each costs Ironic ~0.4 s of CPU (its per-call PBKDF2)."""
    check_provision_state_interval: int = 5
    """How often Ironic checks wait states for their timeouts (database only)."""
    firmware_status_interval: int = 60
    """How often Ironic looks whether a BIOS change (servicing, cleaning)
    took, after the reboot that applies it (Ironic's default, 60 s). Several
    of Ironic's periodic tasks share it, each reading every node in a wait
    state: at 1,000 hosts a short one costs Ironic much of its CPU."""

    def __post_init__(self) -> None:
        if min(self.sync_power_state_interval, self.check_provision_state_interval,
               self.firmware_status_interval) < 1:
            raise ValueError("Ironic's periodic intervals must be >= 1 s")


@dataclass(frozen=True)
class IronicSettings:
    """How to run one standalone Ironic.

    ``http_url`` is where something (the emulator's static server in tests)
    serves ``http_root``: Ironic publishes virtual-media ISOs there.
    ``deploy_iso`` is the ramdisk ISO URL put into ``driver_info.deploy_iso``
    of virtual-media nodes. ``ipmi``: None = enable the ``ipmi`` hardware
    type only if ``ipmitool`` is on PATH (Ironic crash-loops without it).
    ``extra`` adds or overrides options: ``{section: {option: value}}``.
    """

    data_dir: Path
    port: int
    http_url: str
    http_root: Path
    deploy_iso: str | None = None
    heartbeat_timeout: int = 5
    automated_clean: bool = True
    host: str = "127.0.0.1"
    ipmi: bool | None = None
    fake_bmc: bool = False
    """Enable the ``racksmith-fake`` hardware type (needs ``ironic_plugin``
    installed into Ironic's virtual env; ``IronicProcess`` also enables it
    whenever it finds the plugin there)."""
    callback_timeout: int = 300
    """deploy/clean/service callback and inspect-wait timeouts (seconds)."""
    check_provision_state_interval: int = 5
    firmware_status_interval: int = 60
    power_state_change_timeout: int = 30
    sync_power_state_interval: int = 30
    debug: bool = False
    extra: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Ironic's API base URL (no trailing slash, no /v1)."""
        return f"http://{self.host}:{self.port}"

    @property
    def ironic_dir(self) -> Path:
        """Ironic's own state directory (database, log, scratch space)."""
        return self.data_dir / "ironic"

    @property
    def config_file(self) -> Path:
        return self.ironic_dir / "ironic.conf"

    @property
    def log_file(self) -> Path:
        return self.ironic_dir / "ironic.log"

    @property
    def database_file(self) -> Path:
        return self.ironic_dir / "ironic.sqlite"

    def scratch_dirs(self) -> list[Path]:
        """Directories Ironic expects to exist before it starts."""
        d = self.ironic_dir
        return [
            d,
            d / "tmp",
            d / "images",
            d / "master_images",
            d / "iso_master",
            d / "deploy_logs",
            d / "certificates",
            d / "locks",
            self.http_root,
        ]

    def ipmi_enabled(self) -> bool:
        """Whether the ipmi hardware type is enabled (see ``ipmi``)."""
        if self.ipmi is not None:
            return self.ipmi
        return shutil.which("ipmitool") is not None


def enabled_interfaces(ipmi: bool, fake_bmc: bool = False) -> dict[str, list[str]]:
    """``enabled_<kind>_interfaces`` per interface kind.

    Every enabled hardware type needs at least one enabled interface of each
    kind it supports, or Ironic refuses to start; hence the ``no-*``/fake
    entries.
    """
    table: dict[str, list[str]] = {
        "boot": ["fake", "redfish-virtual-media", "redfish-https",
                 "idrac-redfish-virtual-media"],
        "deploy": ["fake", "direct", "ramdisk"],
        "inspect": ["fake", "redfish", "agent", "no-inspect", "idrac-redfish"],
        "management": ["fake", "redfish", "noop", "idrac-redfish"],
        "power": ["fake", "redfish", "idrac-redfish"],
        "bios": ["no-bios", "fake", "redfish", "idrac-redfish"],
        "console": ["no-console"],
        "firmware": ["no-firmware", "fake", "redfish"],
        "network": ["noop"],
        "raid": ["no-raid", "fake", "agent", "redfish"],
        "rescue": ["no-rescue", "fake"],
        "storage": ["noop", "fake"],
        "vendor": ["no-vendor", "fake", "redfish"],
    }
    if ipmi:
        table["boot"].append("ipxe")
        table["management"].append("ipmitool")
        table["power"].append("ipmitool")
        table["vendor"].append("ipmitool")
    if fake_bmc:
        for kind in ("boot", "management", "power"):
            table[kind].append("racksmith-fake")
    return table


def hardware_types(ipmi: bool, fake_bmc: bool = False) -> list[str]:
    return [FAKE_HARDWARE, "redfish", "idrac", *(["ipmi"] if ipmi else []),
            *(["racksmith-fake"] if fake_bmc else [])]


def config_sections(settings: IronicSettings, *, ipmi: bool,
                    fake_bmc: bool | None = None) -> dict[str, dict[str, str]]:
    """The ironic.conf content as ``{section: {option: value}}``."""
    d = settings.ironic_dir
    b = _bool
    fake = settings.fake_bmc if fake_bmc is None else fake_bmc
    default: dict[str, str] = {
        # Standalone: no Keystone, no message bus; API and conductor in one
        # process (required with SQLite).
        "auth_strategy": "noauth",
        "rpc_transport": "none",
        # A fixed conductor name: nodes are mapped to conductors by host
        # name, so it must survive restarts.
        "host": "racksmith-ironic",
        "debug": b(settings.debug),
        # Ironic's own list plus the Redfish client: even with debug on, no
        # logger of a library that dumps requests (sushy logs request bodies
        # at DEBUG) writes below INFO. See racksmith.ironic.process.
        "default_log_levels": ",".join(QUIET_LOGGERS),
        "use_stderr": "true",
        "tempdir": str(d / "tmp"),
        "enabled_hardware_types": ",".join(hardware_types(ipmi, fake)),
        "default_network_interface": "noop",
        "default_resource_class": "baremetal",
    }
    for kind, names in enabled_interfaces(ipmi, fake).items():
        default[f"enabled_{kind}_interfaces"] = ",".join(names)

    sections: dict[str, dict[str, str]] = {
        "DEFAULT": default,
        "api": {
            "host_ip": settings.host,
            "port": str(settings.port),
            "api_workers": "1",
            # Sent to the ramdisk agent; a small value makes deploys fast
            # because in-band steps advance only on heartbeats.
            "ramdisk_heartbeat_timeout": str(settings.heartbeat_timeout),
        },
        # SQLite under load (50+ hosts inspecting at once): the busy timeout
        # (``timeout``, seconds) makes a writer wait for the lock instead of
        # failing with "database is locked" after sqlite's 5 s default, and
        # Ironic's own retry window is widened to match. The file is in WAL
        # mode (set by IronicProcess.sync_database), so readers never block.
        "database": {
            "connection": f"sqlite:///{settings.database_file}?timeout=60",
            "sqlite_max_wait_for_retry": "60",
        },
        "dhcp": {"dhcp_provider": "none"},
        # Without it: "Couldn't get the URL of the Ironic API service".
        # Also the base of the agent inspection callback URL.
        "service_catalog": {"endpoint_override": settings.url},
        "conductor": {
            "automated_clean": b(settings.automated_clean),
            "check_provision_state_interval": str(settings.check_provision_state_interval),
            "deploy_callback_timeout": str(settings.callback_timeout),
            "clean_callback_timeout": str(settings.callback_timeout),
            "service_callback_timeout": str(settings.callback_timeout),
            "rescue_callback_timeout": str(settings.callback_timeout),
            "inspect_wait_timeout": str(settings.callback_timeout),
            "power_state_change_timeout": str(settings.power_state_change_timeout),
            "sync_power_state_interval": str(settings.sync_power_state_interval),
            # Defaults to the machine's cpu count; keep room for the
            # periodic tasks on a 2-core box.
            "periodic_max_workers": "4",
        },
        "deploy": {
            "http_url": settings.http_url,
            "http_root": str(settings.http_root),
            "iso_master_path": str(d / "iso_master"),
            "default_boot_mode": "uefi",
            # Fast track keeps a ramdisk alive between operations; we want
            # every operation to boot the ramdisk as real hardware would.
            "fast_track": "false",
        },
        "pxe": {
            "images_path": str(d / "images"),
            "instance_master_path": str(d / "master_images"),
            # Files Ironic publishes under http_root (boot.ipxe...): 0600 like
            # every file of the data dir (its default, 0644, is for a web
            # server running as another user; ours runs as us). Decimal:
            # oslo's IntOpt does not parse 0o600.
            "file_permission": str(0o600),
        },
        "agent": {
            # The emulated agent and the tests speak plain HTTP.
            "require_tls": "false",
            "deploy_logs_local_path": str(d / "deploy_logs"),
            "deploy_logs_collect": "on_failure",
            "deploy_logs_storage_backend": "local",
            "certificates_path": str(d / "certificates"),
            # The soft power-off wait after deploy is retries x interval
            # (30 s by default): a minimal agent never powers off itself.
            "post_deploy_get_power_state_retries": "1",
            "post_deploy_get_power_state_retry_interval": "1",
            "command_timeout": "30",
        },
        "inspector": {
            # Agent inspection: the callback URL handed to the ramdisk is
            # derived from [service_catalog]endpoint_override
            # (<url>/v1/continue_inspection). Ports come from the BMC's NICs
            # before the ramdisk boots, so lookup by MAC works.
            "pre_create_ports": "true",
            "power_off": "true",
            "require_managed_boot": "true",
        },
        "redfish": {
            # Virtual-media ISOs are published under http_root/redfish and
            # served from http_url, never uploaded to Swift.
            "use_swift": "false",
            "file_permission": str(0o600),  # the ISOs published there, as [pxe]
            "connection_attempts": "3",
            "connection_retry_interval": "1",
            # How soon a BIOS change waiting for its reboot is looked at
            # again (servicing, cleaning): IronicPeriodics.firmware_status_interval.
            "firmware_update_status_interval": str(settings.firmware_status_interval),
        },
        "oslo_concurrency": {"lock_path": str(d / "locks")},
        "json_rpc": {"auth_strategy": "noauth"},
    }
    for section, options in settings.extra.items():
        sections.setdefault(section, {}).update(options)
    return sections


def render_config(settings: IronicSettings, *, ipmi: bool | None = None,
                  fake_bmc: bool | None = None) -> str:
    """ironic.conf text for ``settings`` (``ipmi`` overrides detection,
    ``fake_bmc`` overrides ``settings.fake_bmc``)."""
    use_ipmi = settings.ipmi_enabled() if ipmi is None else ipmi
    lines: list[str] = [
        "# Generated by racksmith.ironic.config: do not edit, regenerated on start.",
    ]
    for section, options in config_sections(settings, ipmi=use_ipmi,
                                            fake_bmc=fake_bmc).items():
        lines.append("")
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_escape(value)}" for key, value in options.items())
    return "\n".join(lines) + "\n"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _escape(value: str) -> str:
    # oslo.config interpolates $name; a literal dollar must be doubled.
    return value.replace("$", "$$")
