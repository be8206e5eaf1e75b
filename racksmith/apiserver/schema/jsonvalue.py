"""JSON value helpers shared by the schema, selector and patch modules.

Owns: JSON-aware equality (``True`` is not ``1``), JSON type names as
kube-openapi reports them, Go-style rendering of values the way
``k8s.io/apimachinery/pkg/util/validation/field`` prints them in messages,
and field-path joining in kube-apiserver's convention (``a.b``, ``a[0]``,
``a[key]``).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any


def json_type(value: Any) -> str:
    """The JSON type name of a decoded JSON value (``null`` for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality of JSON values where booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def canonical(value: Any) -> str:
    """A canonical compact JSON text (sorted keys) usable as a hash key."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compact(value: Any) -> str:
    """Compact JSON text keeping key order (as Go's encoding/json would)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def go_float(x: float) -> str:
    """Render a float like Go's ``fmt`` ``%v`` (shortest ``%g``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(x)).as_tuple()
    digits = "".join(str(d) for d in digit_tuple).rstrip("0")
    assert isinstance(exponent, int)
    exponent += len(digit_tuple) - len(digits)
    nd = len(digits)
    dp = nd + exponent  # position of the decimal point
    exp = dp - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if nd > 1 else "")
        esign = "-" if exp < 0 else "+"
        return f"{neg}{mant}e{esign}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{digits}"
    if dp >= nd:
        return f"{neg}{digits}{'0' * (dp - nd)}"
    return f"{neg}{digits[:dp]}.{digits[dp:]}"


def go_value(value: Any) -> str:
    """Render a bad value as ``field.Error.ErrorBody`` does."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return compact(value)


def child(path: str, name: str) -> str:
    """``spec`` + ``replicas`` -> ``spec.replicas``."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """``spec.items`` + 0 -> ``spec.items[0]``."""
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    """``spec.labels`` + ``app`` -> ``spec.labels[app]``."""
    return f"{path}[{k}]"


def join(base: str, sub: str) -> str:
    """Join a base path and a relative one (``a`` + ``[0].b`` -> ``a[0].b``)."""
    if not base:
        return sub
    if not sub:
        return base
    return base + sub if sub.startswith("[") else f"{base}.{sub}"
