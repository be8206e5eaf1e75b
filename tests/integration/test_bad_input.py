"""Bad input against the real API server (in process, TLS + bearer token).

Acceptance item: malformed JSON/YAML, unknown kind or version, schema
violations (type, enum, required, pattern), invalid names (DNS-1123), a body
over the limit, a stale resourceVersion, patching a missing object, an invalid
selector → the right ``Status`` code and a message naming the field; nothing
written.

Every case checks the HTTP code, that the body is a ``Status`` (``kind:
Status``, ``apiVersion: v1``, ``status: Failure``, ``reason``, ``code``), the
field paths in ``details.causes[].field`` where kube-apiserver names them, and
that nothing was written: the store's resourceVersion (which every committed
write bumps) is unchanged and the object is absent or unchanged. An autouse
fixture fails any test during which the server logged an error (an internal
error is a 500 with a traceback in ``racksmith.apiserver``).

One server per module (the harness's, ``tests.harness``, plus the
widgets.example.com CRD from ``tests.harness.manifests``); each test works
in its own namespace and what it made is deleted after it, so tests stay
independent and the module runs in seconds. The 410 watch case builds its
own server with a ten-event log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving
from tests.harness.manifests import WIDGET_CRD
from tests.harness.rawapi import (  # noqa: F401 (fixtures)
    BMHS,
    CM,
    CRDS,
    WIDGETS,
    Api,
    MiB,
    Obj,
    api_fixture,
    assert_absent,
    assert_status,
    client,
    cm,
    create_widget_crd,
    list_rv,
    nothing_written,
    settle,
    shared_server_fixture,
    widget,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.usefixtures("no_server_errors")]


# ---- malformed bodies ---------------------------------------------------------------------------


async def test_malformed_json(api: Api) -> None:
    with nothing_written(api.server):
        for path in (CM, WIDGETS):
            r = await api.post(path, data=b'{"apiVersion": "v1", "kind": "Conf',
                               ctype="application/json")
            assert_status(r, 400, "BadRequest", mentions=("JSON",))
            r = await api.post(path, data=b"{not json at all}", ctype="application/json")
            assert_status(r, 400, "BadRequest")
    assert (await api.ok("GET", CM))["items"] == []
    assert (await api.ok("GET", WIDGETS))["items"] == []


async def test_malformed_yaml(api: Api) -> None:
    bad = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n data: {\n"
    with nothing_written(api.server):
        r = await api.post(CM, data=bad, ctype="application/yaml")
        assert_status(r, 400, "BadRequest", mentions=("YAML",))
        r = await api.patch(f"{CM}/x", None, "application/apply-patch+yaml",
                            data=bad, params={"fieldManager": "t"})
        assert_status(r, 400, "BadRequest", mentions=("YAML",))
    assert (await api.ok("GET", CM))["items"] == []


async def test_body_not_an_object(api: Api) -> None:
    with nothing_written(api.server):
        for raw in (b"[1, 2, 3]", b'"a string"', b"42", b"null"):
            r = await api.post(CM, data=raw, ctype="application/json")
            assert_status(r, 400, "BadRequest")
        r = await api.post(CM, data=b"", ctype="application/json")
        assert_status(r, 400, "BadRequest")
    assert (await api.ok("GET", CM))["items"] == []


async def test_body_kind_or_version_mismatch(api: Api) -> None:
    with nothing_written(api.server):
        body = cm("mismatch")
        body["kind"] = "Secret"
        assert_status(await api.post(CM, body), 400, "BadRequest", mentions=("kind",))
        body = widget("mismatch")
        body["apiVersion"] = "example.com/v2"
        assert_status(await api.post(WIDGETS, body), 400, "BadRequest",
                      mentions=("example.com/v2",))
        body = widget("mismatch")
        body["kind"] = "Gadget"
        assert_status(await api.post(WIDGETS, body), 400, "BadRequest", mentions=("Gadget",))
    await assert_absent(api, f"{CM}/mismatch")
    await assert_absent(api, f"{WIDGETS}/mismatch")


# ---- unknown kind / version / namespace ---------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/apis/example.com/v2/namespaces/{ns}/widgets",       # unknown version
    "/apis/example.com/v1/namespaces/{ns}/gadgets",       # unknown resource
    "/apis/nope.example.org/v1/namespaces/{ns}/things",   # unknown group
    "/api/v2/namespaces/{ns}/configmaps",                 # unknown core version
    "/api/v1/namespaces/{ns}/widgets",                    # CR under the core group
    "/apis/metal.racksmith.io/v1/namespaces/{ns}/baremetalhosts",  # unserved version
])
async def test_unknown_resource_or_version(api: Api, path: str) -> None:
    with nothing_written(api.server):
        r = await api.post(path, widget("w1"))
        assert_status(r, 404, "NotFound")
        assert_status(await api.get(path), 404, "NotFound")
        assert_status(await api.get(f"{path}/w1"), 404, "NotFound")
        r = await api.patch(f"{path}/w1", {"spec": {}}, "application/merge-patch+json")
        assert_status(r, 404, "NotFound")
        assert_status(await api.delete(f"{path}/w1"), 404, "NotFound")
    await assert_absent(api, f"{WIDGETS}/w1")


async def test_missing_namespace(api: Api) -> None:
    with nothing_written(api.server):
        r = await api.post("/api/v1/namespaces/nope/configmaps", cm("c1"))
        st = assert_status(r, 404, "NotFound", mentions=("nope",))
        assert st["details"]["kind"] == "namespaces"
    assert_status(await api.get("/api/v1/namespaces/nope"), 404, "NotFound")
    assert (await api.ok("GET", "/api/v1/configmaps",
                         params={"fieldSelector": "metadata.name=c1"}))["items"] == []


async def test_namespace_mismatch(api: Api) -> None:
    with nothing_written(api.server):
        body = cm("c1")
        body["metadata"]["namespace"] = "kube-system"
        assert_status(await api.post(CM, body), 400, "BadRequest", mentions=("namespace",))
    assert (await api.ok("GET", CM))["items"] == []
    assert (await api.ok("GET", "/api/v1/namespaces/kube-system/configmaps"))["items"] == []


# ---- schema violations --------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "field", "cause_reason"), [
    ({"size": "big"}, "spec.size", "FieldValueTypeInvalid"),          # type
    ({"size": 0}, "spec.size", "FieldValueInvalid"),                   # minimum
    ({"size": 11}, "spec.size", "FieldValueInvalid"),                  # maximum
    ({"color": "purple"}, "spec.color", "FieldValueNotSupported"),     # enum
    ({"color": None}, "spec.color", "FieldValueRequired"),             # required
    ({"owner": "Alice1"}, "spec.owner", "FieldValueInvalid"),          # pattern
    ({"owner": 7}, "spec.owner", "FieldValueTypeInvalid"),             # type
], ids=["type", "minimum", "maximum", "enum", "required", "pattern", "type-string"])
async def test_widget_schema_violation(api: Api, spec: Obj, field: str,
                                       cause_reason: str) -> None:
    rv = await list_rv(api, WIDGETS)
    with nothing_written(api.server):
        r = await api.post(WIDGETS, widget("bad", **spec))
        st = assert_status(r, 422, "Invalid", fields=(field,), mentions=('"bad"',))
        assert st["details"]["name"] == "bad"
        assert st["details"]["kind"] == "Widget"
        assert st["details"]["group"] == "example.com"
        assert [c["reason"] for c in st["details"]["causes"] if c["field"] == field] == [
            cause_reason], st
        # dry run and fieldValidation=Strict reject it the same way
        r = await api.post(WIDGETS, widget("bad", **spec), params={"dryRun": "All"})
        assert_status(r, 422, "Invalid", fields=(field,))
    await assert_absent(api, f"{WIDGETS}/bad")
    assert await list_rv(api, WIDGETS) == rv


async def test_widget_several_violations_named(api: Api) -> None:
    with nothing_written(api.server):
        r = await api.post(WIDGETS, widget("bad", color="purple", size=99, owner="X"))
        assert_status(r, 422, "Invalid", fields=("spec.color", "spec.size", "spec.owner"))
    await assert_absent(api, f"{WIDGETS}/bad")


async def test_schema_violation_on_update_and_patch(api: Api) -> None:
    good = await api.ok("POST", WIDGETS, widget("w1"))
    path = f"{WIDGETS}/w1"
    with nothing_written(api.server):
        body = dict(good, spec=dict(good["spec"], color="purple"))
        assert_status(await api.put(path, body), 422, "Invalid", fields=("spec.color",))
        r = await api.patch(path, {"spec": {"size": 0}}, "application/merge-patch+json")
        assert_status(r, 422, "Invalid", fields=("spec.size",))
        r = await api.patch(path, [{"op": "replace", "path": "/spec/owner", "value": "A!"}],
                            "application/json-patch+json")
        assert_status(r, 422, "Invalid", fields=("spec.owner",))
        r = await api.patch(path, [{"op": "remove", "path": "/spec/color"}],
                            "application/json-patch+json")
        assert_status(r, 422, "Invalid", fields=("spec.color",))
        apply = {"apiVersion": "example.com/v1", "kind": "Widget",
                 "metadata": {"name": "w1"},
                 "spec": {"color": "red", "size": "huge"}}
        r = await api.patch(path, apply, "application/apply-patch+yaml",
                            params={"fieldManager": "t", "force": "true"})
        assert_status(r, 422, "Invalid", fields=("spec.size",))
    assert await api.ok("GET", path) == good


async def test_racksmith_kind_missing_required_bmc_fields(api: Api) -> None:
    bmh = {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
           "metadata": {"name": "node-1"},
           "spec": {"bmc": {}, "online": True}}
    with nothing_written(api.server):
        r = await api.post(BMHS, bmh)
        st = assert_status(r, 422, "Invalid",
                           fields=("spec.bmc.address", "spec.bmc.credentialsName"))
        assert {c["reason"] for c in st["details"]["causes"]} == {"FieldValueRequired"}
        assert st["details"]["kind"] == "BareMetalHost"
        bmh["spec"] = {"bmc": {"address": "ipmi://10.0.0.1", "credentialsName": "c"},
                       "bootMode": "BIOS", "online": "yes"}
        r = await api.post(BMHS, bmh)
        assert_status(r, 422, "Invalid", fields=("spec.bootMode", "spec.online"))
    await assert_absent(api, f"{BMHS}/node-1")
    # the same object, fixed, is accepted (the schema is not simply rejecting everything)
    bmh["spec"] = {"bmc": {"address": "ipmi://10.0.0.1", "credentialsName": "c"}}
    created = await api.ok("POST", BMHS, bmh)
    assert created["spec"]["bootMode"] == "UEFI"  # defaulted


async def test_cluster_update_policy_rejected_with_field_paths(api: Api) -> None:
    """The maintenance policy's rules: a zero drain timeout, a zero rack limit and an unknown
    drain-timeout action are refused, each named, and nothing is written."""
    path = "/apis/cluster.racksmith.io/v1alpha1/namespaces/default/clusters"
    cluster = {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Cluster",
               "metadata": {"name": "demo"},
               "spec": {"release": "r1", "update": {
                   "drainTimeoutSeconds": 0, "onDrainTimeout": "Ignore",
                   "maxUnavailable": {"metal.racksmith.io/rack": 0}}}}
    with nothing_written(api.server):
        r = await api.post(path, cluster)
        st = assert_status(r, 422, "Invalid")
        fields = " ".join(c.get("field", "") for c in st["details"]["causes"])
        for name in ("spec.update.drainTimeoutSeconds", "spec.update.onDrainTimeout",
                     "spec.update.maxUnavailable"):
            assert name in fields, st
    await assert_absent(api, f"{path}/demo")
    cluster["spec"]["update"] = {"maxUnavailable": {"metal.racksmith.io/rack": 1}}
    created = await api.ok("POST", path, cluster)
    assert created["spec"]["update"]["drainTimeoutSeconds"] == 600  # defaulted


async def test_field_validation_strict_unknown_field(api: Api) -> None:
    body = widget("w1")
    body["spec"]["bogus"] = 1
    with nothing_written(api.server):
        r = await api.post(WIDGETS, body, params={"fieldValidation": "Strict"})
        assert_status(r, 400, "BadRequest", mentions=("spec.bogus", "strict decoding error"))
        r = await api.post(WIDGETS, body, params={"fieldValidation": "Sloppy"})
        assert_status(r, 400, "BadRequest", mentions=("Sloppy",))
    await assert_absent(api, f"{WIDGETS}/w1")


async def test_field_validation_warn_unknown_field(api: Api) -> None:
    body = widget("w1")
    body["spec"]["bogus"] = 1
    r = await api.post(WIDGETS, body, params={"fieldValidation": "Warn"})
    assert r.status == 201, r
    warnings = r.headers.getall("Warning", [])
    assert any("spec.bogus" in w and w.startswith("299 ") for w in warnings), warnings
    assert "bogus" not in r.body["spec"]  # pruned
    got = await api.ok("GET", f"{WIDGETS}/w1")
    assert "bogus" not in got["spec"]
    # the default is Warn too; Ignore drops it silently
    body["metadata"]["name"] = "w2"
    r = await api.post(WIDGETS, body)
    assert r.status == 201, r
    assert any("spec.bogus" in w for w in r.headers.getall("Warning", []))
    body["metadata"]["name"] = "w3"
    r = await api.post(WIDGETS, body, params={"fieldValidation": "Ignore"})
    assert r.status == 201, r
    assert r.headers.getall("Warning", []) == []


def _parse_warning(value: str) -> str:
    """The text of an RFC 7234 warning-value ``299 - "<quoted-string>"``, as client-go's
    ``ParseWarningHeader`` reads it: a quote inside the text must be escaped."""
    code, agent, rest = value.split(" ", 2)
    assert code == "299" and agent == "-", value
    assert rest.startswith('"'), value
    out: list[str] = []
    i = 1
    while i < len(rest):
        ch = rest[i]
        if ch == "\\":
            out.append(rest[i + 1])
            i += 2
            continue
        if ch == '"':
            assert rest[i + 1:].strip() == "", f"unescaped quote ends the text early: {value}"
            return "".join(out)
        out.append(ch)
        i += 1
    raise AssertionError(f"unterminated quoted-string: {value}")


async def test_warning_header_is_a_valid_quoted_string(api: Api) -> None:
    body = widget("w1")
    body["spec"]["bogus"] = 1
    r = await api.post(WIDGETS, body, params={"fieldValidation": "Warn"})
    assert r.status == 201, r
    texts = [_parse_warning(w) for w in r.headers.getall("Warning", [])]
    assert 'unknown field "spec.bogus"' in texts, texts


async def test_field_validation_strict_builtin_kind(api: Api) -> None:
    body = cm("c1", k="v")
    body["bogus"] = 1
    with nothing_written(api.server):
        r = await api.post(CM, body, params={"fieldValidation": "Strict"})
        assert_status(r, 400, "BadRequest", mentions=("bogus", "strict decoding error"))
    await assert_absent(api, f"{CM}/c1")


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_deeply_nested_body_is_a_client_error(api: Api) -> None:
    cases: list[tuple[bytes, str]] = [
        (json.dumps(cm("deep", k="v") | {"extra": _nested(d)}).encode(), "application/json")
        for d in (300, 900)]
    cases.append((b"metadata: {name: deep}\ndata: " + b"[" * 5000 + b"]" * 5000,
                  "application/yaml"))
    for raw, ctype in cases:
        with nothing_written(api.server):
            r = await api.post(CM, data=raw, ctype=ctype)
            assert r.status in (400, 413, 422), r
            assert_status(r, r.status, r.body["reason"])
        await assert_absent(api, f"{CM}/deep")


# ---- invalid names and metadata -----------------------------------------------------------------


@pytest.mark.parametrize(("path", "name"), [
    (CM, "Bad_Name"),
    (CM, "-leading-dash"),
    (CM, "trailing."),
    (CM, "a" * 254),
    (CM, "has space"),
    (WIDGETS, "UPPER"),
    (WIDGETS, "under_score"),
    ("/api/v1/namespaces", "dotted.name"),   # namespaces are DNS-1123 labels
    ("/api/v1/namespaces", "a" * 64),
])
async def test_invalid_name(api: Api, path: str, name: str) -> None:
    if path == CM:
        body = cm(name)
    elif path == WIDGETS:
        body = widget(name)
    else:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    rv = await list_rv(api, path)
    with nothing_written(api.server):
        st = assert_status(await api.post(path, body), 422, "Invalid",
                           fields=("metadata.name",))
        assert st["details"]["name"] == name
    listed = (await api.ok("GET", path))["items"]
    assert name not in [o["metadata"]["name"] for o in listed]
    assert await list_rv(api, path) == rv


async def test_missing_name_and_bad_metadata(api: Api) -> None:
    with nothing_written(api.server):
        body = cm("x")
        del body["metadata"]["name"]
        assert_status(await api.post(CM, body), 422, "Invalid", fields=("metadata.name",))
        body = cm("x")
        body["metadata"]["labels"] = {"bad key!": "v"}
        assert_status(await api.post(CM, body), 422, "Invalid", fields=("metadata.labels",))
        body = cm("x")
        body["metadata"]["labels"] = {"ok": "bad value!"}
        assert_status(await api.post(CM, body), 422, "Invalid", fields=("metadata.labels",))
        body = cm("x")
        body["metadata"]["finalizers"] = ["not a/valid/finalizer"]
        assert_status(await api.post(CM, body), 422, "Invalid",
                      fields=("metadata.finalizers[0]",))
    await assert_absent(api, f"{CM}/x")


async def test_name_mismatch_on_put(api: Api) -> None:
    created = await api.ok("POST", CM, cm("c1", k="v"))
    with nothing_written(api.server):
        body = dict(created, metadata=dict(created["metadata"], name="c2"))
        assert_status(await api.put(f"{CM}/c1", body), 400, "BadRequest", mentions=("c2",))
    await assert_absent(api, f"{CM}/c2")
    assert await api.ok("GET", f"{CM}/c1") == created


# ---- body size ----------------------------------------------------------------------------------


async def test_body_over_limit(api: Api) -> None:
    big = cm("big", blob="x" * (3 * MiB + 16))
    created = await api.ok("POST", CM, cm("small", k="v"))
    with nothing_written(api.server):
        r = await api.post(CM, big)
        assert_status(r, 413, "RequestEntityTooLarge")

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            raw = json.dumps(big).encode()
            for i in range(0, len(raw), 256 * 1024):
                yield raw[i:i + 256 * 1024]

        r = await api.post(CM, data=chunks(), ctype="application/json")
        assert_status(r, 413, "RequestEntityTooLarge")
        r = await api.patch(f"{CM}/small", {"data": {"blob": "y" * (3 * MiB + 16)}},
                            "application/merge-patch+json")
        assert_status(r, 413, "RequestEntityTooLarge")
        r = await api.put(f"{CM}/small", dict(created, data={"blob": "z" * (3 * MiB + 16)}))
        assert_status(r, 413, "RequestEntityTooLarge")
    await assert_absent(api, f"{CM}/big")
    assert await api.ok("GET", f"{CM}/small") == created


# ---- conflicts ----------------------------------------------------------------------------------


async def test_stale_resource_version(api: Api) -> None:
    v1 = await api.ok("POST", CM, cm("c1", k="v1"))
    v2 = await api.ok("PUT", f"{CM}/c1", dict(v1, data={"k": "v2"}))
    assert int(v2["metadata"]["resourceVersion"]) > int(v1["metadata"]["resourceVersion"])
    with nothing_written(api.server):
        r = await api.put(f"{CM}/c1", dict(v1, data={"k": "stale"}))
        st = assert_status(r, 409, "Conflict", mentions=("c1",))
        assert st["details"]["name"] == "c1"
        assert st["details"]["kind"] == "configmaps"
        r = await api.patch(f"{CM}/c1", {"metadata": {"resourceVersion":
                                                      v1["metadata"]["resourceVersion"]},
                                         "data": {"k": "stale"}},
                            "application/merge-patch+json")
        assert_status(r, 409, "Conflict")
        r = await api.delete(f"{CM}/c1", body={
            "preconditions": {"resourceVersion": v1["metadata"]["resourceVersion"]}})
        assert_status(r, 409, "Conflict")
    assert await api.ok("GET", f"{CM}/c1") == v2


async def test_stale_resource_version_custom_resource(api: Api) -> None:
    v1 = await api.ok("POST", WIDGETS, widget("w1"))
    v2 = await api.ok("PUT", f"{WIDGETS}/w1", dict(v1, spec=dict(v1["spec"], size=5)))
    with nothing_written(api.server):
        r = await api.put(f"{WIDGETS}/w1", dict(v1, spec=dict(v1["spec"], size=7)))
        assert_status(r, 409, "Conflict")
    assert await api.ok("GET", f"{WIDGETS}/w1") == v2


async def test_already_exists(api: Api) -> None:
    first = await api.ok("POST", CM, cm("c1", k="first"))
    w = await api.ok("POST", WIDGETS, widget("w1"))
    with nothing_written(api.server):
        st = assert_status(await api.post(CM, cm("c1", k="second")), 409, "AlreadyExists",
                           mentions=("c1",))
        assert st["details"]["name"] == "c1"
        r = await api.post(WIDGETS, widget("w1", color="blue"))
        st = assert_status(r, 409, "AlreadyExists", mentions=("w1",))
        assert st["details"]["group"] == "example.com"
        r = await api.post(CM, cm("c1", k="dry"), params={"dryRun": "All"})
        assert_status(r, 409, "AlreadyExists")
    assert await api.ok("GET", f"{CM}/c1") == first
    assert await api.ok("GET", f"{WIDGETS}/w1") == w


# ---- missing objects ----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "ctype", "patch"), [
    (f"{CM}/ghost", "application/merge-patch+json", {"data": {"k": "v"}}),
    (f"{CM}/ghost", "application/json-patch+json",
     [{"op": "add", "path": "/data", "value": {"k": "v"}}]),
    (f"{CM}/ghost", "application/strategic-merge-patch+json", {"data": {"k": "v"}}),
    (f"{WIDGETS}/ghost", "application/merge-patch+json", {"spec": {"size": 4}}),
    (f"{WIDGETS}/ghost", "application/json-patch+json",
     [{"op": "replace", "path": "/spec/size", "value": 4}]),
    (f"{WIDGETS}/ghost/status", "application/merge-patch+json", {"status": {"phase": "x"}}),
], ids=["cm-merge", "cm-json", "cm-strategic", "cr-merge", "cr-json", "cr-status"])
async def test_patch_missing_object(api: Api, path: str, ctype: str, patch: Any) -> None:
    with nothing_written(api.server):
        st = assert_status(await api.patch(path, patch, ctype), 404, "NotFound",
                           mentions=('"ghost" not found',))
        assert st["details"]["name"] == "ghost"
    await assert_absent(api, path.removesuffix("/status"))


async def test_put_and_delete_missing_object(api: Api) -> None:
    with nothing_written(api.server):
        assert_status(await api.put(f"{CM}/ghost", cm("ghost")), 404, "NotFound")
        assert_status(await api.put(f"{WIDGETS}/ghost", widget("ghost")), 404, "NotFound")
        st = assert_status(await api.delete(f"{CM}/ghost"), 404, "NotFound",
                           mentions=('configmaps "ghost" not found',))
        assert st["details"] == {"name": "ghost", "kind": "configmaps"}
        st = assert_status(await api.delete(f"{WIDGETS}/ghost"), 404, "NotFound",
                           mentions=('widgets.example.com "ghost" not found',))
        assert st["details"]["group"] == "example.com"
        assert_status(await api.delete(f"{CM}/ghost", params={"dryRun": "All"}), 404,
                      "NotFound")
    await assert_absent(api, f"{CM}/ghost")


# ---- patches the server must refuse -------------------------------------------------------------


async def test_json_patch_test_failure(api: Api) -> None:
    created = await api.ok("POST", CM, cm("c1", k="v"))
    w = await api.ok("POST", WIDGETS, widget("w1"))
    with nothing_written(api.server):
        r = await api.patch(f"{CM}/c1", [
            {"op": "test", "path": "/data/k", "value": "not-v"},
            {"op": "replace", "path": "/data/k", "value": "changed"}],
            "application/json-patch+json")
        assert_status(r, 422, "Invalid")
        # kopf's finalizer pattern: a test on a stale resourceVersion
        r = await api.patch(f"{WIDGETS}/w1", [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]}],
            "application/json-patch+json")
        assert_status(r, 422, "Invalid")
    assert await api.ok("GET", f"{CM}/c1") == created
    assert await api.ok("GET", f"{WIDGETS}/w1") == w


async def test_malformed_patches(api: Api) -> None:
    created = await api.ok("POST", CM, cm("c1", k="v"))
    path = f"{CM}/c1"
    with nothing_written(api.server):
        # a dict as a JSON patch, an op without a path, an unknown op
        r = await api.patch(path, {"data": {"k": "x"}}, "application/json-patch+json")
        assert_status(r, 400, "BadRequest")
        r = await api.patch(path, [{"op": "replace", "value": 1}], "application/json-patch+json")
        assert r.status in (400, 422), r
        assert_status(r, r.status, "BadRequest" if r.status == 400 else "Invalid")
        r = await api.patch(path, [{"op": "frobnicate", "path": "/data/k"}],
                            "application/json-patch+json")
        assert r.status in (400, 422), r
        # a list as a merge patch (the Python clients send these): 400, never 500
        r = await api.patch(path, [{"op": "replace", "path": "/data/k", "value": "x"}],
                            "application/merge-patch+json")
        assert_status(r, 400, "BadRequest")
        r = await api.patch(path, None, "application/merge-patch+json", data=b"{oops")
        assert_status(r, 400, "BadRequest")
        # apply without apiVersion/kind
        r = await api.patch(path, {"metadata": {"name": "c1"}, "data": {"k": "x"}},
                            "application/apply-patch+yaml", params={"fieldManager": "t"})
        assert_status(r, 400, "BadRequest")
    assert await api.ok("GET", path) == created


async def test_apply_requires_field_manager(api: Api) -> None:
    created = await api.ok("POST", CM, cm("c1", k="v"))
    with nothing_written(api.server):
        r = await api.patch(f"{CM}/c1", cm("c1", k="x"), "application/apply-patch+yaml",
                            params={"force": "true"})
        assert_status(r, 400, "BadRequest", mentions=("fieldManager",))
    assert await api.ok("GET", f"{CM}/c1") == created


async def test_unsupported_media_types(api: Api) -> None:
    w = await api.ok("POST", WIDGETS, widget("w1"))
    c = await api.ok("POST", CM, cm("c1", k="v"))
    with nothing_written(api.server):
        # strategic merge patch: built-in kinds only, as in kube-apiserver
        r = await api.patch(f"{WIDGETS}/w1", {"spec": {"size": 4}},
                            "application/strategic-merge-patch+json")
        assert_status(r, 415, "UnsupportedMediaType")
        for ctype in ("text/plain", "application/xml", "application/x-www-form-urlencoded"):
            r = await api.post(CM, cm("c2"), ctype=ctype)
            assert_status(r, 415, "UnsupportedMediaType")
        for ctype in ("text/plain", "application/json", "application/apply-patch+json"):
            r = await api.patch(f"{CM}/c1", {"data": {"k": "x"}}, ctype)
            assert_status(r, 415, "UnsupportedMediaType")
        r = await api.put(f"{CM}/c1", c, ctype="text/plain")
        assert_status(r, 415, "UnsupportedMediaType")
    await assert_absent(api, f"{CM}/c2")
    assert await api.ok("GET", f"{WIDGETS}/w1") == w
    assert await api.ok("GET", f"{CM}/c1") == c


# ---- selectors and query parameters -------------------------------------------------------------


@pytest.mark.parametrize("params", [
    {"labelSelector": "app in (a,"},
    {"labelSelector": "!!"},
    {"labelSelector": "a==b==c"},
    {"labelSelector": "bad key=v"},
    {"fieldSelector": "spec.bogus=1"},
    {"fieldSelector": "metadata.name"},
    {"fieldSelector": "metadata.name~x"},
    {"limit": "ten"},
    {"watch": "maybe"},
    {"watch": "true", "resourceVersion": "abc"},
    {"watch": "true", "labelSelector": "app in (a,"},
    {"watch": "true", "timeoutSeconds": "soon"},
], ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()))
async def test_invalid_list_parameters(api: Api, params: dict[str, str]) -> None:
    with nothing_written(api.server):
        r = await api.get(CM, params=params)
        assert_status(r, 400, "BadRequest")


async def test_invalid_selector_on_custom_resource(api: Api) -> None:
    await api.ok("POST", WIDGETS, widget("w1", color="green"))
    # a declared selectableField works; an undeclared one is refused and named
    got = await api.ok("GET", WIDGETS, params={"fieldSelector": "spec.color=green"})
    assert [o["metadata"]["name"] for o in got["items"]] == ["w1"]
    r = await api.get(WIDGETS, params={"fieldSelector": "spec.size=3"})
    assert_status(r, 400, "BadRequest", mentions=("spec.size",))


async def test_invalid_selector_on_delete_collection(api: Api) -> None:
    await api.ok("POST", CM, cm("c1"))
    await api.ok("POST", CM, cm("c2"))
    with nothing_written(api.server):
        r = await api.delete(CM, params={"labelSelector": "app in (a,"})
        assert_status(r, 400, "BadRequest")
        r = await api.delete(CM, params={"fieldSelector": "data.k=v"})
        assert_status(r, 400, "BadRequest")
    names = [o["metadata"]["name"] for o in (await api.ok("GET", CM))["items"]]
    assert names == ["c1", "c2"]


async def test_invalid_write_parameters(api: Api) -> None:
    with nothing_written(api.server):
        r = await api.post(CM, cm("c1"), params={"dryRun": "Some"})
        assert_status(r, 400, "BadRequest", mentions=("Some",))
        r = await api.post(CM, cm("c1"), params={"fieldValidation": "strict"})
        assert_status(r, 400, "BadRequest")
        r = await api.delete(f"{CM}/c1", body={"propagationPolicy": "Sometimes"})
        assert r.status in (404, 422), r   # missing object or invalid option: either
        r = await api.call("PUT", CM, body=cm("c1"))
        assert_status(r, 405, "MethodNotAllowed")
    await assert_absent(api, f"{CM}/c1")


async def test_invalid_delete_options(api: Api) -> None:
    created = await api.ok("POST", CM, cm("c1"))
    with nothing_written(api.server):
        r = await api.delete(f"{CM}/c1", body={"propagationPolicy": "Sometimes"})
        assert_status(r, 422, "Invalid", fields=("propagationPolicy",))
        r = await api.delete(f"{CM}/c1", data=b"{nope", ctype="application/json")
        assert_status(r, 400, "BadRequest")
        r = await api.delete(f"{CM}/c1", body={"preconditions": {"uid": "not-the-uid"}})
        assert_status(r, 409, "Conflict")
    assert await api.ok("GET", f"{CM}/c1") == created


# ---- dry run ------------------------------------------------------------------------------------


async def test_dry_run_writes_nothing(api: Api) -> None:
    rv = await list_rv(api, WIDGETS)
    with nothing_written(api.server):
        r = await api.post(WIDGETS, widget("w1"), params={"dryRun": "All"})
        assert r.status == 201, r
        assert r.body["metadata"]["name"] == "w1"
        assert r.body["spec"]["size"] == 3
        r = await api.post(CM, cm("c1", k="v"), params={"dryRun": "All"})
        assert r.status == 201, r
    await assert_absent(api, f"{WIDGETS}/w1")
    await assert_absent(api, f"{CM}/c1")
    assert await list_rv(api, WIDGETS) == rv
    # on an existing object: update, patch, delete
    created = await api.ok("POST", CM, cm("c1", k="v"))
    with nothing_written(api.server):
        r = await api.put(f"{CM}/c1", dict(created, data={"k": "dry"}),
                          params={"dryRun": "All"})
        assert r.status == 200 and r.body["data"] == {"k": "dry"}, r
        r = await api.patch(f"{CM}/c1", {"data": {"k": "dry"}}, "application/merge-patch+json",
                            params={"dryRun": "All"})
        assert r.status == 200 and r.body["data"] == {"k": "dry"}, r
        r = await api.delete(f"{CM}/c1", params={"dryRun": "All"})
        assert r.status == 200, r
        r = await api.delete(CM, params={"dryRun": "All"})
        assert r.status == 200, r
    assert await api.ok("GET", f"{CM}/c1") == created


# ---- authentication -----------------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["none", "wrong", "empty", "basic"])
async def test_unauthorized(api: Api, auth: str) -> None:
    kw: dict[str, Any]
    if auth == "none":
        kw = {"token": None}
    elif auth == "wrong":
        kw = {"token": "not-the-token"}
    elif auth == "empty":
        kw = {"token": ""}
    else:
        kw = {"token": None, "headers": {"Authorization": "Basic YWRtaW46YWRtaW4="}}
    with nothing_written(api.server):
        assert_status(await api.post(CM, cm("c1"), **kw), 401, "Unauthorized")
        assert_status(await api.get(CM, **kw), 401, "Unauthorized")
        assert_status(await api.get("/api", **kw), 401, "Unauthorized")
        assert_status(await api.delete(f"{CRDS}/widgets.example.com", **kw), 401,
                      "Unauthorized")
        assert_status(await api.patch(f"{CM}/c1", {"data": {}}, "application/merge-patch+json",
                                      **kw), 401, "Unauthorized")
    await assert_absent(api, f"{CM}/c1")
    assert (await api.get(f"{CRDS}/widgets.example.com")).status == 200


# ---- invalid CRDs -------------------------------------------------------------------------------


def _gadget_crd(**changes: Any) -> Obj:
    crd = yaml.safe_load(WIDGET_CRD.replace("widget", "gadget").replace("Widget", "Gadget"))
    for path, value in changes.items():
        node = crd
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[keys[-1]] = value
    return crd  # type: ignore[no-any-return]


@pytest.mark.parametrize(("crd", "field"), [
    (_gadget_crd(metadata__name="gadgets.other.com"), "metadata.name"),
    (_gadget_crd(metadata__name="gizmos.example.com"), "metadata.name"),
    (_gadget_crd(spec__group="nodots"), "spec.group"),
    (_gadget_crd(spec__names__plural="Gadgets"), "spec.names.plural"),
    (_gadget_crd(spec__versions__0__schema={"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"properties": {"x": {"type": "string"}}}}}}),
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"),
    (_gadget_crd(spec__versions__0__schema={"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "x": {"type": "string", "default": 5}}}}}}),
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].default"),
    (_gadget_crd(spec__versions__0__storage=False), "spec.versions"),
], ids=["name-other-group", "name-other-plural", "group-no-dot", "plural-upper",
        "non-structural", "bad-default", "no-storage-version"])
async def test_invalid_crd(api: Api, crd: Obj, field: str) -> None:
    with nothing_written(api.server):
        st = assert_status(await api.post(CRDS, crd), 422, "Invalid")
        got = [c["field"] for c in st["details"]["causes"]]
        assert any(f == field or f.startswith(field) for f in got), (field, st)
        assert st["details"]["kind"] == "CustomResourceDefinition"
    names = [o["metadata"]["name"] for o in (await api.ok("GET", CRDS))["items"]]
    assert crd["metadata"]["name"] not in names
    assert "widgets.example.com" in names
    r = await api.get("/apis/example.com/v1/namespaces/{ns}/gadgets")
    assert_status(r, 404, "NotFound")


# ---- watch from a compacted resourceVersion -----------------------------------------------------


@pytest_asyncio.fixture(loop_scope="module")
async def small_log_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with serving(tmp_path / "small", with_crds=False, event_log_size=10) as server:
        yield server


async def _watch_events(api: Api, params: dict[str, str], until: Any,
                        limit: int = 50) -> list[Obj]:
    """Read watch events until ``until(event)`` is true or the stream ends."""
    hdrs = {"Authorization": f"Bearer {api.token}"}
    events: list[Obj] = []
    async with api.session.get(api.url + api.path(CM), params={"watch": "true", **params},
                               headers=hdrs, timeout=aiohttp.ClientTimeout(total=20)) as r:
        assert r.status == 200, await r.read()
        while len(events) < limit:
            line = await r.content.readline()
            if not line:
                break
            events.append(json.loads(line))
            if until(events[-1]):
                break
    return events


async def test_watch_from_compacted_resource_version(small_log_server: ApiServer) -> None:
    async with client(small_log_server) as api:
        first = await api.ok("POST", CM, cm("c0"))
        old_rv = first["metadata"]["resourceVersion"]
        for i in range(1, 30):
            await api.ok("POST", CM, cm(f"c{i}"))
        assert small_log_server.store.oldest_rv() > int(old_rv)
        with nothing_written(small_log_server):
            events = await _watch_events(api, {"resourceVersion": old_rv,
                                               "timeoutSeconds": "10"}, lambda e: True)
        assert len(events) == 1, events
        assert events[0]["type"] == "ERROR", events
        st = events[0]["object"]
        assert st["kind"] == "Status" and st["apiVersion"] == "v1", st
        assert st["status"] == "Failure" and st["code"] == 410, st
        assert st["reason"] == "Expired", st
        assert old_rv in st["message"], st

        # contrast: a watch from a recent resourceVersion streams what follows
        rv = await list_rv(api, CM)
        watch = asyncio.create_task(_watch_events(
            api, {"resourceVersion": rv, "timeoutSeconds": "10"},
            lambda e: e["object"]["metadata"].get("name") == "after"))
        await asyncio.sleep(0.2)
        await api.ok("POST", CM, cm("after"))
        events = await asyncio.wait_for(watch, 20)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "after")]
        assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)
