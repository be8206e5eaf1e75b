"""String formats of CRD schemas (``format:``), as kube-openapi's strfmt checks them.

Owns: one predicate per supported format name and :func:`check_format`.
Like kube-apiserver, a format only constrains string values and an unknown
format is ignored. Simplified: ``hostname`` is RFC 1123 (ASCII only),
``uri`` requires a scheme, ``email`` is a pragmatic ``local@domain`` check,
``duration`` accepts Go duration syntax plus ``d``/``w`` units.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import re
from collections.abc import Callable

_QUANTITY = re.compile(
    r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[eE][+-]?[0-9]+|[mkMGTPE])?$"
)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_UUID_V = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-([345])[0-9a-fA-F]{3}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
_LABEL = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?$")
_MAC = re.compile(
    r"^(?:[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){7}"
    r"|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){2})$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S*$")
_DURATION = re.compile(
    # both micro signs (U+00B5 and U+03BC), as Go's time.ParseDuration
    r"^[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h|d|w))+$|^0$"  # noqa: RUF001
)
_HEXCOLOR = re.compile(r"^#?(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(
    r"^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$"
)
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")


def is_quantity(s: str) -> bool:
    """Kubernetes resource quantity (``100m``, ``1.5Gi``, ``2e3``, ``+1k``)."""
    return bool(_QUANTITY.match(s))


def _valid_date(y: str, m: str, d: str) -> bool:
    try:
        dt.date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


def is_date(s: str) -> bool:
    """RFC 3339 full-date (``2006-01-02``)."""
    m = _DATE.match(s)
    return m is not None and _valid_date(*m.groups())


def is_date_time(s: str) -> bool:
    """RFC 3339 date-time (``2006-01-02T15:04:05Z``, fractional seconds, offsets)."""
    m = _DATE_TIME.match(s)
    if not m:
        return False
    y, mo, d, hh, mm, ss, _frac, tz = m.groups()
    if not _valid_date(y, mo, d):
        return False
    if int(hh) > 23 or int(mm) > 59 or int(ss) > 60:
        return False
    if tz[0] in "+-":
        oh, om = int(tz[1:3]), int(tz[4:6])
        if oh > 23 or om > 59:
            return False
    return True


def is_uuid(s: str) -> bool:
    return bool(_UUID.match(s))


def _uuid_version(version: str) -> Callable[[str], bool]:
    def check(s: str) -> bool:
        m = _UUID_V.match(s)
        return m is not None and m.group(1) == version

    return check


def is_ipv4(s: str) -> bool:
    """Dotted-quad IPv4 (leading zeros accepted, as Go's sloppy parser does)."""
    m = _IPV4.match(s)
    return m is not None and all(int(part) <= 255 for part in m.groups())


def is_ipv6(s: str) -> bool:
    if ":" not in s or "%" in s:
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def is_cidr(s: str) -> bool:
    """``ip/prefix`` for IPv4 or IPv6 (host bits may be set)."""
    ip, sep, prefix = s.partition("/")
    if not sep or not prefix.isdigit() or len(prefix) > 3:
        return False
    if is_ipv4(ip):
        return int(prefix) <= 32
    if is_ipv6(ip):
        return int(prefix) <= 128
    return False


def is_hostname(s: str) -> bool:
    """RFC 1123 hostname: dot-separated labels of at most 63 characters."""
    if not s or len(s) > 253:
        return False
    return all(_LABEL.match(label) for label in s.split("."))


def is_byte(s: str) -> bool:
    """Standard base64 (padding required)."""
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def is_mac(s: str) -> bool:
    return bool(_MAC.match(s))


def is_email(s: str) -> bool:
    return bool(_EMAIL.match(s))


def is_uri(s: str) -> bool:
    return bool(_URI.match(s))


def is_duration(s: str) -> bool:
    return bool(_DURATION.match(s))


def is_hexcolor(s: str) -> bool:
    return bool(_HEXCOLOR.match(s))


def is_rgbcolor(s: str) -> bool:
    m = _RGBCOLOR.match(s)
    return m is not None and all(int(g) <= 255 for g in m.groups())


def is_bsonobjectid(s: str) -> bool:
    return bool(_BSON.match(s))


def _any(_s: str) -> bool:
    return True


FORMATS: dict[str, Callable[[str], bool]] = {
    "quantity": is_quantity,
    "date": is_date,
    "date-time": is_date_time,
    "datetime": is_date_time,
    "uuid": is_uuid,
    "uuid3": _uuid_version("3"),
    "uuid4": _uuid_version("4"),
    "uuid5": _uuid_version("5"),
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "cidr": is_cidr,
    "hostname": is_hostname,
    "byte": is_byte,
    "mac": is_mac,
    "email": is_email,
    "uri": is_uri,
    "duration": is_duration,
    "hexcolor": is_hexcolor,
    "rgbcolor": is_rgbcolor,
    "bsonobjectid": is_bsonobjectid,
    "password": _any,
    "int-or-string": _any,
}


def check_format(fmt: str, value: str) -> bool:
    """True when ``value`` satisfies ``fmt`` (unknown formats always pass)."""
    check = FORMATS.get(fmt)
    return True if check is None else check(value)
