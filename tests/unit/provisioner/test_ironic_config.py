"""ironic.conf rendering: every option the notes say matters, paths in the data dir."""

from __future__ import annotations

import configparser
from pathlib import Path

from racksmith.ironic.config import IronicSettings, render_config


def parse(text: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    parser.read_string(text)
    return parser


def settings(tmp: Path, **kw: object) -> IronicSettings:
    return IronicSettings(data_dir=tmp, port=6385, http_url="http://127.0.0.1:8080",
                          http_root=tmp / "http", deploy_iso=None, **kw)  # type: ignore[arg-type]


def test_standalone_options(tmp_path: Path) -> None:
    conf = parse(render_config(settings(tmp_path), ipmi=False))
    assert conf.get("DEFAULT", "auth_strategy") == "noauth"
    assert conf.get("DEFAULT", "rpc_transport") == "none"
    assert conf.get("DEFAULT", "enabled_hardware_types") == "fake-hardware,redfish,idrac"
    assert conf.get("DEFAULT", "enabled_network_interfaces") == "noop"
    assert conf.get("api", "host_ip") == "127.0.0.1"
    assert conf.get("api", "port") == "6385"
    assert conf.get("api", "ramdisk_heartbeat_timeout") == "5"
    assert conf.get("dhcp", "dhcp_provider") == "none"
    assert conf.get("service_catalog", "endpoint_override") == "http://127.0.0.1:6385"
    assert conf.get("agent", "require_tls") == "false"
    assert conf.get("agent", "post_deploy_get_power_state_retries") == "1"
    assert conf.get("agent", "post_deploy_get_power_state_retry_interval") == "1"
    assert conf.get("conductor", "automated_clean") == "true"
    assert conf.get("conductor", "deploy_callback_timeout") == "300"
    assert conf.get("inspector", "pre_create_ports") == "true"
    assert conf.get("redfish", "use_swift") == "false"
    assert conf.get("deploy", "http_url") == "http://127.0.0.1:8080"
    assert conf.get("database", "connection") == (
        f"sqlite:///{tmp_path}/ironic/ironic.sqlite?timeout=60")
    for kind in ("boot", "deploy", "inspect", "power", "management"):
        assert "fake" in conf.get("DEFAULT", f"enabled_{kind}_interfaces")
    assert "ipmitool" not in conf.get("DEFAULT", "enabled_power_interfaces")


def test_every_path_is_in_the_data_dir(tmp_path: Path) -> None:
    conf = parse(render_config(settings(tmp_path), ipmi=False))
    paths = [("DEFAULT", "tempdir"), ("deploy", "http_root"), ("deploy", "iso_master_path"),
             ("pxe", "images_path"), ("pxe", "instance_master_path"),
             ("agent", "deploy_logs_local_path"), ("agent", "certificates_path"),
             ("oslo_concurrency", "lock_path")]
    for section, option in paths:
        assert conf.get(section, option).startswith(str(tmp_path)), (section, option)


def test_ipmi_only_when_enabled(tmp_path: Path) -> None:
    conf = parse(render_config(settings(tmp_path), ipmi=True))
    assert conf.get("DEFAULT", "enabled_hardware_types").endswith(",ipmi")
    assert "ipmitool" in conf.get("DEFAULT", "enabled_power_interfaces")
    assert "ipxe" in conf.get("DEFAULT", "enabled_boot_interfaces")


def test_settings_and_extra_overrides(tmp_path: Path) -> None:
    s = settings(tmp_path, heartbeat_timeout=9, automated_clean=False,
                 extra={"conductor": {"max_concurrent_deploy": "7"}, "new": {"a": "$x"}})
    conf = parse(render_config(s, ipmi=False))
    assert conf.get("api", "ramdisk_heartbeat_timeout") == "9"
    assert conf.get("conductor", "automated_clean") == "false"
    assert conf.get("conductor", "max_concurrent_deploy") == "7"
    assert conf.get("new", "a") == "$$x"  # oslo.config interpolation escaped
    assert s.url == "http://127.0.0.1:6385"


def test_fake_bmc_hardware_type_only_when_enabled(tmp_path: Path) -> None:
    plain = parse(render_config(settings(tmp_path), ipmi=False))
    assert "racksmith-fake" not in plain.get("DEFAULT", "enabled_hardware_types")
    conf = parse(render_config(settings(tmp_path), ipmi=False, fake_bmc=True))
    assert conf.get("DEFAULT", "enabled_hardware_types").endswith(",racksmith-fake")
    for kind in ("boot", "management", "power"):
        assert "racksmith-fake" in conf.get("DEFAULT", f"enabled_{kind}_interfaces")
    # Deploy and inspection stay Ironic's own (the ramdisk agent protocol).
    assert "direct" in conf.get("DEFAULT", "enabled_deploy_interfaces")
    assert "agent" in conf.get("DEFAULT", "enabled_inspect_interfaces")
