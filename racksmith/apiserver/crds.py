"""CustomResourceDefinition rules.

Owns: validation of CRD objects beyond their schema (the CRD name is
``<plural>.<group>``, names are DNS labels, exactly one storage version,
structural schemas, printer column types) and the status the server writes
once a CRD is served (``Established``, ``NamesAccepted``, ``acceptedNames``,
``storedVersions``). Pure.
"""

from __future__ import annotations

import re
from typing import Any

from racksmith.apiserver import schema as schemalib
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.objects import is_dns1123_label, is_dns1123_subdomain, now_rfc3339

Obj = dict[str, Any]

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_COLUMN_TYPES = {"integer", "number", "string", "boolean", "date"}


def validate_crd(crd: Obj) -> list[Cause]:
    causes: list[Cause] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    group = spec.get("group", "")
    names = spec.get("names") or {}
    plural = names.get("plural", "")
    name = crd.get("metadata", {}).get("name", "")
    if not isinstance(group, str) or not is_dns1123_subdomain(group) or "." not in group:
        causes.append(Cause("spec.group", f'Invalid value: "{group}": should be a domain '
                            "with at least one dot"))
    if plural and group and name != f"{plural}.{group}":
        causes.append(Cause("metadata.name", f'Invalid value: "{name}": must be '
                            f"spec.names.plural+\".\"+spec.group"))
    for fld in ("plural", "singular"):
        value = names.get(fld)
        if value and not is_dns1123_label(value):
            causes.append(Cause(f"spec.names.{fld}", f'Invalid value: "{value}": a lowercase '
                                "RFC 1123 label is required"))
    for fld in ("kind", "listKind"):
        value = names.get(fld)
        if value and not _KIND.fullmatch(value):
            causes.append(Cause(f"spec.names.{fld}", f'Invalid value: "{value}": must be a '
                                "valid kind name"))
    for i, short in enumerate(names.get("shortNames") or []):
        if not is_dns1123_label(str(short)):
            causes.append(Cause(f"spec.names.shortNames[{i}]",
                                f'Invalid value: "{short}": a lowercase RFC 1123 label is '
                                "required"))
    versions = spec.get("versions") or []
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
    if len(storage) != 1:
        causes.append(Cause("spec.versions", "Invalid value: must have exactly one version "
                            "marked as storage version"))
    seen: set[str] = set()
    for i, ver in enumerate(versions):
        if not isinstance(ver, dict):
            continue
        vname = str(ver.get("name", ""))
        base = f"spec.versions[{i}]"
        if vname in seen:
            causes.append(Cause(f"{base}.name", f'Duplicate value: "{vname}"',
                                "FieldValueDuplicate"))
        seen.add(vname)
        if not is_dns1123_label(vname):
            causes.append(Cause(f"{base}.name", f'Invalid value: "{vname}": a DNS-1035 label '
                                "is required"))
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            causes.append(Cause(f"{base}.schema.openAPIV3Schema", "Required value: schemas "
                                "are required", "FieldValueRequired"))
        elif not isinstance(schema, dict):
            causes.append(Cause(f"{base}.schema.openAPIV3Schema", "Invalid value: must be "
                                "an object"))
        else:
            causes.extend(schemalib.check_structural(
                schema, base_path=f"{base}.schema.openAPIV3Schema"))
        for j, col in enumerate(ver.get("additionalPrinterColumns") or []):
            cbase = f"{base}.additionalPrinterColumns[{j}]"
            if not isinstance(col, dict):
                continue
            if not col.get("name"):
                causes.append(Cause(f"{cbase}.name", "Required value", "FieldValueRequired"))
            if not col.get("jsonPath"):
                causes.append(Cause(f"{cbase}.jsonPath", "Required value",
                                    "FieldValueRequired"))
            if col.get("type") not in _COLUMN_TYPES:
                causes.append(Cause(f"{cbase}.type", f'Unsupported value: "{col.get("type")}": '
                                    'supported values: "boolean", "date", "integer", '
                                    '"number", "string"', "FieldValueNotSupported"))
        for j, sel in enumerate(ver.get("selectableFields") or []):
            if not isinstance(sel, dict) or not str(sel.get("jsonPath", "")).startswith("."):
                causes.append(Cause(f"{base}.selectableFields[{j}].jsonPath",
                                    "Invalid value: must be a simple path starting with '.'"))
    return causes


def established_status(crd: Obj, *, accepted: bool, message: str = "") -> Obj:
    """The status of a CRD after the server tried to serve it."""
    now = now_rfc3339()
    names = dict(crd.get("spec", {}).get("names", {}))
    kind = names.get("kind", "")
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    versions = [v.get("name") for v in crd.get("spec", {}).get("versions", [])
                if v.get("storage")]
    stored = list(crd.get("status", {}).get("storedVersions", []) or [])
    for v in versions:
        if v not in stored:
            stored.append(v)
    state = "True" if accepted else "False"
    return {
        "acceptedNames": names if accepted else {"kind": "", "plural": ""},
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": state, "lastTransitionTime": now,
             "reason": "NoConflicts" if accepted else "NameConflict",
             "message": "no conflicts found" if accepted else message},
            {"type": "Established", "status": state, "lastTransitionTime": now,
             "reason": "InitialNamesAccepted" if accepted else "NotAccepted",
             "message": "the initial names have been accepted" if accepted else message},
        ],
    }
