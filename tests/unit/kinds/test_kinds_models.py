"""The kind models: samples round-trip, validate against their CRD, reject bad input."""

from __future__ import annotations

import enum
import re
from typing import Any

import jsonschema
import pytest
from kinds_samples import SAMPLES
from pydantic import ValidationError

import racksmith.kinds.registry  # noqa: F401  (imports every kind module)
from racksmith.kinds.base import DocEnum, Resource
from racksmith.kinds.crdgen import crd_for
from racksmith.kinds.registry import ALL_KINDS, kind_by_name
from racksmith.kinds.storage import Volume, VolumeMode

KINDS = [pytest.param(k, id=k.info.kind) for k in ALL_KINDS]


def test_every_kind_has_a_sample() -> None:
    assert set(SAMPLES) == {k.info.kind for k in ALL_KINDS}


@pytest.mark.parametrize("kind_cls", KINDS)
def test_sample_round_trips(kind_cls: type[Resource]) -> None:
    sample = SAMPLES[kind_cls.info.kind]
    obj = kind_cls.model_validate(sample)
    assert obj.model_dump(mode="json", exclude_unset=True) == sample
    again = kind_cls.model_validate(obj.model_dump(mode="json"))
    assert again == obj


@pytest.mark.parametrize("kind_cls", KINDS)
def test_sample_validates_against_its_crd_schema(kind_cls: type[Resource]) -> None:
    schema = crd_for(kind_cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.Draft202012Validator(schema).validate(SAMPLES[kind_cls.info.kind])


@pytest.mark.parametrize("kind_cls", KINDS)
def test_full_dump_validates_against_its_crd_schema(kind_cls: type[Resource]) -> None:
    """Defaults filled in by the model are values the schema accepts."""
    schema = crd_for(kind_cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    dumped = kind_cls.model_validate(SAMPLES[kind_cls.info.kind]).model_dump(
        mode="json", exclude_none=True
    )
    dumped["metadata"] = {"name": "x"}
    jsonschema.Draft202012Validator(schema).validate(dumped)


def test_type_meta_is_filled_and_checked() -> None:
    sample = {k: v for k, v in SAMPLES["Volume"].items() if k not in ("apiVersion", "kind")}
    volume = Volume.model_validate(sample)
    assert (volume.api_version, volume.kind) == ("storage.racksmith.io/v1alpha1", "Volume")
    with pytest.raises(
        ValidationError, match=re.escape("expected storage.racksmith.io/v1alpha1 Volume")
    ):
        Volume.model_validate({**SAMPLES["Volume"], "kind": "Machine"})


def test_model_defaults() -> None:
    volume = Volume.model_validate(
        {"spec": {"nodeName": "n", "storageClassName": "s", "rawBlockDevice": {"devicePath": "/d"}}}
    )
    assert volume.spec.mode is VolumeMode.FILESYSTEM
    cluster = kind_by_name("Cluster").model_validate({"spec": {"release": "r"}})
    dumped = cluster.model_dump(mode="json")
    assert dumped["spec"]["networks"]["pods"] == "10.233.0.0/16"
    assert dumped["spec"]["maxWorkerUpgradeCount"] == 1
    lock = kind_by_name("NodeWorkloadLock").model_validate(
        {"spec": {"controllerName": "c", "nodeName": "n"}, "status": {}}
    )
    assert lock.model_dump(mode="json")["status"]["state"] == "active"


@pytest.mark.parametrize(
    "backends",
    [
        {},
        {"rawBlockDevice": {"devicePath": "/d"}, "sparseLoopDevice": {"size": "1Gi"}},
    ],
)
def test_volume_needs_exactly_one_backend(backends: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of"):
        Volume.model_validate({"spec": {"nodeName": "n", "storageClassName": "s", **backends}})


@pytest.mark.parametrize("size", ["10Gi", "500M", "1e3", 1024, "0.5"])
def test_quantity_accepts(size: int | str) -> None:
    spec = {"nodeName": "n", "storageClassName": "s", "sparseLoopDevice": {"size": size}}
    assert Volume.model_validate({"spec": spec}).spec.sparse_loop_device is not None


@pytest.mark.parametrize("size", ["10 GiB", "ten", "1Gb"])
def test_quantity_rejects(size: str) -> None:
    spec = {"nodeName": "n", "storageClassName": "s", "sparseLoopDevice": {"size": size}}
    with pytest.raises(ValidationError, match="not a quantity"):
        Volume.model_validate({"spec": spec})


def test_cluster_rejects_zero_worker_upgrade_count() -> None:
    with pytest.raises(ValidationError):
        kind_by_name("Cluster").model_validate(
            {"spec": {"release": "r", "maxWorkerUpgradeCount": 0}}
        )


def _doc_enums() -> list[type[DocEnum]]:
    found: list[type[DocEnum]] = []
    stack: list[type[DocEnum]] = [DocEnum]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def test_every_enum_member_has_a_docstring() -> None:
    enums = _doc_enums()
    assert len(enums) > 20
    for cls in enums:
        assert issubclass(cls, enum.Enum) and cls.__doc__
        for member in cls:
            assert member.__doc__ and member.__doc__ != cls.__doc__, f"{cls.__name__}.{member.name}"
            assert isinstance(member.value, str)
            assert str(member) == member.value
