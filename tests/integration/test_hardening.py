"""The API server under attack: client input never causes a 5xx, work per
request is bounded, and Kubernetes' rules for Secrets, metadata, watches
and credentials hold.

One case per class of the hardening issue, each against the real server
(in process, TLS + bearer token) with exact codes and messages; then a
property test (hypothesis) that throws generated requests -- every verb on
a core kind, a custom kind and the subresources, malformed envelopes,
query parameters, encodings and paths -- at ``racksmith apiserver`` as its
own process and asserts that no answer is a 5xx and that the server still
answers ``/readyz``. An autouse fixture fails any in-process test during
which the server logged an error.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import http.client
import json
import logging
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racksmith import console
from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving
from tests.harness.process import ServerProc
from tests.harness.rawapi import (  # noqa: F401 (fixtures)
    CM,
    SECRETS,
    WIDGETS,
    Api,
    MiB,
    Obj,
    api_fixture,
    assert_status,
    client,
    cm,
    create_widget_crd,
    nothing_written,
    settle,
    shared_server_fixture,
    widget,
)
from tests.harness.wait import eventually

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_server_errors")]
SERVER_ERRORS_EXPECTED = ("request id",)
"""What these tests make the server log on purpose (``no_server_errors``)."""
MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")
SECRET_VALUE = "hunter2-do-not-echo-0x5eC12e7"


# ---- fixtures -----------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_api_server(tmp_path_factory: pytest.TempPathFactory
                            ) -> AsyncIterator[ApiServer]:
    """The module's server, with the web console's routes (its public paths)."""
    async with serving(tmp_path_factory.mktemp("hardening") / "data",
                       extra_routes=console.routes(), public=console.is_public) as server:
        yield server


def secret(name: str, **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": dict(data)}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ---- client input that used to cause a 500 ------------------------------------------------------


@MODULE_LOOP
async def test_limit_larger_than_64_bits_is_a_400(api: Api) -> None:
    for value in (str(2**64), "9" * 40, "-" + "9" * 30, "1e3", "0x10", "١٢"):
        r = await api.get(CM, params={"limit": value})
        assert_status(r, 400, "BadRequest", mentions=("limit",))
    r = await api.get(CM, params={"timeoutSeconds": str(2**70), "watch": "true"})
    assert_status(r, 400, "BadRequest", mentions=("timeoutSeconds",))
    assert (await api.get(CM, params={"limit": str(2**63 - 1)})).status == 200


@MODULE_LOOP
@pytest.mark.parametrize("path,body", [
    (CM, cm("x")),
    (SECRETS, secret("x")),
    (WIDGETS, widget("x")),
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}),
    ("/apis/metal3.io/v1alpha1/namespaces/{ns}/baremetalhosts",
     {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": {},
      "spec": {}}),
])
@pytest.mark.parametrize("value", [5, ["a"], {"a": 1}, True])
async def test_metadata_fields_of_the_wrong_type_are_a_400_on_every_kind(
        api: Api, path: str, body: Obj, value: Any) -> None:
    with nothing_written(api.server):
        for name in ("generateName", "name", "namespace", "uid", "resourceVersion"):
            sent = json.loads(json.dumps(body))
            sent["metadata"] = {"name": "x", name: value} if name != "name" else {name: value}
            r = await api.post(path, sent)
            st_ = assert_status(r, 400, "BadRequest", mentions=(f"metadata.{name}",))
            assert "cannot unmarshal" in st_["message"]


@MODULE_LOOP
async def test_a_non_string_generate_name_is_a_400_on_every_kind_served(api: Api) -> None:
    """Every resource the server serves (built-in and custom, every version)."""
    infos = api.server.registry.all()
    assert len(infos) > 30
    with nothing_written(api.server):
        for info in infos:
            base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
            path = f"{base}/namespaces/{{ns}}/{info.plural}" if info.namespaced else \
                f"{base}/{info.plural}"
            r = await api.post(path, {"apiVersion": info.api_version, "kind": info.kind,
                                      "metadata": {"generateName": 5}})
            assert_status(r, 400, "BadRequest", mentions=("metadata.generateName",))


@MODULE_LOOP
async def test_yaml_number_keys_become_strings(api: Api) -> None:
    doc = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: numkeys\ndata:\n  1: one\n" \
          b"  true: yes-text\n  2020-01-01: a-date-key\n  when: 2020-01-01\n"
    r = await api.post(CM, data=doc, ctype="application/yaml")
    assert r.status == 201, r
    assert r.body["data"] == {"1": "one", "true": "yes-text", "2020-01-01": "a-date-key",
                              "when": "2020-01-01"}
    with nothing_written(api.server):
        r = await api.post(CM, data=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n"
                                    b"data:\n  ? [a, b]\n  : v\n", ctype="application/yaml")
        assert_status(r, 400, "BadRequest", mentions=("map key",))
        r = await api.post(CM, data=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
                                    b"data: {k: !!binary aGVsbG8=}\n", ctype="application/yaml")
        assert_status(r, 400, "BadRequest", mentions=("binary",))
        r = await api.post(CM, data=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: i}\n"
                                    b"data: {k: v}\nspec: {n: 123456789012345678901234567890}\n",
                           ctype="application/yaml")
        assert_status(r, 400, "BadRequest", mentions=("64 bits",))


@MODULE_LOOP
async def test_content_encoding_that_does_not_match_the_body_is_a_400(api: Api) -> None:
    with nothing_written(api.server):
        r = await api.post(CM, data=json.dumps(cm("gz")).encode(), ctype="application/json",
                           headers={"Content-Encoding": "gzip"})
        assert_status(r, 400, "BadRequest", mentions=("Content-Encoding",))
        r = await api.post(CM, data=gzip.compress(b"x" * 100)[:20], ctype="application/json",
                           headers={"Content-Encoding": "gzip"})
        assert r.status == 400, r
        r = await api.post(CM, data=b"\x00\x01\x02", ctype="application/json",
                           headers={"Content-Encoding": "deflate"})
        assert r.status == 400, r
    r = await api.post(CM, data=gzip.compress(json.dumps(cm("gz")).encode()),
                       ctype="application/json", headers={"Content-Encoding": "gzip"})
    assert r.status == 201, r


@MODULE_LOOP
async def test_delete_options_of_the_wrong_shape_are_a_400(api: Api) -> None:
    created = await api.ok("POST", CM, cm("d1"))
    with nothing_written(api.server):
        for options in ({"preconditions": "uid"}, {"preconditions": ["x"]},
                        {"preconditions": {"uid": 5}}, {"propagationPolicy": ["Orphan"]},
                        {"orphanDependents": "yes"}, {"gracePeriodSeconds": "10"},
                        {"dryRun": "All"}, {"dryRun": [5]}):
            r = await api.delete(f"{CM}/d1", body=options)
            assert_status(r, 400, "BadRequest")
        r = await api.delete(f"{CM}/d1", body=["not", "an", "object"])
        assert_status(r, 400, "BadRequest")
        r = await api.delete(f"{CM}/d1", params={"gracePeriodSeconds": "x"})
        assert_status(r, 400, "BadRequest")
    assert await api.ok("GET", f"{CM}/d1") == created


@MODULE_LOOP
async def test_eviction_delete_options_are_checked_too(api: Api) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    await api.ok("POST", "/api/v1/namespaces/{ns}/pods", pod)
    with nothing_written(api.server):
        r = await api.post("/api/v1/namespaces/{ns}/pods/p1/eviction",
                           {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": "p1"},
                            "deleteOptions": {"preconditions": "x"}})
        assert_status(r, 400, "BadRequest")


@MODULE_LOOP
async def test_namespace_finalize_with_a_list_spec_is_a_400(api: Api) -> None:
    path = "/api/v1/namespaces/{ns}/finalize"
    before = await api.ok("GET", "/api/v1/namespaces/{ns}")
    with nothing_written(api.server):
        for body in ({"spec": ["kubernetes"]}, {"spec": {"finalizers": "kubernetes"}},
                     {"spec": {"finalizers": [1]}}, ["spec"]):
            r = await api.put(path, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": api.ns}, **body}
                              if isinstance(body, dict) else body)
            assert_status(r, 400, "BadRequest")
    assert await api.ok("GET", "/api/v1/namespaces/{ns}") == before


@MODULE_LOOP
async def test_a_nul_byte_in_any_console_path_is_a_404(api: Api) -> None:
    for path in ("/console/static/x%00.css", "/console/static/%00", "/console/static/a/%00/b",
                 "/console/%00", "/api/v1/namespaces/%00/configmaps"):
        r = await api.get(path, token=None)
        assert r.status in (401, 404), r


# ---- bounded work -------------------------------------------------------------------------------


def alias_bomb(levels: int) -> bytes:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", 'a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    lines.append(f"data: {{k: v}}\nspec: *a{levels}")
    return "\n".join(lines).encode()


@MODULE_LOOP
async def test_a_yaml_alias_bomb_is_refused_and_the_server_stays_responsive(api: Api) -> None:
    bomb = alias_bomb(9)   # ~400 bytes, 9**9 = 387 million strings expanded
    assert len(bomb) < 1000
    with nothing_written(api.server):
        create = asyncio.ensure_future(api.post(CM, None, data=bomb, ctype="application/yaml"))
        apply = asyncio.ensure_future(api.patch(f"{CM}/bomb", None,
                                                "application/apply-patch+yaml", data=bomb,
                                                params={"fieldManager": "t"}))
        assert (await api.get("/readyz")).status == 200
        for r in (await create, await apply):
            assert_status(r, 400, "BadRequest", mentions=("excessive aliasing",))
    # anchors and aliases of ordinary size still work
    doc = (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: anchors, labels: &l {a: b}}\n"
           b"data: {x: &v shared}\nbinaryData: {}\nimmutable: false\n")
    r = await api.post(CM, data=doc, ctype="application/yaml")
    assert r.status == 201, r


@MODULE_LOOP
async def test_readyz_answers_while_a_large_upload_is_in_flight(api: Api) -> None:
    """A request body still arriving holds no one up: /readyz answers before
    the upload finishes (ordering, not timing)."""
    gate = asyncio.Event()
    sent = 0

    async def slow_body() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, '
        yield b'"data": {"k": "'
        for _ in range(4):
            yield b"x" * (256 * 1024)
            sent += 1
        await gate.wait()
        for _ in range(40):
            yield b"x" * (256 * 1024)
        yield b'"}}'

    upload = asyncio.ensure_future(api.call("POST", CM, data=slow_body(),
                                            ctype="application/json"))
    while sent < 4:
        await asyncio.sleep(0.01)
    ready = await api.get("/readyz")
    assert ready.status == 200
    assert not upload.done()
    gate.set()
    r = await upload
    assert_status(r, 413, "RequestEntityTooLarge")


async def test_watches_beyond_the_limit_are_a_429_until_one_ends(tmp_path: Any) -> None:
    async with serving(tmp_path / "data", max_watches=2) as server, client(server) as a:
        url = server.url + "/api/v1/namespaces/default/configmaps?watch=true"
        hdrs = {"Authorization": f"Bearer {server.token}"}
        first = await a.session.get(url, headers=hdrs)
        second = await a.session.get(url, headers=hdrs)
        assert (first.status, second.status) == (200, 200)
        r = await a.get("/api/v1/namespaces/default/configmaps", params={"watch": "true"})
        assert_status(r, 429, "TooManyRequests", mentions=("at most 2",))
        assert r.headers["Retry-After"] == "1"
        assert (await a.get("/api/v1/namespaces/default/configmaps")).status == 200
        first.close()

        async def slot_freed() -> bool:
            probe = await a.session.get(url + "&timeoutSeconds=1", headers=hdrs)
            probe.close()
            return probe.status == 200

        await eventually(slot_freed, "a watch slot to be freed")
        second.close()


# ---- Kubernetes' rules --------------------------------------------------------------------------


@MODULE_LOOP
async def test_invalid_base64_in_a_secret_is_a_400_that_does_not_echo_the_value(api: Api) -> None:
    with nothing_written(api.server):
        for value, offset in ((SECRET_VALUE, 7), (SECRET_VALUE[:8], 7), ("abc", 0),
                              ("YWJj=A==", 4)):
            r = await api.post(SECRETS, secret("s1", password=value))
            st_ = assert_status(r, 400, "BadRequest",
                                mentions=("illegal base64 data at input byte", '"password"'))
            assert f"input byte {offset}" in st_["message"], st_
            assert value not in r.raw.decode(), st_
        r = await api.post(SECRETS, {**secret("s1"), "data": {"password": 12345}})
        assert_status(r, 400, "BadRequest", mentions=("password",))
        assert b"12345" not in r.raw
        r = await api.post(SECRETS, {**secret("s1"), "stringData": {"password": [SECRET_VALUE]}})
        assert_status(r, 400, "BadRequest")
        assert SECRET_VALUE.encode() not in r.raw
        r = await api.post(CM, {**cm("c1"), "binaryData": {"blob": "not base64!"}})
        assert_status(r, 400, "BadRequest", mentions=("illegal base64",))


@MODULE_LOOP
async def test_secret_and_configmap_keys_and_size_follow_kubernetes(api: Api) -> None:
    with nothing_written(api.server):
        r = await api.post(SECRETS, secret("s1", **{"bad key!": b64("v")}))
        assert_status(r, 422, "Invalid", fields=("data[bad key!]",))
        r = await api.post(SECRETS, {**secret("s1"), "stringData": {"..dots": SECRET_VALUE}})
        st_ = assert_status(r, 422, "Invalid", fields=("data[..dots]",))
        assert SECRET_VALUE not in json.dumps(st_)
        for key in (".", "..", "k" * 254, "a/b", ""):
            r = await api.post(CM, cm("c1", **{key: "v"}))
            assert_status(r, 422, "Invalid", fields=(f"data[{key}]",))
        r = await api.post(SECRETS, secret("big", blob=base64.b64encode(
            b"\0" * (MiB + MiB // 10)).decode()))
        assert_status(r, 422, "Invalid", fields=("data",), mentions=("1048576",))
        r = await api.post(CM, {**cm("both", k="v"), "binaryData": {"k": b64("v")}})
        assert_status(r, 422, "Invalid", fields=("binaryData[k]",))
    at_limit = base64.b64encode(b"\0" * MiB).decode()
    assert (await api.post(SECRETS, secret("exactly-1mib", blob=at_limit))).status == 201
    assert (await api.post(SECRETS, secret("ok", **{"tls.crt": b64("x"),
                                                    "KEY_name-1": b64("y")}))).status == 201


@MODULE_LOOP
async def test_an_immutable_secret_keeps_its_data(api: Api) -> None:
    created = await api.ok("POST", SECRETS, {**secret("frozen", k=b64("v")), "immutable": True})
    with nothing_written(api.server):
        changed = {**created, "data": {"k": b64("other")}}
        assert_status(await api.put(f"{SECRETS}/frozen", changed), 422, "Invalid",
                      fields=("data",))
        thawed = {**created, "immutable": False}
        assert_status(await api.put(f"{SECRETS}/frozen", thawed), 422, "Invalid",
                      fields=("immutable",))
    labelled = {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}}}
    assert (await api.put(f"{SECRETS}/frozen", labelled)).status == 200


@MODULE_LOOP
async def test_a_negative_resource_version_is_a_400(api: Api) -> None:
    for params in ({"watch": "true", "resourceVersion": "-5"},
                   {"resourceVersion": "-5"}, {"resourceVersion": "abc"},
                   {"watch": "1", "resourceVersion": "1.5"}):
        r = await api.get(CM, params=params)
        assert_status(r, 400, "BadRequest", mentions=("resource version",))
    await api.ok("POST", CM, cm("rv"))
    assert_status(await api.get(f"{CM}/rv", params={"resourceVersion": "-1"}), 400,
                  "BadRequest")
    assert (await api.get(CM, params={"resourceVersion": "0"})).status == 200


@MODULE_LOOP
@pytest.mark.parametrize("path", ["/readyz", "/livez", "/healthz", "/version",
                                  "/console/static/console.css", "/console/"])
async def test_an_invalid_credential_is_a_401_on_every_path(api: Api, path: str) -> None:
    assert (await api.get(path, token="not-a-token")).status == 401
    assert (await api.get(path, headers={"Authorization": "bearer not-a-token"},
                          token=None)).status == 401
    assert (await api.get(path, token=None)).status != 401
    assert (await api.get(path)).status != 401


@MODULE_LOOP
async def test_immutable_metadata_fields_are_refused_not_dropped(api: Api) -> None:
    created = await api.ok("POST", CM, cm("imm", k="v"))
    meta = created["metadata"]
    with nothing_written(api.server):
        for op_path, value in (("/metadata/uid", "6a1e2b9c-0000-0000-0000-000000000000"),
                               ("/metadata/creationTimestamp", "2001-01-01T00:00:00Z")):
            r = await api.patch(f"{CM}/imm", [{"op": "replace", "path": op_path,
                                               "value": value}],
                                "application/json-patch+json")
            field = "metadata." + op_path.rsplit("/", 1)[1]
            st_ = assert_status(r, 422, "Invalid", fields=(field,))
            assert "field is immutable" in st_["message"]
        r = await api.patch(f"{CM}/imm", {"metadata": {"uid": "other"}},
                            "application/merge-patch+json")
        assert_status(r, 422, "Invalid", fields=("metadata.uid",))
        r = await api.put(f"{CM}/imm", {**created, "metadata": {**meta, "uid": "other"}})
        assert_status(r, 422, "Invalid", fields=("metadata.uid",))
    # The same instant written another way (as the Python client writes it) is no change;
    # leaving the fields out keeps them.
    same = meta["creationTimestamp"].replace("Z", "+00:00")
    r = await api.put(f"{CM}/imm", {**created, "metadata": {**meta, "creationTimestamp": same},
                                    "data": {"k": "v2"}})
    assert r.status == 200, r
    assert r.body["metadata"]["creationTimestamp"] == meta["creationTimestamp"]
    slim = {k: v for k, v in r.body["metadata"].items() if k not in ("uid", "creationTimestamp")}
    r = await api.put(f"{CM}/imm", {**r.body, "metadata": slim, "data": {"k": "v3"}})
    assert r.status == 200, r
    assert r.body["metadata"]["uid"] == meta["uid"]


# ---- an internal error: one 500 Status, one log line, no locals ---------------------------------


async def test_an_unexpected_exception_is_one_500_status_and_one_log_line(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def explode(_request: web.Request) -> web.Response:
        token_table = {SECRET_VALUE: "admin"}  # a local the old traceback printed
        raise RuntimeError(f"boom with {len(token_table)} entries")

    caplog.set_level(logging.DEBUG, logger="racksmith.apiserver")
    async with serving(tmp_path, extra_routes=[("GET", "/explode", explode)]) as server, \
            client(server) as a:
        caplog.clear()
        r = await a.get("/explode")
        assert r.status == 500
        status = r.body
        assert status["kind"] == "Status" and status["reason"] == "InternalError"
        request_id = r.headers["Audit-Id"]
        assert request_id in status["message"]
        errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(errors) == 1, [rec.getMessage() for rec in errors]
        line = errors[0].getMessage()
        assert request_id in line and "RuntimeError" in line and "\n" not in line
        assert errors[0].exc_info is None
        assert all(SECRET_VALUE not in rec.getMessage() for rec in caplog.records)


# ---- property test of the whole HTTP surface (its own process) ----------------------------------

COLLECTIONS = ["/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/secrets",
               "/api/v1/namespaces/default/pods", "/api/v1/namespaces",
               "/apis/metal3.io/v1alpha1/namespaces/default/baremetalhosts",
               "/apis/cluster.racksmith.io/v1alpha1/namespaces/default/machines",
               "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
               "/api/v1/configmaps", "/apis/coordination.k8s.io/v1/namespaces/default/leases"]
SUFFIXES = ["", "/fz", "/fz/status", "/fz/eviction", "/default/finalize", "/fz/scale",
            "/%00", "/fz/x/y/z", "/..%2f..", "/fz%20x"]
QUERY_KEYS = ["limit", "continue", "watch", "resourceVersion", "timeoutSeconds",
              "labelSelector", "fieldSelector", "dryRun", "fieldManager", "fieldValidation",
              "force", "propagationPolicy", "orphanDependents", "gracePeriodSeconds",
              "allowWatchBookmarks", "sendInitialEvents", "includeObject", "pretty"]
CTYPES = ["application/json", "application/yaml", "application/merge-patch+json",
          "application/json-patch+json", "application/strategic-merge-patch+json",
          "application/apply-patch+yaml", "application/vnd.kubernetes.protobuf", "text/plain",
          "application/json; charset=utf-8", ""]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12)


@st.composite
def objects(draw: st.DrawFn) -> Any:
    """Objects that look like Kubernetes objects with one part replaced by noise."""
    base: Obj = {"apiVersion": draw(st.sampled_from(["v1", "metal.racksmith.io/v1alpha1",
                                                     "policy/v1", "x"])),
                 "kind": draw(st.sampled_from(["ConfigMap", "Secret", "Namespace", "Pod",
                                               "BareMetalHost", "Eviction", "DeleteOptions"])),
                 "metadata": {"name": "fz"}}
    field = draw(st.sampled_from(["metadata", "metadata.name", "metadata.generateName",
                                  "metadata.labels", "metadata.finalizers",
                                  "metadata.ownerReferences", "metadata.managedFields",
                                  "metadata.resourceVersion", "metadata.uid", "spec", "data",
                                  "stringData", "status", "preconditions", "deleteOptions",
                                  "propagationPolicy", "binaryData", "immutable"]))
    value = draw(json_values)
    node = base
    parts = field.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return base


bodies = st.one_of(
    st.none(),
    objects().map(lambda o: json.dumps(o).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    objects().map(lambda o: json.dumps([{"op": "replace", "path": "/metadata/name",
                                         "value": o}]).encode()),
    st.binary(max_size=64),
    st.sampled_from([b"a: &a [1]\nb: *a\n", b"{", b"- - -", b"k8s\x00\x0a\x0b",
                     b"metadata: {name: [x]}", b"!!python/object:os.system ls",
                     b"\xff\xfe", b"1: 2\n", b"apiVersion: v1\nkind: ConfigMap\n"
                     b"metadata:\n  name: fz\ndata:\n  ? {a: 1}\n  : x\n"]),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes | None]:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
                                   "HEAD"]))
    path = draw(st.sampled_from(COLLECTIONS)) + draw(st.sampled_from(SUFFIXES))
    query = draw(st.dictionaries(st.sampled_from(QUERY_KEYS),
                                 st.one_of(st.text(max_size=16),
                                           st.integers(-(2**80), 2**80).map(str),
                                           st.sampled_from(["true", "All", "-5", "0", "Strict",
                                                            "Orphan", "a=b,c!=d", "x in (y)",
                                                            "metadata.name=fz"])),
                                 max_size=3))
    headers = {"Content-Type": draw(st.sampled_from(CTYPES))}
    body = draw(bodies)
    encoding = draw(st.sampled_from([None, None, None, "gzip", "deflate", "br"]))
    if encoding is not None and body is not None:
        headers["Content-Encoding"] = encoding
        if draw(st.booleans()) and encoding == "gzip":
            body = gzip.compress(body)
    if draw(st.integers(0, 9)) == 0:
        headers["Accept"] = draw(st.sampled_from([
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            "application/vnd.kubernetes.protobuf", "*/*;q=x"]))
    qs = urllib.parse.urlencode(query)
    return method, path + ("?" + qs if qs else ""), headers, body


@pytest.fixture(scope="module")
def fuzz_target(server_process: ServerProc) -> Iterator[tuple[ServerProc, ssl.SSLContext]]:
    ctx = ssl.create_default_context(cafile=str(server_process.ca_path))
    ctx.check_hostname = False
    yield server_process, ctx


def _send(target: tuple[ServerProc, ssl.SSLContext], method: str, path: str,
          headers: dict[str, str], body: bytes | None, token: str | None) -> int:
    proc, ctx = target
    url = urllib.parse.urlsplit(proc.url)
    conn = http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port, context=ctx,
                                       timeout=30)
    try:
        hdrs = dict(headers)
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(req=requests())
def test_no_request_gets_a_5xx(fuzz_target: tuple[ServerProc, ssl.SSLContext],
                               req: tuple[str, str, dict[str, str], bytes | None]) -> None:
    method, path, headers, body = req
    proc, _ = fuzz_target
    status = _send(fuzz_target, method, path, headers, body, proc.token)
    assert status < 500, (method, path, headers, body, status)
    assert _send(fuzz_target, "GET", "/readyz", {}, None, None) == 200


def test_the_fuzzed_server_logged_no_token_and_no_internal_error(
        fuzz_target: tuple[ServerProc, ssl.SSLContext]) -> None:
    proc, _ = fuzz_target
    for token in (proc.token, SECRET_VALUE):
        _send(fuzz_target, "POST", "/api/v1/namespaces/default/secrets",
              {"Content-Type": "application/json"},
              json.dumps({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "Bad Name!"},
                          "stringData": {"password": SECRET_VALUE}}).encode(), token)
    log = proc.log()
    assert proc.token not in log
    assert SECRET_VALUE not in log
    assert "internal error" not in log
