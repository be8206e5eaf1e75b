"""The host-network planner: an L2Template rendered for one host → netplan v2.

Owns the template lookups (``nic``, ``mac``, ``ip``, ...), the sandboxed
rendering and the checks on the result. Pure: no I/O, and it never
allocates an address. Called by the IpamHost controller in two passes:

1. ``discover_addresses(inputs)`` renders once with placeholder addresses
   and returns every ``(interface, subnet)`` pair the template asks ``ip``
   for, so the controller can allocate (create IPaddr objects) for them;
2. ``render_netplan(inputs, allocations)`` renders again with the allocated
   addresses and returns the netplan document (the content under
   ``network:``, as ``IpamHost.status.netconfig`` stores it).

Template syntax differs from MOSK on purpose: MOSK templates are Go
templates (``{{ nic 0 }}``, ``{{ ip "0:mgmt" }}``); ours are Jinja
expressions (``{{ nic(0) }}``, ``{{ ip("0:mgmt") }}``). Lookups:

- ``nic(N)``, ``mac(N)``: name and MAC of NIC number N (0-based) in the
  interface mapping: ``ifMapping`` when given, else the host's NICs with
  ``autoIfMappingPrio`` prefixes first (in that order), then by natural name
  order (eno2 before eno10), which follows PCI order on common hardware;
- ``ip("N:subnet")``, ``ip("name:subnet")``: the address allocated for NIC N
  (or for the virtual interface ``name``, e.g. a bond or bridge) from
  ``subnet``, with its prefix length (``10.0.0.5/24``);
- ``cidr_from_subnet(s)``, ``gateway_from_subnet(s)``,
  ``nameservers_from_subnet(s)`` (comma-separated, as in MOSK, for use in
  ``[...]``), ``cluster_api_lb_ip()``.

Only subnets listed in the template's ``l3Layout`` may be named. Rendering
uses Jinja's immutable sandbox with strict undefined variables, no loader
and no autoescape: the template is user input.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import jinja2
import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

from racksmith.kinds.hardware import NIC
from racksmith.kinds.ipam import L2TemplateSpec, NICMapping, SubnetSpec
from racksmith.planners.netplancheck import check_netplan

__all__ = [
    "AddressRequest",
    "HostNIC",
    "NetplanError",
    "NetplanInputs",
    "RenderedNetplan",
    "discover_addresses",
    "interface_mapping",
    "render_netplan",
]

_TEMPLATE_FILE = "<template>"
_NATURAL = re.compile(r"(\d+)")


@dataclass(frozen=True)
class NetplanError:
    """Why a host's network config cannot be rendered; ``line`` is 1-based when known."""

    message: str
    line: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class HostNIC:
    """A NIC of the host: name and MAC."""

    name: str
    mac: str

    @classmethod
    def from_inspection(cls, nics: Sequence[NIC | NICMapping]) -> list[HostNIC]:
        """The NICs of an inspection (or an IpamHost's nicMACmap) that have name and MAC."""
        return [cls(n.name, n.mac.lower()) for n in nics if n.name and n.mac]


@dataclass(frozen=True)
class AddressRequest:
    """An address the template needs: for ``interface`` (a NIC index or a name) from ``subnet``.

    ``mac`` is the MAC of the NIC when ``interface`` is an index (for the
    IPaddr's ``mac``); it takes no part in equality.
    """

    interface: str
    subnet: str
    mac: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class NetplanInputs:
    """Everything one rendering needs.

    ``subnets`` maps each ``l3Layout`` subnet name to the Subnet the
    controller resolved it to (by name or label selector, in its scope).
    """

    template: L2TemplateSpec
    nics: Sequence[HostNIC]
    subnets: Mapping[str, SubnetSpec]
    cluster_api_lb_ip: str | None = None


@dataclass(frozen=True)
class RenderedNetplan:
    """The rendered netplan document and the addresses it uses."""

    netconfig: dict[str, Any]
    text: str
    addresses: tuple[AddressRequest, ...]


