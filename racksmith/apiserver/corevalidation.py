"""Kubernetes' rules for the content of Secrets and ConfigMaps.

Owns what kube-apiserver's typed decoding and ``ValidateSecret`` /
``ValidateConfigMap`` enforce that a loose schema cannot:

* **decoding** (:func:`check_decoding`, a 400 ``BadRequest`` like kube's
  "cannot be handled as a Secret"): ``data`` and ``binaryData`` values are
  strings of standard, padded base64; ``stringData`` and ConfigMap ``data``
  values are strings. The error names the key and the byte offset (``illegal
  base64 data at input byte 4``), **never the value**: a password pasted
  under ``data:`` must not come back in kubectl's output or a CI log;
* **validation** (:func:`validate`, 422 causes with field paths): every key
  is a valid config key (``[-._a-zA-Z0-9]+``, at most 253 characters, not
  ``.`` or ``..`` nor starting with ``..``); a ConfigMap key is not in both
  ``data`` and ``binaryData``; the decoded content is at most 1 MiB;
  an ``immutable`` Secret or ConfigMap keeps its data and stays immutable.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.options import json_type
from racksmith.apiserver.registry import ResourceInfo

Obj = dict[str, Any]

MAX_SIZE = 1024 * 1024
"""kube's ``MaxSecretSize``, also the limit of a ConfigMap's content."""
MAX_KEY_LENGTH = 253
_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _kind(info: ResourceInfo) -> str | None:
    if info.group != "":
        return None
    if info.plural == "secrets":
        return "Secret"
    if info.plural == "configmaps":
        return "ConfigMap"
    return None


def base64_error_offset(text: str) -> int | None:
    """Where Go's ``base64.StdEncoding`` would report the input corrupt (None:
    it decodes)."""
    for i, ch in enumerate(text):
        if ch in "\r\n":
            continue
        if not (ch.isascii() and (ch.isalnum() or ch in "+/=")):
            return i
    stripped = text.replace("\r", "").replace("\n", "")
    pad = stripped.find("=")
    if pad != -1:
        tail = stripped[pad:]
        if pad % 4 == 2 and tail == "=":
            return len(stripped)   # Go: "==" expected, not enough padding
        if tail.strip("=") or len(tail) > 2 or len(stripped) % 4:
            return pad
    if len(stripped) % 4:
        return len(stripped) - len(stripped) % 4
    try:
        base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return max(0, len(stripped) - 4)
    return None


def _cannot_handle(kind: str, detail: str) -> errors.ApiError:
    return errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {detail}')


def check_decoding(info: ResourceInfo, obj: Obj) -> None:
    """Refuse what kube's typed decoding of a Secret or ConfigMap refuses."""
    kind = _kind(info)
    if kind is None:
        return
    binary_field = "data" if kind == "Secret" else "binaryData"
    text_fields = ("stringData",) if kind == "Secret" else ("data",)
    for name in (binary_field, *text_fields):
        section = obj.get(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise _cannot_handle(kind, f"json: cannot unmarshal {json_type(section)} into Go "
                                 f"struct field {kind}.{name} of type map[string]"
                                 f"{'[]byte' if name == binary_field else 'string'}")
        for key, value in section.items():
            if value is None and name == binary_field:
                continue
            if not isinstance(value, str):
                raise _cannot_handle(kind, f"json: cannot unmarshal {json_type(value)} into Go "
                                     f"struct field {kind}.{name} of type "
                                     f"{'[]byte' if name == binary_field else 'string'} "
                                     f"(key {_key_shown(key)})")
            if name == binary_field:
                offset = base64_error_offset(value)
                if offset is not None:
                    raise _cannot_handle(kind, f"illegal base64 data at input byte {offset} "
                                         f"(key {_key_shown(key)})")


def _key_shown(key: str) -> str:
    text = key if len(key) <= 64 else key[:64] + "..."
    return '"' + text.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def key_errors(key: str) -> list[str]:
    """kube's ``IsConfigMapKey``."""
    errs: list[str] = []
    if len(key) > MAX_KEY_LENGTH:
        errs.append(f"must be no more than {MAX_KEY_LENGTH} characters")
    if not _KEY.fullmatch(key):
        errs.append("a valid config key must consist of alphanumeric characters, '-', '_' or "
                    "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                    "validation is '[-._a-zA-Z0-9]+')")
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _decoded_len(value: str) -> int:
    stripped = value.replace("\r", "").replace("\n", "")
    return len(stripped) * 3 // 4 - stripped[-2:].count("=") if stripped else 0


def validate(info: ResourceInfo, obj: Obj, old: Obj | None = None) -> list[Cause]:
    """422 causes for a Secret or ConfigMap about to be stored."""
    kind = _kind(info)
    if kind is None:
        return []
    causes: list[Cause] = []
    binary_field = "data" if kind == "Secret" else "binaryData"
    text_field = None if kind == "Secret" else "data"
    total = 0
    for name in (binary_field, text_field):
        if name is None:
            continue
        section = obj.get(name)
        if not isinstance(section, dict):
            continue
        for key, value in section.items():
            for err in key_errors(key):
                causes.append(Cause(f"{name}[{key}]", f"Invalid value: {_key_shown(key)}: {err}"))
            if isinstance(value, str):
                total += _decoded_len(value) if name == binary_field else len(value.encode())
    if text_field is not None and isinstance(obj.get(text_field), dict) and \
            isinstance(obj.get(binary_field), dict):
        for key in obj[binary_field]:
            if key in obj[text_field]:
                causes.append(Cause(f"{binary_field}[{key}]", f"Invalid value: {_key_shown(key)}"
                                    ": duplicate of key present in data"))
    if total > MAX_SIZE:
        causes.append(Cause("data" if kind == "Secret" else "", "Too long: must have at most "
                            f"{MAX_SIZE} bytes", "FieldValueTooLong"))
    if old is not None and old.get("immutable") is True:
        if obj.get("immutable") is not True:
            causes.append(Cause("immutable", "Forbidden: field is immutable when `immutable` "
                                "is set", "FieldValueForbidden"))
        for name in (binary_field, text_field):
            if name is not None and (obj.get(name) or {}) != (old.get(name) or {}):
                causes.append(Cause(name, "Forbidden: field is immutable when `immutable` is "
                                    "set", "FieldValueForbidden"))
    return causes
