"""Shape checks on a netplan v2 document (the subset Racksmith templates use).

Owns what "looks like netplan v2" means before a document is handed to a
host: ``version: 2``; ``ethernets``, ``bonds``, ``vlans`` and ``bridges``
are maps of interface name → settings; addresses are CIDR strings; MACs,
routes, gateways and nameservers are well formed; bonds, bridges and VLANs
refer to interfaces the document defines. Pure; called by the ``netplan``
planner. It does not replace ``netplan generate`` on the host.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

__all__ = ["check_netplan"]

SECTIONS = ("ethernets", "bonds", "vlans", "bridges")
OTHER_TOP_KEYS = {
    "version",
    "renderer",
    "wifis",
    "tunnels",
    "vrfs",
    "dummy-devices",
    "virtual-ethernets",
    "modems",
}
RENDERERS = {"networkd", "NetworkManager"}
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def check_netplan(document: object) -> tuple[dict[str, Any], list[str]]:
    """The content under ``network:`` and the problems found (empty when it looks right).

    ``document`` may be the whole file (``{network: {...}}``) or its content.
    """
    if isinstance(document, dict) and set(document) == {"network"}:
        document = document["network"]
    if not isinstance(document, dict):
        return {}, ["netplan document must be a mapping, got " + type(document).__name__]
    errors: list[str] = []
    if document.get("version") != 2:
        errors.append(f"network.version must be 2, got {document.get('version')!r}")
    for key in document:
        if key not in OTHER_TOP_KEYS and key not in SECTIONS:
            errors.append(f"network.{key}: unknown netplan key")
    if "renderer" in document and document["renderer"] not in RENDERERS:
        errors.append(f"network.renderer: must be one of {sorted(RENDERERS)}")
    defined: set[str] = set()
    for section in SECTIONS:
        entries = document.get(section, {})
        if not isinstance(entries, dict):
            errors.append(f"network.{section} must be a map of interface name to settings")
            continue
        defined.update(str(name) for name in entries)
    for section in SECTIONS:
        entries = document.get(section, {})
        if not isinstance(entries, dict):
            continue
        for name, settings in entries.items():
            where = f"network.{section}.{name}"
            if settings is None:
                settings = {}
            if not isinstance(settings, dict):
                errors.append(f"{where} must be a map")
                continue
            _check_interface(where, section, settings, defined, errors)
    return document, errors


def _is_ip(value: object) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def _is_cidr(value: object) -> bool:
    if not isinstance(value, str) or "/" not in value:
        return False
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        return False
    return True


def _check_interface(
    where: str, section: str, s: dict[str, Any], defined: set[str], errors: list[str]
) -> None:
    addresses = s.get("addresses", [])
    if not isinstance(addresses, list):
        errors.append(f"{where}.addresses must be a list")
    else:
        for a in addresses:
            if not _is_cidr(a):
                errors.append(
                    f"{where}.addresses: {a!r} is not an address with prefix (e.g. 10.0.0.5/24)"
                )
    macs = [("macaddress", s.get("macaddress"))]
    match = s.get("match")
    if match is not None:
        if not isinstance(match, dict):
            errors.append(f"{where}.match must be a map")
        else:
            macs.append(("match.macaddress", match.get("macaddress")))
    for key, mac in macs:
        if mac is not None and not (isinstance(mac, str) and _MAC.match(mac)):
            hint = " (quote MACs: YAML reads some as numbers)" if isinstance(mac, int) else ""
            errors.append(f"{where}.{key}: {mac!r} is not a MAC address{hint}")
    for key in ("gateway4", "gateway6"):
        if key in s and not _is_ip(s[key]):
            errors.append(f"{where}.{key}: {s[key]!r} is not an IP address")
    if "mtu" in s and not (isinstance(s["mtu"], int) and 68 <= s["mtu"] <= 65535):
        errors.append(f"{where}.mtu: {s['mtu']!r} is not a valid MTU")
    _check_routes(where, s.get("routes", []), errors)
    _check_nameservers(where, s.get("nameservers"), errors)
    if section in ("bonds", "bridges"):
        members = s.get("interfaces", [])
        if not isinstance(members, list):
            errors.append(f"{where}.interfaces must be a list")
        else:
            for m in members:
                if str(m) not in defined:
                    errors.append(f"{where}.interfaces: {m!r} is not defined in the document")
    if section == "vlans":
        vid = s.get("id")
        if not (isinstance(vid, int) and not isinstance(vid, bool) and 0 <= vid <= 4094):
            errors.append(f"{where}.id: {vid!r} is not a VLAN id (0-4094)")
        link = s.get("link")
        if link is None or str(link) not in defined:
            errors.append(f"{where}.link: {link!r} is not defined in the document")


def _check_routes(where: str, routes: object, errors: list[str]) -> None:
    if not isinstance(routes, list):
        errors.append(f"{where}.routes must be a list")
        return
    for i, r in enumerate(routes):
        at = f"{where}.routes[{i}]"
        if not isinstance(r, dict):
            errors.append(f"{at} must be a map with to and via")
            continue
        to = r.get("to")
        if not (to == "default" or _is_cidr(to) or _is_ip(to)):
            errors.append(f"{at}.to: {to!r} is not 'default' or a network")
        if "via" in r and not _is_ip(r["via"]):
            errors.append(f"{at}.via: {r['via']!r} is not an IP address")
        if "metric" in r and not (isinstance(r["metric"], int) and r["metric"] >= 0):
            errors.append(f"{at}.metric: {r['metric']!r} is not a non-negative integer")


def _check_nameservers(where: str, ns: object, errors: list[str]) -> None:
    if ns is None:
        return
    if not isinstance(ns, dict):
        errors.append(f"{where}.nameservers must be a map with addresses and search")
        return
    addresses = ns.get("addresses", [])
    if not isinstance(addresses, list) or not all(_is_ip(a) for a in addresses):
        errors.append(f"{where}.nameservers.addresses: {addresses!r} is not a list of IPs")
    search = ns.get("search", [])
    if not isinstance(search, list) or not all(isinstance(d, str) for d in search):
        errors.append(f"{where}.nameservers.search must be a list of domains")
