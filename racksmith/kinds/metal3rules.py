"""Metal3's admission rules for BareMetalHost, and Racksmith's refusals of the
Metal3 fields it does not implement. Pure.

Owns :func:`host_violations`: every reason a BareMetalHost (``obj``, and on
an update the stored ``old``) must be refused, each as (field path,
message). The API server refuses such a write with 422 listing them all
(``racksmith.app.admission`` wires this in; BMO runs the same rules in its
validating webhook). The messages are BMO's where BMO has the rule, so a
Metal3 user reads what they already know:

- on every write: ``spec.firmware`` (use HostFirmwareSettings); names of
  ``[A-Za-z0-9._-]`` that are not a UUID; no userData/networkData/metaData
  Secret from another namespace; a driver that cannot do what is asked
  (hardware RAID, secure boot, fast inspection on IPMI; fast inspection
  but on Redfish); the image's
  checksum (required, but for live-iso); the annotations' values (reboot
  mode JSON, detached arguments JSON, inspect, hardware details only with
  inspection disabled, the status copy);
- on an update (a violation the stored object already has is not counted:
  ratcheting): ``bootMACAddress`` is immutable once set; the BMC address
  changes only while registering or detached; ``externallyProvisioned`` is
  switched on only from available;
- Metal3 fields Racksmith does not implement are refused with the field's
  path and the words "not supported by Racksmith", never dropped:
  ``customDeploy``, ``preprovisioningNetworkDataName``, ``disablePowerOff:
  true``, ``networkInterfaces``, ``taints``,
  ``image.ociAuthSecretName`` and ``oci://`` images, an ``architecture``
  other than x86_64.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from racksmith.kinds import hostannotations as ann
from racksmith.kinds.bmcaddress import BMCAddressError, parse_bmc_address
from racksmith.kinds.hardware import HardwareDetails
from racksmith.kinds.metal import BareMetalHostStatus

M = TypeVar("M", bound=BaseModel)
Violation = tuple[str, str]
"""(field path, message)."""

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}$")
_UNSUPPORTED = "not supported by Racksmith"
OUT_OF_BAND = ("redfish", "idrac")
"""Ironic hardware types that inspect out-of-band (Metal3's ``fast``)."""
ARCHITECTURES = ("x86_64",)
"""What Racksmith deploys (its ramdisk and images)."""
STATUS_OPERATIONAL = ("", "OK", "discovered", "error", "delayed", "detached")
STATUS_ERRORS = ("", "provisioned registration error", "registration error",
                 "inspection error", "preparation error", "provisioning error",
                 "power management error")
"""The operationalStatus and errorType values a status annotation may carry (BMO's)."""

Obj = Mapping[str, Any]


def host_violations(obj: Obj, old: Obj | None, namespace: str) -> list[Violation]:
    """Every reason to refuse writing ``obj`` (over ``old``, None on create).

    On an update, a violation the stored object already has is not counted
    (ratcheting, as Kubernetes ratchets CRD validation): a host stored
    before a rule existed can still get its status, finalizers and
    deletion written; a change that breaks a rule is refused."""
    out = _static(obj, namespace)
    if old is None:
        return out
    known = set(_static(old, namespace))
    out = [v for v in out if v not in known]
    return out + _changes(_map(obj.get("spec")), _map(old.get("spec")),
                          _map(old.get("status")), _map(obj.get("status")))


def _static(obj: Obj, namespace: str) -> list[Violation]:
    """The rules over one object alone."""
    spec = _map(obj.get("spec"))
    meta = _map(obj.get("metadata"))
    return [*_name(str(meta.get("name") or "")), *_spec(spec, namespace),
            *_annotations(_map(meta.get("annotations")), spec)]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(name: str) -> list[Violation]:
    if not name:
        return []  # generateName: the name is checked once it exists
    if not _NAME.match(name):
        return [("metadata.name", "BareMetalHost resource name cannot contain characters "
                 "other than [A-Za-z0-9._-]")]
    if _UUID.match(name):
        return [("metadata.name", "BareMetalHost resource name cannot be a UUID")]
    return []


def _driver(spec: Obj) -> tuple[str, str] | None:
    """(scheme, Ironic hardware type) of the BMC address (None: no address, or
    an address the schema refuses already)."""
    address = _map(spec.get("bmc")).get("address")
    if not isinstance(address, str):
        return None
    try:
        parsed = parse_bmc_address(address)
    except BMCAddressError:
        return None
    return parsed.scheme, parsed.type.hardware


def _spec(spec: Obj, namespace: str) -> list[Violation]:
    out: list[Violation] = []
    if spec.get("firmware") is not None:
        out.append(("spec.firmware", "the Firmware field is no longer supported, use "
                    "HostFirmwareSettings resource instead"))
    for field in ("userData", "networkData", "metaData"):
        ref_ns = _map(spec.get(field)).get("namespace")
        if ref_ns and ref_ns != namespace:
            out.append((f"spec.{field}.namespace",
                        "cross-namespace Secret references are not allowed"))
    scheme, hardware = _driver(spec) or ("", "")
    driver = scheme if hardware == "ipmi" else None
    if driver is not None:
        if _map(spec.get("raid")).get("hardwareRAIDVolumes"):
            out.append(("spec.raid.hardwareRAIDVolumes",
                        f"BMC driver {driver} does not support configuring RAID"))
        if spec.get("bootMode") == "UEFISecureBoot":
            out.append(("spec.bootMode", f"BMC driver {driver} does not support secure boot"))
        if spec.get("inspectionMode") == "fast":
            out.append(("spec.inspectionMode",
                        f"BMC driver {driver} does not support fast (out-of-band) inspection"))
        if driver == "libvirt" and not spec.get("bootMACAddress"):
            out.append(("spec.bootMACAddress",
                        "BMC driver libvirt requires a BootMACAddress value"))
    elif spec.get("inspectionMode") == "fast" and hardware not in OUT_OF_BAND:
        out.append(("spec.inspectionMode", f"BMC driver {scheme or 'fake'} does not support "
                    "fast (out-of-band) inspection"))
    out += _image(_map(spec.get("image")))
    if spec.get("customDeploy") is not None:
        out.append(("spec.customDeploy", f"custom deploy steps are {_UNSUPPORTED}: set "
                    "spec.image"))
    if spec.get("preprovisioningNetworkDataName"):
        out.append(("spec.preprovisioningNetworkDataName",
                    f"{_UNSUPPORTED}: the ramdisk's network comes from Racksmith's IPAM "
                    "(IpamHost)"))
    if spec.get("disablePowerOff") is True:
        out.append(("spec.disablePowerOff", f"hosts that cannot be powered off are "
                    f"{_UNSUPPORTED}"))
    if spec.get("networkInterfaces"):
        out.append(("spec.networkInterfaces", f"{_UNSUPPORTED}: a host's networks come from "
                    "Racksmith's IPAM (L2Template, IpamHost)"))
    if spec.get("taints"):
        out.append(("spec.taints", f"{_UNSUPPORTED} (deprecated in Metal3 and never "
                    "implemented there): set taints on the Machine"))
    arch = spec.get("architecture")
    if arch and arch not in ARCHITECTURES:
        out.append(("spec.architecture", f"{arch} hosts are {_UNSUPPORTED} (supported: "
                    f"{', '.join(ARCHITECTURES)})"))
    return out


def _image(image: Obj) -> list[Violation]:
    if not image:
        return []
    out: list[Violation] = []
    url = str(image.get("url") or "")
    if url.lower().startswith("oci://"):
        out.append(("spec.image.url", f"oci:// images are {_UNSUPPORTED}: use an http(s) URL"))
    elif image.get("format") != "live-iso" and not image.get("checksum"):
        out.append(("spec.image.checksum", "checksum is required for normal images"))
    if image.get("ociAuthSecretName"):
        out.append(("spec.image.ociAuthSecretName", f"oci:// images are {_UNSUPPORTED}"))
    return out


def _path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _inspection_disabled(annotations: Obj, spec: Obj) -> bool:
    return annotations.get(ann.INSPECT) == ann.INSPECT_DISABLED \
        or spec.get("inspectionMode") == "disabled"


def _annotations(annotations: Obj, spec: Obj) -> list[Violation]:
    out: list[Violation] = []
    for key, value in annotations.items():
        text = value if isinstance(value, str) else ""
        if key == ann.REBOOT or key.startswith(ann.REBOOT + "/"):
            if ann.reboot_mode(text) is None:
                out.append((_path(key), f"invalid value for the {ann.REBOOT} annotation: "
                            '"" or JSON {"mode": "hard"|"soft", "force": bool}; allowed modes '
                            'are "hard", "soft" or ""'))
        elif key == ann.DETACHED:
            if ann.detach_arguments(text) is None:
                out.append((_path(key), f"invalid value for the {ann.DETACHED} annotation: "
                            '"" or JSON {"deleteAction": "delay"|"delete", "force": bool}'))
        elif key == ann.INSPECT:
            if text not in ("", ann.INSPECT_DISABLED):
                out.append((_path(key), f"invalid value for the {ann.INSPECT} annotation, "
                            'allowed are "disabled" or ""'))
            elif text == "" and spec.get("inspectionMode") == "disabled":
                out.append((_path(key), f"{ann.INSPECT} annotation and inspectionMode field "
                            "have contradicting values"))
        elif key == ann.HARDWARE_DETAILS and text:
            out += _hardware_details(text, annotations, spec)
        elif key == ann.STATUS and text:
            out += _status_copy(text)
    return out


def _hardware_details(text: str, annotations: Obj, spec: Obj) -> list[Violation]:
    path = _path(ann.HARDWARE_DETAILS)
    if not _inspection_disabled(annotations, spec):
        return [(path, "when hardware details are provided, inspection must be disabled "
                 f"(either via {ann.INSPECT} annotation or inspectionMode field)")]
    decoded = _decode(HardwareDetails, text)
    if isinstance(decoded, str):
        return [(path, f"error decoding the {ann.HARDWARE_DETAILS} annotation: {decoded}")]
    return []


def _decode(model: type[M], text: str) -> M | str:
    """``text`` decoded strictly into ``model`` (as Metal3 decodes an
    annotation's JSON: unknown fields refused), or why not."""
    try:
        raw = json.loads(text)
        value = model.model_validate(raw)
    except ValueError as exc:
        return _first_error(exc) if isinstance(exc, ValidationError) else "not JSON"
    unknown = unknown_field(model, raw)
    return f"unknown field {unknown!r}" if unknown else value


def unknown_field(model: type[BaseModel], data: Any, where: str = "") -> str | None:
    """The first key of ``data`` (JSON) that ``model`` has no field for, as a
    dotted path; None when every key is known. (The models ignore unknown
    keys; the API refuses them in objects, and this refuses them in the
    JSON an annotation carries, as Metal3 decodes it strictly.)"""
    if not isinstance(data, dict):
        return None
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        found = fields.get(key)
        if found is None:
            return path
        for inner in _models_in(found.annotation):
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                deeper = unknown_field(inner, item, f"{path}[{i}]" if isinstance(value, list)
                                       else path)
                if deeper:
                    return deeper
    return None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _status_copy(text: str) -> list[Violation]:
    path = _path(ann.STATUS)
    status = _decode(BareMetalHostStatus, text)
    if isinstance(status, str):
        return [(path, f"error decoding status annotation: {status}")]
    op = status.operational_status.value if status.operational_status else ""
    if op not in STATUS_OPERATIONAL:
        return [(path, f"invalid operationalStatus '{op}' in the {ann.STATUS} annotation")]
    err = status.error_type.value if status.error_type else ""
    if err not in STATUS_ERRORS:
        return [(path, f"invalid errorType '{err}' in the {ann.STATUS} annotation")]
    return []


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc") or ())
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


def _changes(spec: Obj, old_spec: Obj, old_status: Obj, status: Obj) -> list[Violation]:
    out: list[Violation] = []
    old_mac = str(old_spec.get("bootMACAddress") or "")
    if old_mac and old_mac.lower() != str(spec.get("bootMACAddress") or "").lower():
        out.append(("spec.bootMACAddress", "bootMACAddress can not be changed once it is set"))
    old_addr = str(_map(old_spec.get("bmc")).get("address") or "")
    new_addr = str(_map(spec.get("bmc")).get("address") or "")
    states = {_state(old_status), _state(status)}
    detached = "detached" in (old_status.get("operationalStatus"), status.get("operationalStatus"))
    if old_addr and new_addr != old_addr and not detached and "registering" not in states:
        out.append(("spec.bmc.address", "BMC address can not be changed if the BMH is not in "
                    "the Registering state, or if the BMH is not detached"))
    if spec.get("externallyProvisioned") is True and old_spec.get("externallyProvisioned") \
            is not True and "available" not in states:
        current = _state(old_status) or "no state"
        out.append(("spec.externallyProvisioned", "externallyProvisioned can only be enabled "
                    f"when in Available state, currently in {current}"))
    return out


def _state(status: Obj) -> str:
    return str(_map(status.get("provisioning")).get("state") or "")