class _LookupError(Exception):
    """A lookup failed; carries the message for the NetplanError."""


def _natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _NATURAL.split(name) if p)


def interface_mapping(
    template: L2TemplateSpec, nics: Sequence[HostNIC]
) -> list[HostNIC] | NetplanError:
    """The host's NICs in the order ``nic(N)`` counts them."""
    by_name = {n.name: n for n in nics}
    if template.if_mapping:
        missing = [n for n in template.if_mapping if n not in by_name]
        if missing:
            have = ", ".join(sorted(by_name, key=_natural_key)) or "none"
            return NetplanError(
                f"ifMapping names NICs the host does not have: "
                f"{', '.join(missing)} (host has: {have})"
            )
        return [by_name[n] for n in template.if_mapping]
    prio = template.auto_if_mapping_prio

    def key(nic: HostNIC) -> tuple[int, tuple[tuple[int, int | str], ...]]:
        rank = next((i for i, p in enumerate(prio) if nic.name.startswith(p)), len(prio))
        return rank, _natural_key(nic.name)

    return sorted(nics, key=key)


class _Lookups:
    """The functions a template may call, bound to one host and one pass."""

    def __init__(
        self,
        inputs: NetplanInputs,
        mapping: list[HostNIC],
        address_of: Callable[[AddressRequest, ipaddress.IPv4Network | ipaddress.IPv6Network], str],
    ) -> None:
        self._inputs = inputs
        self._mapping = mapping
        self._address_of = address_of
        self._layout = {entry.subnet_name for entry in inputs.template.l3_layout}
        self.requests: list[AddressRequest] = []

    def functions(self) -> dict[str, Callable[..., str]]:
        return {
            "nic": self.nic,
            "mac": self.mac,
            "ip": self.ip,
            "cidr_from_subnet": self.cidr_from_subnet,
            "gateway_from_subnet": self.gateway_from_subnet,
            "nameservers_from_subnet": self.nameservers_from_subnet,
            "cluster_api_lb_ip": self.cluster_api_lb_ip,
        }

    def _nic(self, index: object) -> HostNIC:
        try:
            n = int(str(index))
        except ValueError:
            raise _LookupError(f"NIC index {index!r} is not a number") from None
        if not 0 <= n < len(self._mapping):
            raise _LookupError(
                f"NIC index {n} is out of range: the host has {len(self._mapping)} NICs "
                f"in its interface mapping"
            )
        return self._mapping[n]

    def _subnet(self, name: object) -> SubnetSpec:
        subnet = str(name)
        if subnet not in self._layout:
            raise _LookupError(f"subnet {subnet!r} is not in the template's l3Layout")
        spec = self._inputs.subnets.get(subnet)
        if spec is None:
            raise _LookupError(f"subnet {subnet!r} of the l3Layout was not found")
        return spec

    def nic(self, index: object) -> str:
        return self._nic(index).name

    def mac(self, index: object) -> str:
        return self._nic(index).mac

    def ip(self, spec: object) -> str:
        interface, sep, subnet = str(spec).partition(":")
        if not sep or not interface or not subnet:
            raise _LookupError(f'ip({spec!r}): expected "N:subnet" or "interface:subnet"')
        mac = None
        if interface.isdigit():
            nic = self._nic(interface)
            interface, mac = str(int(interface)), nic.mac
        network = ipaddress.ip_network(self._subnet(subnet).cidr, strict=False)
        request = AddressRequest(interface, subnet, mac)
        if request not in self.requests:
            self.requests.append(request)
        return self._address_of(request, network)

    def cidr_from_subnet(self, name: object) -> str:
        return str(ipaddress.ip_network(self._subnet(name).cidr, strict=False))

    def gateway_from_subnet(self, name: object) -> str:
        gateway = self._subnet(name).gateway
        if not gateway:
            raise _LookupError(f"subnet {str(name)!r} has no gateway")
        return gateway

    def nameservers_from_subnet(self, name: object) -> str:
        return ", ".join(self._subnet(name).nameservers)

    def cluster_api_lb_ip(self) -> str:
        if not self._inputs.cluster_api_lb_ip:
            raise _LookupError("cluster_api_lb_ip(): the cluster has no API server VIP")
        return self._inputs.cluster_api_lb_ip


