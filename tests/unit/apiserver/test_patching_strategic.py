"""Strategic merge patch on core kinds (table of Kubernetes behaviours)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from racksmith.apiserver.patching import PatchError, strategic_merge_patch


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": list(containers), **spec}}


C1 = {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}],
      "ports": [{"containerPort": 80, "name": "http"}]}
C2 = {"name": "b", "image": "b:1"}

CASES: list[tuple[str, dict[str, Any], Any, dict[str, Any]]] = [
    ("maps merge, null deletes",
     {"metadata": {"labels": {"a": "1", "b": "2"}}},
     {"metadata": {"labels": {"a": None, "c": "3"}}},
     {"metadata": {"labels": {"b": "2", "c": "3"}}}),
    ("containers merged by name",
     pod(C1, C2), {"spec": {"containers": [{"name": "b", "image": "b:2"}]}},
     pod(C1, {"name": "b", "image": "b:2"})),
    ("new container appended",
     pod(C1), {"spec": {"containers": [{"name": "c", "image": "c:1"}]}},
     pod(C1, {"name": "c", "image": "c:1"})),
    ("delete container by directive",
     pod(C1, C2), {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}},
     pod(C2)),
    ("env merged by name inside a container",
     pod(C1), {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}},
     pod({**C1, "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]})),
    ("container ports merged by containerPort",
     pod(C1), {"spec": {"containers": [{"name": "a", "ports": [
         {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]}]}},
     pod({**C1, "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"},
                          {"containerPort": 443}]})),
    ("service ports merged by port",
     {"kind": "Service", "spec": {"ports": [{"port": 80, "targetPort": 8080}]}},
     {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 81}]}},
     {"kind": "Service", "spec": {"ports": [{"port": 80, "targetPort": 8080, "name": "http"},
                                            {"port": 81}]}}),
    ("tolerations replaced (atomic)",
     pod(tolerations=[{"key": "a"}]), {"spec": {"tolerations": [{"key": "b"}]}},
     pod(tolerations=[{"key": "b"}])),
    ("args replaced",
     pod({"name": "a", "args": ["x", "y"]}),
     {"spec": {"containers": [{"name": "a", "args": ["z"]}]}},
     pod({"name": "a", "args": ["z"]})),
    ("finalizers set-merged",
     {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}},
     {"metadata": {"finalizers": ["a", "b", "c"]}}),
    ("deleteFromPrimitiveList",
     {"metadata": {"finalizers": ["a", "b"]}},
     {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
     {"metadata": {"finalizers": ["b"]}}),
    ("patch replace on map",
     {"spec": {"selector": {"a": "1", "b": "2"}}},
     {"spec": {"selector": {"$patch": "replace", "c": "3"}}},
     {"spec": {"selector": {"c": "3"}}}),
    ("patch delete on map",
     {"spec": {"selector": {"a": "1"}, "x": 1}}, {"spec": {"selector": {"$patch": "delete"}}},
     {"spec": {"x": 1}}),
    ("patch replace on list",
     pod(C1, C2), {"spec": {"containers": [{"$patch": "replace"}, {"name": "z"}]}},
     pod({"name": "z"})),
    ("retainKeys",
     {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
     {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
     {"spec": {"strategy": {"type": "Recreate"}}}),
    ("setElementOrder",
     pod(C1, C2),
     {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
               "containers": [{"name": "b", "image": "b:3"}]}},
     pod({"name": "b", "image": "b:3"}, C1)),
    ("conditions by type",
     {"status": {"conditions": [{"type": "Ready", "status": "False"},
                                {"type": "Other", "status": "True"}]}},
     {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
     {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                {"type": "Other", "status": "True"}]}}),
    ("taints by key",
     {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}},
     {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}},
     {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                          {"key": "b", "effect": "NoExecute"}]}}),
    ("ownerReferences by uid",
     {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}},
     {"metadata": {"ownerReferences": [{"uid": "1", "name": "b"}, {"uid": "2", "name": "c"}]}},
     {"metadata": {"ownerReferences": [{"uid": "1", "name": "b"}, {"uid": "2", "name": "c"}]}}),
    ("volumeMounts by mountPath",
     pod({"name": "a", "volumeMounts": [{"mountPath": "/d", "name": "v"}]}),
     {"spec": {"containers": [{"name": "a", "volumeMounts": [
         {"mountPath": "/d", "readOnly": True}]}]}},
     pod({"name": "a", "volumeMounts": [{"mountPath": "/d", "name": "v", "readOnly": True}]})),
    ("addresses by type",
     {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
     {"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}},
     {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                               {"type": "Hostname", "address": "n1"}]}}),
    ("null inside a merged list item deletes",
     pod(C1), {"spec": {"containers": [{"name": "a", "ports": None}]}},
     pod({k: v for k, v in C1.items() if k != "ports"})),
    ("list on a missing field",
     {"spec": {}}, {"spec": {"containers": [{"name": "a", "x": None}]}},
     {"spec": {"containers": [{"name": "a"}]}}),
    ("kubectl label sends a plain map patch",
     {"metadata": {"name": "n"}}, {"metadata": {"labels": {"role": "db"}}},
     {"metadata": {"name": "n", "labels": {"role": "db"}}}),
]


@pytest.mark.parametrize(("name", "target", "patch", "want"), CASES, ids=[c[0] for c in CASES])
def test_strategic(name: str, target: dict[str, Any], patch: Any, want: dict[str, Any]) -> None:
    before = copy.deepcopy(target)
    assert strategic_merge_patch(target, patch) == want
    assert target == before


@pytest.mark.parametrize(("patch", "code", "fragment"), [
    ([], 400, "cannot unmarshal array"),
    ({"spec": {"containers": [{"image": "x"}]}}, 422,
     'does not contain declared merge key: name'),
    ({"spec": {"x": {"$patch": "explode"}}}, 422, "Unknown patch type: explode"),
    ({"spec": {"x": {"$retainKeys": "a"}}}, 422, "$retainKeys must be a list"),
])
def test_strategic_errors(patch: Any, code: int, fragment: str) -> None:
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(pod(C1), patch)
    assert exc.value.code == code
    assert fragment in str(exc.value)


def test_strategic_is_idempotent_for_typical_patches() -> None:
    for _name, target, patch, _want in CASES:
        if "$patch" in str(patch) or "$deleteFromPrimitiveList" in str(patch):
            continue
        once = strategic_merge_patch(target, patch)
        assert strategic_merge_patch(once, patch) == once
