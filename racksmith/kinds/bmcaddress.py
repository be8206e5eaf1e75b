"""BMC addresses as Metal3's Bare Metal Operator parses them. Pure.

Owns the schemes a BareMetalHost's ``spec.bmc.address`` may use, what each
means (:class:`BMCType`: the Ironic hardware type, whether the ramdisk boots
over virtual media or UEFI HTTP) and :func:`parse_bmc_address`, shared by
the API's schema (:data:`ADDRESS_PATTERN`: an unsupported scheme gets a 422
whose message lists the supported ones) and the provisioner
(``racksmith.provisioner.ironic_bmc``). As BMO parses them:

- ``ipmi://host[:port]``, or a bare ``host[:port]`` (no scheme: IPMI);
  ``libvirt://host[:port]/`` (Metal3's development driver: IPMI to a
  virtual BMC, needing ``bootMACAddress``);
- ``redfish://``, ``redfish-virtualmedia://``, ``redfish-uefihttp://``,
  ``idrac-redfish://``, ``idrac-virtualmedia://``, each with the ``+http``
  or ``+https`` suffix (the transport; https without one) and the system's
  path (``/redfish/v1/Systems/1``: Ironic's ``redfish_system_id``);
- ``ilo5-redfish://`` and ``ilo5-virtualmedia://``: aliases of
  ``redfish://`` and ``redfish-virtualmedia://``;
- Racksmith's own ``fake://`` (Ironic's fake hardware) and
  ``fake+http(s)://`` (the virtual datacenter's fake BMCs).

Every Redfish-family host boots the ramdisk over virtual media (Racksmith
runs no PXE network), except ``redfish-uefihttp`` which boots it by UEFI
HTTP. Error messages name the scheme, never userinfo or credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "ADDRESS_PATTERN",
    "SUPPORTED_SCHEMES",
    "BMCAddress",
    "BMCAddressError",
    "BMCType",
    "parse_bmc_address",
]


@dataclass(frozen=True)
class BMCType:
    """What a scheme means for Ironic."""

    hardware: str
    """Ironic hardware type: ``ipmi``, ``redfish``, ``idrac``, ``fake-hardware``,
    ``racksmith-fake``."""
    boot: str | None = None
    """How the ramdisk boots: ``virtual-media``, ``uefi-http`` (None: the
    type's own)."""


_REDFISH_FAMILY: dict[str, BMCType] = {
    "redfish": BMCType("redfish", "virtual-media"),
    "redfish-virtualmedia": BMCType("redfish", "virtual-media"),
    "redfish-uefihttp": BMCType("redfish", "uefi-http"),
    "ilo5-redfish": BMCType("redfish", "virtual-media"),
    "ilo5-virtualmedia": BMCType("redfish", "virtual-media"),
    "idrac-redfish": BMCType("idrac", "virtual-media"),
    "idrac-virtualmedia": BMCType("idrac", "virtual-media"),
}
_OTHERS: dict[str, BMCType] = {
    "ipmi": BMCType("ipmi"),
    "libvirt": BMCType("ipmi"),
    "fake": BMCType("fake-hardware"),
    "fake+http": BMCType("racksmith-fake"),
    "fake+https": BMCType("racksmith-fake"),
}
SCHEMES: dict[str, BMCType] = {
    **_OTHERS,
    **{f"{base}{suffix}": kind for base, kind in _REDFISH_FAMILY.items()
       for suffix in ("", "+http", "+https")},
}
SUPPORTED_SCHEMES: tuple[str, ...] = tuple(sorted(SCHEMES))

ADDRESS_PATTERN = (
    "^((" + "|".join(s.replace("+", r"\+") for s in SUPPORTED_SCHEMES) + ")://.+"
    r"|\[[0-9a-fA-F:.]+\](:[0-9]+)?|[^:/\[\]]+(:[0-9]+)?)$"
)
"""The schema's pattern for ``spec.bmc.address`` (case-sensitive, as the
schemes are written): a supported scheme, or a bare host[:port] (IPMI)."""


class BMCAddressError(ValueError):
    """The address is malformed or its scheme is not supported."""


@dataclass(frozen=True)
class BMCAddress:
    """A parsed BMC address (no credentials: an address carries none)."""

    scheme: str
    """As written, lower case (``redfish-virtualmedia+http``)."""
    type: BMCType
    host: str
    port: int | None
    path: str
    """The system's path for the Redfish family ('' when none)."""
    transport: str | None
    """``http`` or ``https`` for the Redfish family and the fake BMCs."""

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def parse_bmc_address(address: str) -> BMCAddress:
    """``address`` parsed; raises :class:`BMCAddressError` naming what is wrong."""
    text = address.strip()
    supported = ", ".join(SUPPORTED_SCHEMES)
    if not text:
        raise BMCAddressError(f"empty BMC address (supported schemes: {supported}, or a bare "
                              "host[:port] for IPMI)")
    if "://" not in text:
        text = f"ipmi://{text}"  # Metal3: a bare host[:port] is IPMI
    scheme = text.split("://", 1)[0].lower()
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise BMCAddressError(f"unsupported BMC address scheme {scheme!r} "
                              f"(supported: {supported}, or a bare host[:port] for IPMI)")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise BMCAddressError(f"malformed {scheme}:// BMC address: bad host or port") from None
    host = parts.hostname or ""
    if not host and kind.hardware != "fake-hardware":
        raise BMCAddressError(f"malformed {scheme}:// BMC address: no host")
    transport = None
    if "+" in scheme:
        transport = scheme.rsplit("+", 1)[1]
    elif scheme.split("+", 1)[0] in _REDFISH_FAMILY:
        transport = "https"
    path = parts.path.rstrip("/") if kind.hardware not in ("ipmi", "fake-hardware") else ""
    return BMCAddress(scheme=scheme, type=kind, host=host, port=port, path=path,
                      transport=transport)