def _environment() -> ImmutableSandboxedEnvironment:
    return ImmutableSandboxedEnvironment(
        loader=None,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def _template_line(tb: TracebackType | None) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _render(
    inputs: NetplanInputs, lookups_for: Callable[[list[HostNIC]], _Lookups]
) -> tuple[str, _Lookups] | NetplanError:
    mapping = interface_mapping(inputs.template, inputs.nics)
    if isinstance(mapping, NetplanError):
        return mapping
    lookups = lookups_for(mapping)
    env = _environment()
    try:
        template = env.from_string(inputs.template.np_template)
    except jinja2.TemplateSyntaxError as exc:
        return NetplanError(f"template syntax error: {exc.message}", exc.lineno)
    try:
        text = template.render(lookups.functions())
    except _LookupError as exc:
        return NetplanError(str(exc), _template_line(exc.__traceback__))
    except jinja2.exceptions.SecurityError as exc:
        return NetplanError(f"refused by the sandbox: {exc}", _template_line(exc.__traceback__))
    except jinja2.TemplateError as exc:
        return NetplanError(f"template error: {exc}", _template_line(exc.__traceback__))
    except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
        return NetplanError(f"template error: {exc}", _template_line(exc.__traceback__))
    return text, lookups


def discover_addresses(inputs: NetplanInputs) -> tuple[AddressRequest, ...] | list[NetplanError]:
    """Every address ``inputs.template`` asks ``ip`` for, in first-use order.

    Renders with placeholder addresses; the output is not checked (the
    placeholders may collide), only the lookups. Raises nothing.
    """

    def placeholder(
        _: AddressRequest, network: ipaddress.IPv4Network | ipaddress.IPv6Network
    ) -> str:
        return f"{network.network_address}/{network.prefixlen}"

    rendered = _render(inputs, lambda m: _Lookups(inputs, m, placeholder))
    if isinstance(rendered, NetplanError):
        return [rendered]
    return tuple(rendered[1].requests)


def render_netplan(
    inputs: NetplanInputs, allocations: Mapping[AddressRequest, str]
) -> RenderedNetplan | list[NetplanError]:
    """The netplan document for the host, or every reason it cannot be rendered.

    ``allocations`` maps each request of ``discover_addresses`` to the
    allocated address (plain, without prefix; it must lie in the subnet).
    A request with no allocation is an error, never an allocation.
    """

    def allocated(
        request: AddressRequest, network: ipaddress.IPv4Network | ipaddress.IPv6Network
    ) -> str:
        address = allocations.get(request)
        if address is None:
            raise _LookupError(
                f"no address allocated for interface {request.interface!r} "
                f"from subnet {request.subnet!r}"
            )
        try:
            ip = ipaddress.ip_address(address.split("/")[0])
        except ValueError:
            raise _LookupError(f"allocated address {address!r} is not an IP address") from None
        if ip not in network:
            raise _LookupError(
                f"allocated address {ip} is outside subnet {request.subnet!r} ({network})"
            )
        return f"{ip}/{network.prefixlen}"

    rendered = _render(inputs, lambda m: _Lookups(inputs, m, allocated))
    if isinstance(rendered, NetplanError):
        return [rendered]
    text, lookups = rendered
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        return [
            NetplanError(
                f"rendered template is not YAML: {problem}",
                mark.line + 1 if mark is not None else None,
            )
        ]
    netconfig, errors = check_netplan(document)
    if errors:
        return [NetplanError(e) for e in errors]
    return RenderedNetplan(netconfig=netconfig, text=text, addresses=tuple(lookups.requests))
