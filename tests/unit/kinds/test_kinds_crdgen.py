"""The generated CRDs: valid for Kubernetes, structural, complete, stable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
import yaml

from racksmith.kinds.base import Resource
from racksmith.kinds.common import QUANTITY_PATTERN
from racksmith.kinds.crdgen import all_crds, crd_for, render_yaml
from racksmith.kinds.registry import ALL_KINDS, kind_by_name

K8S_VERSION = "1.33"
KINDS = [pytest.param(k, id=k.info.kind) for k in ALL_KINDS]

# kind -> (group, namespaced), straight from the catalogue.
CATALOGUE = {
    "BareMetalHost": ("metal3.io", True),
    "BareMetalHostInventory": ("metal.racksmith.io", True),
    "HardwareData": ("metal3.io", True),
    "HostFirmwareSettings": ("metal3.io", True),
    "FirmwareSchema": ("metal3.io", True),
    "BareMetalHostProfile": ("metal.racksmith.io", True),
    "Subnet": ("ipam.racksmith.io", True),
    "IPaddr": ("ipam.racksmith.io", True),
    "IpamHost": ("ipam.racksmith.io", True),
    "L2Template": ("ipam.racksmith.io", True),
    "Cluster": ("cluster.racksmith.io", True),
    "Machine": ("cluster.racksmith.io", True),
    "ClusterRelease": ("cluster.racksmith.io", False),
    "Volume": ("storage.racksmith.io", False),
    "LCMMachine": ("lcm.racksmith.io", True),
    "ClusterUpdatePlan": ("lcm.racksmith.io", True),
    "UpdateGroup": ("lcm.racksmith.io", True),
    "UpdateAutoPause": ("lcm.racksmith.io", True),
    "GracefulRebootRequest": ("lcm.racksmith.io", True),
    "ControlPlaneBackup": ("lcm.racksmith.io", False),
    "ClusterMaintenanceRequest": ("lcm.racksmith.io", False),
    "NodeMaintenanceRequest": ("lcm.racksmith.io", False),
    "ClusterWorkloadLock": ("lcm.racksmith.io", False),
    "NodeWorkloadLock": ("lcm.racksmith.io", False),
    "NodeDeletionRequest": ("lcm.racksmith.io", False),
}

_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
_FORBIDDEN_IN_JUNCTORS = {"type", "description", "default", "additionalProperties", "nullable"}


def _schema(kind_cls: type[Resource]) -> dict[str, Any]:
    schema: dict[str, Any] = crd_for(kind_cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field/item node under ``node``, with its path."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def _structural_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    if schema.get("type") != "object":
        problems.append("root: type must be object")
    if schema["properties"].get("metadata") != {"type": "object"}:
        problems.append("root: metadata must be a bare object")
    for path, node in _walk(schema, ""):
        for key in ("$ref", "definitions", "$defs", "title", "nullable", "const"):
            if key in node:
                problems.append(f"{path}: {key} present")
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
        if "type" not in node and not (int_or_string or preserve):
            problems.append(f"{path}: no type")
        if int_or_string and "type" in node:
            problems.append(f"{path}: int-or-string must not set type")
        if "anyOf" in node and not (int_or_string and node["anyOf"] == _INT_OR_STRING_ANY_OF):
            problems.append(f"{path}: anyOf outside the int-or-string form")
        for branch in node.get("oneOf", []) + node.get("allOf", []):
            bad = _FORBIDDEN_IN_JUNCTORS & set(branch)
            if bad:
                problems.append(f"{path}: {sorted(bad)} inside a junctor")
            for name in branch.get("required", []):
                if name not in node.get("properties", {}):
                    problems.append(f"{path}: junctor requires unknown field {name}")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties with additionalProperties")
        if node.get("additionalProperties") is True:
            problems.append(f"{path}: additionalProperties true (use preserve-unknown-fields)")
        if node.get("uniqueItems"):
            problems.append(f"{path}: uniqueItems is forbidden in CRDs")
        for name in node.get("required", []):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: required field {name} not in properties")
    return problems


@pytest.mark.parametrize("kind_cls", KINDS)
def test_crd_validates_as_apiextensions_v1(kind_cls: type[Resource]) -> None:
    kubernetes_validate.validate(crd_for(kind_cls), K8S_VERSION, strict=True)


@pytest.mark.parametrize("kind_cls", KINDS)
def test_schema_is_structural(kind_cls: type[Resource]) -> None:
    assert _structural_problems(_schema(kind_cls)) == []


def test_structural_check_catches_violations() -> None:
    bad = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "a": {"description": "no type"},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "c": {"$ref": "#/defs/x", "type": "object"},
        },
    }
    problems = _structural_problems(bad)
    assert any(".a: no type" in p for p in problems)
    assert any(".b: anyOf" in p for p in problems)
    assert any(".c: $ref" in p for p in problems)


@pytest.mark.parametrize("kind_cls", KINDS)
def test_every_field_has_a_description(kind_cls: type[Resource]) -> None:
    schema = _schema(kind_cls)
    missing = [
        path
        for path, node in _walk(schema, "")
        if path and not path.endswith(("[]", "{}")) and path not in (".metadata",)
        if not node.get("description")
    ]
    assert missing == []
    assert schema.get("description")


def test_catalogue_names_groups_and_scopes() -> None:
    crds = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}
    assert set(crds) == set(CATALOGUE)
    for kind, (group, namespaced) in CATALOGUE.items():
        crd = crds[kind]
        spec = crd["spec"]
        assert spec["group"] == group
        assert spec["scope"] == ("Namespaced" if namespaced else "Cluster")
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{group}"
        assert spec["names"]["listKind"] == kind + "List"
        assert spec["names"]["categories"][0] == "racksmith"
        assert len(spec["names"]["categories"]) >= 2
        [version] = spec["versions"]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    plurals = [crd["metadata"]["name"] for crd in crds.values()]
    assert len(set(plurals)) == len(plurals)


@pytest.mark.parametrize("kind_cls", KINDS)
def test_status_subresource_iff_status(kind_cls: type[Resource]) -> None:
    version = crd_for(kind_cls)["spec"]["versions"][0]
    has_status = "status" in version["schema"]["openAPIV3Schema"]["properties"]
    assert has_status == kind_cls.has_status()
    assert ("subresources" in version) == has_status
    if has_status:
        assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind_cls", KINDS)
def test_printer_columns_point_at_schema_fields(kind_cls: type[Resource]) -> None:
    schema = _schema(kind_cls)
    paths = {path for path, _ in _walk(schema, "")}
    version = crd_for(kind_cls)["spec"]["versions"][0]
    columns = version.get("additionalPrinterColumns", [])
    assert any(c["name"] == "Age" and c["type"] == "date" for c in columns)
    for column in columns:
        json_path = column["jsonPath"]
        if json_path.startswith(".metadata."):
            continue
        plain = json_path.split("[?", 1)[0]
        assert plain in paths, f"{column['name']}: {json_path} is not a field"


def _columns(version: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    """A CRD version's printer columns as (name, jsonPath, type, priority)."""
    return [(c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
            for c in version["additionalPrinterColumns"]]


def test_volume_printer_columns_and_selectable_fields() -> None:
    version = crd_for(kind_by_name("Volume"))["spec"]["versions"][0]
    assert _columns(version) == [
        ("Node", ".spec.nodeName", "string", 0),
        ("StorageClass", ".spec.storageClassName", "string", 0),
        ("Size", ".status.size", "string", 0),
        ("Phase", ".status.phase", "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
        ("Mode", ".spec.mode", "string", 1),
        ("Device", ".status.deviceName", "string", 1),
    ]
    assert version["selectableFields"] == [{"jsonPath": ".spec.nodeName"}]


def test_volume_backends_are_exactly_one_of() -> None:
    spec = _schema(kind_by_name("Volume"))["properties"]["spec"]
    assert spec["oneOf"] == [
        {"required": ["sparseLoopDevice"]},
        {"required": ["rawBlockDevice"]},
        {"required": ["lvmLogicalVolume"]},
    ]
    assert spec["properties"]["mode"]["default"] == "Filesystem"
    assert spec["properties"]["mode"]["enum"] == ["Filesystem", "Block"]
    reasons = _schema(kind_by_name("Volume"))["properties"]["status"]["properties"]
    assert reasons["phase"]["enum"] == ["Available", "Pending", "Failed", "Terminating"]


def test_bare_metal_host_columns_and_short_name() -> None:
    crd = crd_for(kind_by_name("BareMetalHost"))
    assert crd["spec"]["group"] == "metal3.io"
    assert crd["spec"]["names"]["shortNames"] == ["bmh", "bmhost"]
    # Metal3's columns in Metal3's order (baremetalhost_types.go's printcolumns)
    assert _columns(crd["spec"]["versions"][0]) == [
        ("Status", ".status.operationalStatus", "string", 1),
        ("State", ".status.provisioning.state", "string", 0),
        ("Consumer", ".spec.consumerRef.name", "string", 0),
        ("BMC", ".spec.bmc.address", "string", 1),
        ("Online", ".spec.online", "string", 0),
        ("Error", ".status.errorType", "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
    ]
    state = _schema(kind_by_name("BareMetalHost"))["properties"]["status"]["properties"][
        "provisioning"
    ]["properties"]["state"]
    assert "externally provisioned" in state["enum"]
    assert "- `inspecting`:" in state["description"]


def test_machine_columns() -> None:
    columns = crd_for(kind_by_name("Machine"))["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("priority")] == [
        "Cluster",
        "Roles",
        "Phase",
        "Node",
        "Age",
    ]


def test_quantity_and_optional_translation() -> None:
    spec = _schema(kind_by_name("Volume"))["properties"]["spec"]
    size = spec["properties"]["sparseLoopDevice"]["properties"]["size"]
    assert size == {
        "description": size["description"],
        "pattern": QUANTITY_PATTERN,
        "anyOf": _INT_OR_STRING_ANY_OF,
        "x-kubernetes-int-or-string": True,
    }
    # Optional[X] becomes a plain, non-required X without a null default.
    template = spec["properties"]["template"]
    assert template["type"] == "object" and "default" not in template
    assert "template" not in spec["required"]
    # Free-form dicts keep unknown fields; string maps are typed maps.
    assert template["properties"]["spec"] == {
        "type": "object",
        "description": template["properties"]["spec"]["description"],
        "x-kubernetes-preserve-unknown-fields": True,
    }
    sysctl = _schema(kind_by_name("BareMetalHostProfile"))["properties"]["spec"]["properties"][
        "kernelParameters"
    ]["properties"]["sysctl"]
    assert sysctl["additionalProperties"] == {"type": "string"}


def test_defaults_reach_the_schema() -> None:
    cluster = _schema(kind_by_name("Cluster"))["properties"]["spec"]["properties"]
    assert cluster["networks"]["default"] == {}
    assert cluster["networks"]["properties"]["pods"]["default"] == "10.233.0.0/16"
    assert cluster["networks"]["properties"]["services"]["default"] == "10.96.0.0/12"
    assert cluster["maxWorkerUpgradeCount"]["default"] == 1
    assert cluster["maxWorkerUpgradeCount"]["minimum"] == 1
    lock = _schema(kind_by_name("NodeWorkloadLock"))["properties"]["status"]["properties"]
    assert lock["state"]["default"] == "active"
    assert lock["state"]["enum"] == ["active", "inactive", "failed"]
    roles = _schema(kind_by_name("Machine"))["properties"]["spec"]["properties"]["roles"]
    assert roles["default"] == ["node"]
    assert roles["items"]["enum"] == ["master", "etcd", "node", "infra", "bootstrap"]


def test_conditions_are_a_list_map_keyed_by_type() -> None:
    conditions = _schema(kind_by_name("Machine"))["properties"]["status"]["properties"][
        "conditions"
    ]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert item["required"] == ["type", "status"]
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"


def test_render_yaml_is_a_stable_stream() -> None:
    crds = all_crds()
    text = render_yaml(crds)
    assert text.startswith("---\n")
    assert text.count("\n---\n") == len(crds) - 1
    assert "&id" not in text and "*id" not in text
    assert list(yaml.safe_load_all(text)) == crds
    assert render_yaml(all_crds()) == text
    first = next(iter(yaml.safe_load_all(text)))
    assert list(first) == ["apiVersion", "kind", "metadata", "spec"]
